//! `reel mcp check RUN|TAPE`: a linter for a recorded MCP session. It
//! reads the record a proxy made (`reel mcp record`) and says what the
//! server (or the client) did that the protocol, or a careful server,
//! would not:
//!
//! - a line that is not JSON on the server's standard output (the proxy
//!   kept it as a call `mcp:unmatched`);
//! - tool definitions (every recorded `tools/list` page) whose
//!   `inputSchema` or `outputSchema` is no usable JSON Schema of an
//!   object, without a description, or listed twice under one name;
//! - requests the server never answered (the session ended first), and
//!   answers to ids no request was waiting for;
//! - notifications that carry an id;
//! - progress after the result (or on a token no request carries);
//! - `structuredContent` off the tool's declared `outputSchema`, or
//!   missing when one is declared;
//! - `tools/call`s slower than a threshold ([`Config::slow`]).
//!
//! Each [`Finding`] names the fact and the call it points at, and says
//! what to do. The check reads the record only: it starts no server.

mod tools;
mod wire;

use std::collections::HashMap;
use std::io::BufReader;
use std::path::Path;
use std::time::Duration;

use reel::fact::{CallOutcome, FactKind};
use reel::matching::resolve_refs;
use reel::tape::{Tape, TapeError};
use reel_archive::{Archive, ArchiveConfig, ArchiveError, TapeExt};
use serde::Serialize;
use serde_json::Value;

/// What `reel mcp check` looks for, and how.
#[derive(Debug, Clone)]
pub struct Config {
    /// A `tools/call` answered later than this is [`Rule::Slow`].
    pub slow: Duration,
}

/// The default [`Config::slow`]: 5 seconds, past which an agent's user
/// waits visibly on one tool (and many clients' own timeouts near).
pub const DEFAULT_SLOW: Duration = Duration::from_secs(5);

impl Default for Config {
    fn default() -> Config {
        Config { slow: DEFAULT_SLOW }
    }
}

/// What a finding is about (its stored name, kebab-case, is what `--json`
/// and the text say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A line that is not JSON where only MCP messages may go.
    NotJson,
    /// A tool's `inputSchema` is missing, no valid JSON Schema, or not of
    /// an object.
    InputSchema,
    /// A tool's `outputSchema` is no valid JSON Schema, or not of an
    /// object.
    OutputSchema,
    /// A tool without a description.
    NoDescription,
    /// Two tools listed under one name.
    DuplicateName,
    /// A request the server never answered.
    NeverAnswered,
    /// A response to an id no request was waiting for.
    UnaskedAnswer,
    /// A notification (`notifications/...`) that carries an id.
    NotificationWithId,
    /// Progress for a request after its result.
    ProgressAfterResult,
    /// Progress on a token no request in flight carries.
    StrayProgress,
    /// A result whose `structuredContent` is off (or without) the tool's
    /// declared `outputSchema`.
    OffOutputSchema,
    /// A `tools/call` slower than [`Config::slow`].
    Slow,
    /// A request the proxy refused (a JSON-RPC batch, SEP-2243 headers
    /// that disagree with the body).
    Refused,
    /// Any other message the proxy could not link.
    Unmatched,
}

impl Rule {
    /// The rule's name, as the text and `--json` say it.
    pub fn name(self) -> &'static str {
        match self {
            Rule::NotJson => "not-json",
            Rule::InputSchema => "input-schema",
            Rule::OutputSchema => "output-schema",
            Rule::NoDescription => "no-description",
            Rule::DuplicateName => "duplicate-name",
            Rule::NeverAnswered => "never-answered",
            Rule::UnaskedAnswer => "unasked-answer",
            Rule::NotificationWithId => "notification-with-id",
            Rule::ProgressAfterResult => "progress-after-result",
            Rule::StrayProgress => "stray-progress",
            Rule::OffOutputSchema => "off-output-schema",
            Rule::Slow => "slow",
            Rule::Refused => "refused",
            Rule::Unmatched => "unmatched",
        }
    }
}

/// One thing the session did that it should not have.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What it is about.
    pub rule: Rule,
    /// The seq of the fact it points at (`reel show RUN` lists it).
    pub seq: u64,
    /// The recorded call it is about (for a message the proxy could not
    /// link, the call `mcp:unmatched` that keeps it).
    pub call: Option<String>,
    /// The MCP tool it is about, when one is.
    pub tool: Option<String>,
    /// What happened, in a sentence.
    pub what: String,
    /// What to do about it.
    pub fix: String,
}

/// What `reel mcp check` found in one recorded session.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Where the session came from (a tape path, or `run ID in DIR`).
    pub source: String,
    /// The run's id.
    pub run_id: String,
    /// The threshold of [`Rule::Slow`], in milliseconds.
    pub slow_ms: u64,
    /// How many tools the recorded listings offered.
    pub tools: usize,
    /// How many `tools/call`s the record holds.
    pub calls: usize,
    /// Every finding, by rule, in the record's order within one.
    pub findings: Vec<Finding>,
}

impl Report {
    /// Whether nothing was found.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// The report as text: one paragraph per finding (the rule, the fact
    /// and call, what happened, then what to do), and a last line that
    /// counts. Recorded strings are in it as recorded: escape each line
    /// before it reaches a terminal.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let mut at = format!("#{}", f.seq);
            if let Some(call) = &f.call {
                at.push_str(&format!(", call {call}"));
            }
            if let Some(tool) = &f.tool {
                at.push_str(&format!(", tool `{tool}`"));
            }
            out.push_str(&format!("{} ({at}): {}\n", f.rule.name(), f.what));
            out.push_str(&format!("  fix: {}\n", f.fix));
        }
        let n = self.findings.len();
        let looked = format!(
            "{} tool{} listed, {} tools/call{}, slow past {} ms",
            self.tools,
            plural(self.tools),
            self.calls,
            plural(self.calls),
            self.slow_ms
        );
        if n == 0 {
            out.push_str(&format!("{}: no findings ({looked})\n", self.source));
        } else {
            out.push_str(&format!(
                "{}: {n} finding{} ({looked})\n",
                self.source,
                plural(n)
            ));
        }
        out
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Why a session could not be checked.
#[derive(Debug)]
pub enum LoadError {
    /// Neither a tape file nor a run of the archive, or no MCP session in
    /// it (a usage error: exit code 64, as for `mock` and `verify`).
    NoSession(String),
    /// A tape or run that is damaged (exit code 2).
    Damaged(String),
    /// Anything else (a locked archive, a file that cannot be read: exit
    /// code 1).
    Failed(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NoSession(m) | LoadError::Damaged(m) | LoadError::Failed(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// Loads `what` (a tape file when such a file exists, else a run id in
/// the archive at `archive`) and returns its tape and where it came from.
pub fn load(what: &str, archive: &Path) -> Result<(Tape, String), LoadError> {
    let path = Path::new(what);
    if path.is_file() {
        let file = std::fs::File::open(path)
            .map_err(|e| LoadError::Failed(format!("cannot read {what}: {e}")))?;
        let tape = Tape::read(BufReader::new(file)).map_err(|e| match e {
            TapeError::Line { line: 1, .. } => {
                LoadError::NoSession(format!("{what} is not a tape: {e}"))
            }
            TapeError::Io(e) => LoadError::Failed(format!("cannot read {what}: {e}")),
            e => LoadError::Damaged(format!(
                "{what} is a damaged tape: {e}; export the run again (`reel export RUN`)"
            )),
        })?;
        if !tape.digest_matches() {
            return Err(LoadError::Damaged(format!(
                "{what}: its facts do not match the digest in its header (the tape was changed \
                 after it was exported): export the run again (`reel export RUN`)"
            )));
        }
        return Ok((tape, what.to_owned()));
    }
    if !archive.is_dir() {
        return Err(LoadError::NoSession(format!(
            "{what} is neither a tape file nor a run (no archive at {})",
            archive.display()
        )));
    }
    let failed = |e: ArchiveError| {
        if e.is_damage() {
            LoadError::Damaged(e.to_string())
        } else if matches!(e, ArchiveError::UnknownRun { .. }) {
            LoadError::NoSession(format!(
                "{what} is neither a tape file nor a run in {}: {e}",
                archive.display()
            ))
        } else {
            LoadError::Failed(e.to_string())
        }
    };
    let opened = Archive::open(archive, ArchiveConfig::default()).map_err(failed)?;
    let tape = Tape::export(&opened, what).map_err(failed)?;
    Ok((tape, format!("run {what} in {}", archive.display())))
}

/// One recorded call, as the check sees it.
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) tool: String,
    pub(crate) args: Value,
    pub(crate) seq: u64,
    pub(crate) offset: u64,
    /// The `call.ended`'s seq and offset, and the outcome.
    pub(crate) end: Option<(u64, u64, CallOutcome)>,
}

impl Call {
    /// An MCP `tools/call` (the protocol's exchanges and the proxy's own
    /// records are named `mcp:...`; a tool name has no colon).
    pub(crate) fn is_tool_call(&self) -> bool {
        !self.tool.starts_with("mcp:")
    }
}

/// Checks the session `tape` holds (from `source`).
pub fn check(tape: &Tape, source: String, config: &Config) -> Result<Report, LoadError> {
    let artifacts: HashMap<String, Vec<u8>> = tape.artifacts.iter().cloned().collect();
    let mut calls: Vec<Call> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut findings = Vec::new();
    for fact in &tape.facts {
        let mut kind = fact.kind.clone();
        resolve_refs(&mut kind, &artifacts);
        match kind {
            FactKind::CallStarted(c) if c.parent_call.is_none() => {
                index.insert(c.call_id.clone(), calls.len());
                calls.push(Call {
                    id: c.call_id,
                    tool: c.tool_name,
                    args: c.args,
                    seq: fact.seq,
                    offset: fact.offset,
                    end: None,
                });
            }
            FactKind::CallEnded(e) => {
                let Some(&i) = fact.call.as_ref().and_then(|id| index.get(id)) else {
                    continue;
                };
                calls[i].end = Some((fact.seq, fact.offset, e.outcome));
            }
            FactKind::Progress(_) => {
                let Some(&i) = fact.call.as_ref().and_then(|id| index.get(id)) else {
                    continue;
                };
                if calls[i].end.is_some() {
                    findings.push(wire::progress_after(&calls[i], fact.seq));
                }
            }
            _ => {}
        }
    }
    let listed = tools::listed(&calls);
    let mcp = calls
        .iter()
        .any(|c| c.tool.starts_with("mcp:") || c.is_tool_call());
    if !mcp {
        return Err(LoadError::NoSession(format!(
            "{source} holds no MCP session (no call at all)"
        )));
    }
    let stdio = tape
        .header
        .run
        .labels
        .get("mcp.transport")
        .is_none_or(|t| t == "stdio");
    findings.extend(wire::findings(&calls, stdio));
    findings.extend(tools::definitions(&listed));
    findings.extend(tools::results(&calls, &listed));
    findings.extend(slow(&calls, config.slow));
    findings.sort_by_key(|f| (f.rule, f.seq));
    Ok(Report {
        source,
        run_id: tape.header.run.run_id.clone(),
        slow_ms: config.slow.as_millis() as u64,
        tools: listed.len(),
        calls: calls.iter().filter(|c| c.is_tool_call()).count(),
        findings,
    })
}

/// The `tools/call`s answered later than `limit`.
fn slow(calls: &[Call], limit: Duration) -> Vec<Finding> {
    calls
        .iter()
        .filter(|c| c.is_tool_call())
        .filter_map(|c| {
            let (seq, offset, outcome) = c.end.as_ref()?;
            if matches!(outcome, CallOutcome::Aborted { .. }) || wire::unanswered(outcome) {
                return None;
            }
            let took = Duration::from_nanos(offset.saturating_sub(c.offset));
            (took > limit).then(|| Finding {
                rule: Rule::Slow,
                seq: *seq,
                call: Some(c.id.clone()),
                tool: Some(c.tool.clone()),
                what: format!(
                    "`{}` took {} ms to answer (over {} ms)",
                    c.tool,
                    took.as_millis(),
                    limit.as_millis()
                ),
                fix: "make the tool answer sooner, or send notifications/progress while it \
                      works so the client can tell slow from stuck (raise --slow if this is \
                      expected)"
                    .into(),
            })
        })
        .collect()
}

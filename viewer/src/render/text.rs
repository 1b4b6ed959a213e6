//! The text rendering for terminals: one line per fact, indented by call
//! depth, then a summary (call tree, ledgers, anomalies).
//!
//! Lines stream: [`TextRenderer::fact`] renders a fact as it is pushed into
//! the timeline builder, so a run of any size renders in bounded memory.

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use reel::fact::*;
use reel::{Fact, RunRecord};
use serde_json::Value;

use crate::display::{cut, ProgressTemplates};
use crate::render::terminal::{escape, JsonSafe};
use crate::timeline::{Timeline, TimelineBuilder};

/// Formats unix nanoseconds as RFC 3339 (UTC, milliseconds).
pub fn timestamp(unix_nanos: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(unix_nanos.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// Formats a duration in nanoseconds for people: `850ns`, `12.3µs`,
/// `4.56ms`, `1.23s`, `2m03s`.
pub fn duration(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2}ms", ns as f64 / 1e6),
        1_000_000_000..=59_999_999_999 => format!("{:.2}s", ns as f64 / 1e9),
        _ => format!("{}m{:02}s", ns / 60_000_000_000, (ns / 1_000_000_000) % 60),
    }
}

/// A JSON value on one line, cut to `limit` characters. The characters
/// JSON leaves raw that a terminal would act on are written as JSON's own
/// `\uXXXX` escapes ([`JsonSafe`]), so the line reads as JSON still.
pub fn compact(value: &Value, limit: usize) -> String {
    let mut out = JsonSafe::new(Vec::new());
    // Writing a Value to memory cannot fail.
    let _ = serde_json::to_writer(&mut out, value);
    cut(&String::from_utf8_lossy(&out.into_inner()), limit)
}

/// A tool spec on one line, as `reel show` prints it after a call's args:
/// `spec "Title" [hints] needs a, b wants x` (each part only when the spec
/// has it).
///
/// ```
/// use reel::spec::{Annotations, ToolSpec};
/// use reel_viewer::render::text::spec_summary;
///
/// let spec = ToolSpec::new::<String, ()>("deploy")
///     .title("Deploy a service")
///     .annotations(Annotations { destructive_hint: Some(true), ..Annotations::default() })
///     .needs(["github"]);
/// assert_eq!(spec_summary(&spec), r#"spec "Deploy a service" [destructive] needs github"#);
/// ```
pub fn spec_summary(spec: &reel::spec::ToolSpec) -> String {
    let mut d = String::from("spec");
    if let Some(t) = &spec.title {
        let _ = write!(d, " {:?}", cut(t, 80));
    }
    if let Some(id) = &spec.id {
        let _ = write!(d, " id {id}");
    }
    if let Some(a) = &spec.annotations {
        let words = a.words();
        if !words.is_empty() {
            let _ = write!(d, " [{}]", words.join(", "));
        }
    }
    if !spec.needs.is_empty() {
        let _ = write!(d, " needs {}", spec.needs.join(", "));
    }
    if !spec.wants.is_empty() {
        let _ = write!(d, " wants {}", spec.wants.join(", "));
    }
    d
}

/// Renders text, with or without ANSI colours, progress lines in the
/// wording of its templates.
#[derive(Debug, Clone, Default)]
pub struct TextRenderer {
    /// Use ANSI colours.
    pub color: bool,
    /// The wording of progress lines (default: seed 000's).
    pub templates: ProgressTemplates,
}

const DIM: Style = AnsiColor::BrightBlack.on_default();
const BOLD: Style = Style::new().bold();
const GREEN: Style = AnsiColor::Green.on_default();
const RED: Style = AnsiColor::Red.on_default();
const YELLOW: Style = AnsiColor::Yellow.on_default();
const CYAN: Style = AnsiColor::Cyan.on_default();

impl TextRenderer {
    /// A renderer with the default progress wording.
    pub fn new(color: bool) -> TextRenderer {
        TextRenderer {
            color,
            templates: ProgressTemplates::default(),
        }
    }

    /// The same renderer with these progress templates.
    pub fn with_templates(mut self, templates: ProgressTemplates) -> TextRenderer {
        self.templates = templates;
        self
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.color {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_owned()
        }
    }

    /// The header of a run: id, state, start, duration, identity, counts.
    pub fn header(&self, record: &RunRecord) -> String {
        let state_style = match record.state {
            reel::RunState::Completed => GREEN,
            reel::RunState::Running => CYAN,
            _ => RED,
        };
        // A call outside any run has no run: the header says so, and names
        // the key `reel show` takes.
        let title = match &record.outside_run {
            None => format!(
                "{} {}",
                self.paint(BOLD, "run"),
                self.paint(BOLD, &escape(&record.run_id))
            ),
            Some(call) => format!(
                "{}  call {} (kept as {})",
                self.paint(BOLD, "no run"),
                self.paint(BOLD, &escape(call)),
                escape(&record.run_id)
            ),
        };
        let mut out = format!(
            "{title}  {}  started {}",
            self.paint(state_style, record.state.as_str()),
            timestamp(record.started_at),
        );
        if let Some(d) = record.duration_ns() {
            let _ = write!(out, "  took {}", duration(d));
        }
        let _ = write!(
            out,
            "  {} {}, {} {}",
            record.facts,
            plural(record.facts, "fact"),
            record.calls,
            plural(record.calls, "call")
        );
        if let Some(id) = &record.identity {
            let _ = write!(out, "\n  identity {}", escape(&identity(id)));
        }
        if let Some(s) = &record.session_id {
            let _ = write!(out, "\n  session {}", escape(s));
        }
        out
    }

    /// One fact, rendered after it was pushed into `b` (which knows the
    /// call's tool and depth).
    pub fn fact(&self, fact: &Fact, b: &TimelineBuilder) -> String {
        let (tool, depth) = fact
            .call
            .as_deref()
            .and_then(|c| b.call_info(c))
            .map(|(t, d)| (t.to_owned(), d + 1))
            .unwrap_or_default();
        let indent = "  ".repeat(depth);
        let who = match &fact.call {
            Some(c) if !tool.is_empty() => format!("{c} {tool} "),
            Some(c) => format!("{c} "),
            None => String::new(),
        };
        let (style, detail) = self.detail(fact, &tool);
        // Recorded strings are untrusted: no control character reaches the
        // terminal (an escape sequence could fake or hide lines). The kind
        // is recorded too (a kind this reel does not know keeps its name).
        let (who, detail) = (escape(&who), escape(&detail));
        format!(
            "{} {} {indent}{}{} {detail}",
            self.paint(
                DIM,
                &format!("{:>10}", format!("+{}", duration(fact.offset)))
            ),
            self.paint(DIM, &format!("#{:<4}", fact.seq)),
            self.paint(CYAN, &who),
            self.paint(style, &escape(fact.kind.name())),
        )
    }

    /// The readable detail of a fact (what `reel show` prints after its
    /// kind), without colours or control characters. `tool` is the tool of
    /// the fact's call.
    pub fn detail_text(&self, fact: &Fact, tool: &str) -> String {
        escape(&self.detail(fact, tool).1).into_owned()
    }

    fn detail(&self, fact: &Fact, tool: &str) -> (Style, String) {
        let plain = Style::new();
        match &fact.kind {
            FactKind::RunStarted(r) => {
                let mut d = format!("by {} {}", r.producer.name, r.producer.version);
                match &r.identity {
                    Some(id) => {
                        let _ = write!(d, "; identity {}", identity(id));
                    }
                    None => d.push_str("; no caller identity"),
                }
                if let Some(s) = &r.session_id {
                    let _ = write!(d, "; session {s}");
                }
                let scopes: Vec<_> = r.teardown_scopes.iter().map(|s| s.to_string()).collect();
                let _ = write!(d, "; teardown scopes [{}]", scopes.join(", "));
                (BOLD, d)
            }
            FactKind::CallStarted(c) => {
                let mut d = format!("▶ args {}", compact(&c.args, 100));
                if let Some(o) = &c.outside_run {
                    let _ = write!(
                        d,
                        " (outside any run, by {} {}",
                        o.producer.name, o.producer.version
                    );
                    match &o.identity {
                        Some(id) => {
                            let _ = write!(d, "; identity {}", identity(id));
                        }
                        None => d.push_str("; no caller identity"),
                    }
                    if let Some(s) = &o.session_id {
                        let _ = write!(d, "; session {s}");
                    }
                    let scopes: Vec<_> = o.teardown_scopes.iter().map(|s| s.to_string()).collect();
                    let _ = write!(d, "; teardown scopes [{}])", scopes.join(", "));
                }
                if let Some(p) = &c.parent_call {
                    let _ = write!(d, " (child of {p})");
                }
                if let Some(spec) = &c.spec {
                    let _ = write!(d, " · {}", spec_summary(spec));
                }
                if c.mode == CallMode::Sync {
                    d.push_str(" · sync");
                }
                (BOLD, d)
            }
            FactKind::CredentialRequested(c) => (plain, format!("{} ({})", c.need, mode(c.mode))),
            FactKind::CredentialResolved(c) => (
                GREEN,
                format!(
                    "{} ({}) fingerprint {}",
                    c.need,
                    mode(c.mode),
                    c.fingerprint.0
                ),
            ),
            FactKind::CredentialFailed(c) => {
                (RED, format!("{} ({}): {}", c.need, mode(c.mode), c.reason))
            }
            FactKind::CredentialRefused(c) => (YELLOW, format!("{}: {}", c.need, c.reason)),
            FactKind::ArtifactPut(a) => (
                plain,
                format!(
                    "{} {} {} B {}",
                    a.meta.id, a.meta.media_type, a.meta.size, a.meta.digest
                ),
            ),
            FactKind::ArtifactGet(a) => match &a.meta {
                Some(m) => (plain, format!("{} found, {} B", a.id, m.size)),
                None => (YELLOW, format!("{} not found", a.id)),
            },
            FactKind::ArtifactRefused(a) => (
                YELLOW,
                format!(
                    "{}: {}",
                    if a.op == ArtifactOp::Put {
                        "put"
                    } else {
                        "get"
                    },
                    a.reason
                ),
            ),
            FactKind::Progress(p) => (plain, self.templates.line(tool, &p.payload, p.count)),
            FactKind::Log(l) => {
                let mut d = format!("{:?}", l.level).to_lowercase();
                if let Some(s) = &l.subflow {
                    let _ = write!(d, " [{s}]");
                }
                let text = match &l.data {
                    Value::String(s) => cut(s, 120),
                    other => compact(other, 120),
                };
                let _ = write!(d, " {text}");
                let style = if l.level <= Level::Error {
                    RED
                } else if l.level == Level::Warning {
                    YELLOW
                } else {
                    plain
                };
                (style, d)
            }
            FactKind::ElicitRequested(e) => (
                plain,
                format!(
                    "\"{}\" ({}{})",
                    e.message,
                    if e.mode == ElicitMode::Form {
                        "form"
                    } else {
                        "url"
                    },
                    e.ttl_ms
                        .map(|t| format!(", ttl {}", duration(t * 1_000_000)))
                        .unwrap_or_default()
                        + &e.url
                            .as_deref()
                            .map(|u| format!(", {u}"))
                            .unwrap_or_default()
                ),
            ),
            FactKind::ElicitRefused(e) => (YELLOW, format!("\"{}\": {}", e.message, e.reason)),
            FactKind::ElicitAnswered(e) => {
                let mut d = match &e.outcome {
                    ElicitOutcome::Accept { content } => format!("accept {}", compact(content, 80)),
                    ElicitOutcome::Decline => "decline".into(),
                    ElicitOutcome::Cancel => "cancel".into(),
                    ElicitOutcome::Timeout => "timeout".into(),
                    ElicitOutcome::Error { message } => format!("error: {}", cut(message, 120)),
                };
                if !e.validation_errors.is_empty() {
                    let _ = write!(d, "; invalid: {}", e.validation_errors.join("; "));
                }
                if e.pre_resolved {
                    d.push_str(" (pre-resolved)");
                }
                (plain, d)
            }
            FactKind::TeardownRegistered(t) => {
                let what = match (t.first, t.registrations) {
                    (true, _) => "first".to_owned(),
                    // Recorded before liveness was counted.
                    (false, 0) => "repeat (kept the first)".to_owned(),
                    (false, n) => {
                        format!("repeat, registration {n} (kept the first, liveness refreshed)")
                    }
                };
                (plain, format!("{} {} {what}", t.scope, t.key_hash))
            }
            FactKind::TeardownRefused(t) => (YELLOW, format!("{}: {}", t.scope, t.reason)),
            FactKind::TeardownRan(t) => {
                let (style, o) = match &t.outcome {
                    TeardownOutcome::Ok => (plain, "ok".to_string()),
                    TeardownOutcome::Error { message } => (RED, format!("error: {message}")),
                    TeardownOutcome::TimedOut => (RED, "timed out".to_string()),
                };
                let mut d = format!(
                    "{} {} {o} in {}",
                    t.scope,
                    t.key_hash,
                    duration(t.duration_ns)
                );
                // How many executes kept the resource alive, and when it
                // was last used (seed 000's liveness); nothing on facts
                // recorded before it was counted.
                let last = || match t.last_registered_at {
                    0 => String::new(),
                    at => format!(" at {}", timestamp(at)),
                };
                match t.registrations {
                    0 => {}
                    1 => {
                        let _ = write!(d, "; registered once{}", last());
                    }
                    n => {
                        let _ = write!(d, "; kept alive by {n} registrations, the last{}", last());
                    }
                }
                (style, d)
            }
            FactKind::Effect(e) => {
                let outcome = match &e.outcome {
                    EffectOutcome::Ok(v) => format!("ok {}", compact(v, 80)),
                    EffectOutcome::Err(m) => format!("error: {m}"),
                };
                (
                    plain,
                    format!("{} {} → {outcome}", e.name, compact(&e.request, 60)),
                )
            }
            FactKind::Clock(c) => (plain, timestamp(c.unix_nanos)),
            FactKind::Random(r) => (plain, format!("{:#018x}", r.value)),
            FactKind::CancelRequested(c) => (
                YELLOW,
                c.reason.clone().unwrap_or_else(|| "(no reason)".into()),
            ),
            FactKind::CallOutput(o) => {
                let mut d = String::new();
                if let Some(s) = &o.stage {
                    let _ = write!(d, "[{s}] ");
                }
                d.push_str(&compact(&o.value, 100));
                if let Some(n) = &o.note {
                    let _ = write!(d, " ({n})");
                }
                (plain, d)
            }
            FactKind::CallEnded(e) => match &e.outcome {
                CallOutcome::Ok { result } => (
                    GREEN,
                    format!(
                        "■ ok in {} → {}",
                        duration(e.duration_ns),
                        compact(result, 100)
                    ),
                ),
                CallOutcome::Error { error } => (
                    RED,
                    format!("■ error in {}: {error}", duration(e.duration_ns)),
                ),
                CallOutcome::Aborted { reason } => (
                    YELLOW,
                    format!(
                        "■ aborted in {}{}",
                        duration(e.duration_ns),
                        reason
                            .as_ref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    ),
                ),
            },
            FactKind::RunEnded(e) => (BOLD, format!("{:?}", e.status).to_lowercase()),
            FactKind::Unknown { data, .. } => (
                YELLOW,
                format!(
                    "(a kind this reel does not know; from a newer writer) {}",
                    compact(data, 100)
                ),
            ),
        }
    }

    /// The summary after the facts: call tree, ledgers, anomalies.
    pub fn summary(&self, t: &Timeline) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.paint(BOLD, "calls"));
        if t.calls.is_empty() {
            out.push_str("  (none)\n");
        }
        for c in &t.calls {
            let status = match c.status {
                Some(CallStatus::Ok) => self.paint(GREEN, "ok"),
                Some(CallStatus::Error) => self.paint(RED, "error"),
                Some(CallStatus::Aborted) => self.paint(YELLOW, "aborted"),
                None => self.paint(RED, "never ended"),
            };
            let _ = write!(
                out,
                "  {}{} {}  {status}  {}  {} {}",
                "  ".repeat(c.depth),
                escape(&c.call_id),
                escape(&c.tool),
                c.duration_ns.map(duration).unwrap_or_else(|| "-".into()),
                c.facts,
                plural(c.facts, "fact")
            );
            if let Some(p) = &c.last_progress {
                let _ = write!(out, "  last progress: {}", escape(p));
            }
            out.push('\n');
        }
        if !t.credentials.is_empty() {
            let _ = writeln!(out, "{}", self.paint(BOLD, "credentials"));
            for c in &t.credentials {
                let _ = writeln!(
                    out,
                    "  #{} {} {} ({}){}",
                    c.seq,
                    escape(&c.need),
                    c.outcome,
                    mode(c.mode),
                    escape(
                        &c.fingerprint
                            .as_ref()
                            .map(|f| format!(" {f}"))
                            .or_else(|| c.reason.as_ref().map(|r| format!(": {r}")))
                            .unwrap_or_default()
                    )
                );
            }
        }
        if !t.artifacts.is_empty() {
            let _ = writeln!(out, "{}", self.paint(BOLD, "artifacts"));
            for a in &t.artifacts {
                let _ = writeln!(
                    out,
                    "  #{} {} {}{}",
                    a.seq,
                    a.op,
                    escape(a.id.as_deref().unwrap_or("-")),
                    a.size.map(|s| format!(" {s} B")).unwrap_or_default()
                );
            }
        }
        if !t.teardowns.is_empty() {
            let _ = writeln!(out, "{}", self.paint(BOLD, "teardown (registered vs ran)"));
            for d in &t.teardowns {
                let ran = match (&d.ran_seq, &d.outcome) {
                    (Some(s), Some(TeardownOutcome::Ok)) => format!("ran ok at #{s}"),
                    (Some(s), Some(TeardownOutcome::Error { message })) => {
                        format!("ran at #{s}, failed: {}", escape(message))
                    }
                    (Some(s), Some(TeardownOutcome::TimedOut)) => format!("ran at #{s}, timed out"),
                    _ => self.paint(RED, "never ran"),
                };
                let _ = writeln!(
                    out,
                    "  {} {} registered at #{}{}  {ran}",
                    d.scope,
                    escape(&d.key_hash),
                    d.registered_seq,
                    if d.repeats > 0 {
                        format!(" (+{} {})", d.repeats, plural(d.repeats, "repeat"))
                    } else {
                        String::new()
                    }
                );
            }
        }
        if t.anomalies.is_empty() {
            let _ = writeln!(out, "{} none", self.paint(BOLD, "anomalies"));
        } else {
            let _ = writeln!(
                out,
                "{}",
                self.paint(RED, &format!("anomalies ({})", t.anomalies.len()))
            );
            for a in &t.anomalies {
                let _ = writeln!(out, "  {}", escape(&a.describe()));
            }
        }
        out
    }

    /// A whole run as text (header, facts, summary).
    pub fn run<'a>(&self, record: &RunRecord, facts: impl IntoIterator<Item = &'a Fact>) -> String {
        let mut out = self.header(record);
        out.push('\n');
        let mut b = TimelineBuilder::default();
        for f in facts {
            b.push(f);
            out.push_str(&self.fact(f, &b));
            out.push('\n');
        }
        out.push_str(&self.summary(&b.finish()));
        out
    }
}

fn identity(id: &Identity) -> String {
    let part = |name: &str, v: &Option<String>| v.as_ref().map(|v| format!("{name}={v}"));
    let parts: Vec<_> = [
        part("tenant", &id.tenant),
        part("principal", &id.principal),
        part("conversation", &id.conversation),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "(empty)".into()
    } else {
        parts.join(" ")
    }
}

/// `word` or `words`, for a count.
fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        word.to_owned()
    } else {
        format!("{word}s")
    }
}

fn mode(m: CredentialMode) -> &'static str {
    match m {
        CredentialMode::Declared => "declared",
        CredentialMode::Pulled => "pulled",
    }
}

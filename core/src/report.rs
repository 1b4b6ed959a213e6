//! The replay report's data types: what a replay found, per call, with
//! the first divergence and a field-level diff.
//!
//! They live in the core so that every reader of a report reads it by
//! type: the replayer (`reel-replayer`) builds and writes it (beside a
//! tape, as `<tape>.report.json`), and the tape language server
//! (`reel-viewer`'s LSP) reads it, without the viewer depending on the
//! replayer. A renamed field is then a compile error on both sides, not a
//! silently empty diagnostic list.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fact::CallOutcome;
use crate::Fact;

/// One differing field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldDiff {
    /// Where: the fact's kind, then a JSON pointer into its fields, e.g.
    /// `progress:/payload/message` (the form an ignore rule takes).
    pub path: String,
    /// The recorded value (`None`: the field is absent in the record).
    pub expected: Option<Value>,
    /// The replayed value (`None`: the field is absent now).
    pub actual: Option<Value>,
}

/// What went differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DivergenceKind {
    /// A fact differs from the recorded one at the same place.
    FactMismatch,
    /// The tool filed a fact the record does not have.
    ExtraFact,
    /// The record has a fact the tool did not file.
    MissingFact,
    /// The tool asked for an effect the record does not have (it was not run).
    UnrecordedEffect,
    /// The call's result differs.
    Result,
    /// A child call differs from the recorded child.
    ChildCall,
}

impl DivergenceKind {
    /// The kind's name as the report's JSON writes it (`fact_mismatch`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            DivergenceKind::FactMismatch => "fact_mismatch",
            DivergenceKind::ExtraFact => "extra_fact",
            DivergenceKind::MissingFact => "missing_fact",
            DivergenceKind::UnrecordedEffect => "unrecorded_effect",
            DivergenceKind::Result => "result",
            DivergenceKind::ChildCall => "child_call",
        }
    }
}

impl std::fmt::Display for DivergenceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The first place where a call went differently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// What kind of difference.
    pub kind: DivergenceKind,
    /// Fact index within the call (its `call.started` is 0).
    pub index: usize,
    /// The recorded seq at that place, when there is one.
    pub seq: Option<u64>,
    /// The recorded fact (`{"kind", "data"}`), when there is one.
    pub expected: Option<Value>,
    /// The replayed fact, when there is one.
    pub actual: Option<Value>,
    /// Field-level differences.
    pub diff: Vec<FieldDiff>,
    /// One readable line.
    pub line: String,
}

/// How a call's replay went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every fact and the result matched.
    Matched,
    /// Something differs: see the divergence.
    Diverged,
    /// The tool is not in the registry: nothing was replayed.
    MissingTool,
    /// A child call served from the record (its tool was not re-driven).
    Served,
    /// Nothing differs, but equality could not be shown everywhere: at
    /// the places [`CallReport::unproven`] names, the record holds what
    /// redaction left (`[REDACTED]`), and the replayed values compared
    /// equal only as markers. Never reported as a match of the values.
    Unproven,
}

/// The recorded and replayed outcome of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultCheck {
    /// As recorded.
    pub expected: Option<CallOutcome>,
    /// As replayed.
    pub actual: Option<CallOutcome>,
    /// Whether they are equal.
    pub matches: bool,
}

/// The replay of one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallReport {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The parent call, for children.
    pub parent: Option<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// The first divergence, when there is one.
    pub divergence: Option<Divergence>,
    /// Facts the record has for the call's tool.
    pub facts_expected: usize,
    /// Facts the replayed tool filed.
    pub facts_replayed: usize,
    /// Effects the tool asked for that the record does not have (never run).
    pub unrecorded_effects: Vec<String>,
    /// The result.
    pub result: ResultCheck,
    /// Where equality could not be shown: the paths (as a diff names
    /// them) of recorded values that redaction hid, which the replay
    /// matched only as markers. Empty for a call proven exact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unproven: Vec<String>,
}

/// How many calls a replay re-drove, and how each came out: the first
/// line of the report's text and its `summary` in JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplaySummary {
    /// Calls whose tool was re-driven (exact, divergent or unproven).
    pub replayed: usize,
    /// Replayed calls that matched the record, every value shown equal.
    pub exact: usize,
    /// Replayed calls that went differently.
    pub divergent: usize,
    /// Replayed calls where nothing differs but equality could not be
    /// shown everywhere (see [`Verdict::Unproven`]).
    pub unproven: usize,
    /// Calls whose tool is not in the registry (not replayed).
    #[serde(default)]
    pub missing_tool: usize,
    /// Child calls served from the record (not re-driven).
    #[serde(default)]
    pub served: usize,
}

impl ReplaySummary {
    /// The summary of `calls`.
    pub fn of(calls: &[CallReport]) -> ReplaySummary {
        let mut s = ReplaySummary::default();
        for c in calls {
            match c.verdict {
                Verdict::Matched => s.exact += 1,
                Verdict::Diverged => s.divergent += 1,
                Verdict::Unproven => s.unproven += 1,
                Verdict::MissingTool => s.missing_tool += 1,
                Verdict::Served => s.served += 1,
            }
        }
        s.replayed = s.exact + s.divergent + s.unproven;
        s
    }
}

impl std::fmt::Display for ReplaySummary {
    /// `3 calls replayed: 1 exact, 1 divergent, 1 unproven` (then the
    /// calls not replayed, when there are any).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let calls = if self.replayed == 1 { "call" } else { "calls" };
        write!(
            f,
            "{} {calls} replayed: {} exact, {} divergent, {} unproven",
            self.replayed, self.exact, self.divergent, self.unproven
        )?;
        if self.missing_tool > 0 {
            write!(f, "; {} not replayed (tool missing)", self.missing_tool)?;
        }
        if self.served > 0 {
            write!(f, "; {} served from the record", self.served)?;
        }
        Ok(())
    }
}

/// The replay of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// Where the recording came from.
    pub source: String,
    /// The key the recording was kept under: the run's id, or for a call
    /// outside any run ([`ReplayReport::outside_run`]) the call's key.
    pub run_id: String,
    /// True when the recording is of a call outside any run (no run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outside_run: bool,
    /// One report per replayed call, in start order (children after their
    /// parent's start).
    pub calls: Vec<CallReport>,
    /// The re-derived timeline: every fact the replay filed, numbered in
    /// replay order, with the recorded times.
    pub facts: Vec<Fact>,
    /// Facts matched against the record.
    pub matched_facts: u64,
    /// The calls counted by verdict ([`ReplaySummary::of`] the calls).
    #[serde(default)]
    pub summary: ReplaySummary,
}

impl ReplayReport {
    /// True when no call went differently and every tool was found:
    /// each call matched, was served from the record, or is unproven
    /// (nothing differs, but redaction hid values, see
    /// [`ReplayReport::is_exact`]).
    pub fn is_match(&self) -> bool {
        self.calls.iter().all(|c| {
            matches!(
                c.verdict,
                Verdict::Matched | Verdict::Served | Verdict::Unproven
            )
        })
    }

    /// True when every replayed call is shown equal to the record at
    /// every place: [`ReplayReport::is_match`] with no unproven call.
    pub fn is_exact(&self) -> bool {
        self.calls
            .iter()
            .all(|c| matches!(c.verdict, Verdict::Matched | Verdict::Served))
    }

    /// Where the report of a replay of `tape` is kept: beside it, named
    /// `<tape>.report.json` (the language server shows its divergences at
    /// the diverging facts' lines).
    pub fn path_beside(tape: &std::path::Path) -> std::path::PathBuf {
        let mut name = tape.as_os_str().to_owned();
        name.push(".report.json");
        std::path::PathBuf::from(name)
    }

    /// Writes the report beside `tape` (see [`ReplayReport::path_beside`]).
    pub fn write_beside(&self, tape: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
        let path = ReplayReport::path_beside(tape);
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&path, json)?;
        Ok(path)
    }

    /// One readable line per call that did not match.
    pub fn problems(&self) -> Vec<String> {
        self.calls
            .iter()
            .filter_map(|c| match c.verdict {
                Verdict::Matched | Verdict::Served | Verdict::Unproven => None,
                Verdict::MissingTool => Some(format!(
                    "call {} `{}`: no tool {:?} in the registry: register it to replay this call",
                    c.call_id, c.tool, c.tool
                )),
                Verdict::Diverged => c.divergence.as_ref().map(|d| d.line.clone()),
            })
            .collect()
    }
}

impl std::fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.outside_run {
            writeln!(
                f,
                "replay of a call outside any run, kept as {} ({})",
                self.run_id, self.source
            )?;
        } else {
            writeln!(f, "replay of run {} ({})", self.run_id, self.source)?;
        }
        writeln!(f, "{}", ReplaySummary::of(&self.calls))?;
        for c in &self.calls {
            let v = match c.verdict {
                Verdict::Matched => "matched",
                Verdict::Diverged => "DIVERGED",
                Verdict::MissingTool => "MISSING TOOL",
                Verdict::Served => "served from the record",
                Verdict::Unproven => "UNPROVEN",
            };
            // Counted as the divergence line counts: the call's facts,
            // its `call.started` being fact 0.
            match c.verdict {
                Verdict::Diverged => writeln!(
                    f,
                    "  call {} `{}`: {v} ({} of the {} recorded facts of the tool replayed)",
                    c.call_id, c.tool, c.facts_replayed, c.facts_expected
                )?,
                _ => writeln!(
                    f,
                    "  call {} `{}`: {v} ({} facts)",
                    c.call_id, c.tool, c.facts_replayed
                )?,
            }
            if let Some(d) = &c.divergence {
                writeln!(f, "    {}", d.line)?;
            }
            if !c.unproven.is_empty() {
                writeln!(
                    f,
                    "    not shown equal: redaction hid {} in the record",
                    c.unproven.join(", ")
                )?;
            }
            for e in &c.unrecorded_effects {
                writeln!(f, "    unrecorded effect {e:?} (not run)")?;
            }
        }
        Ok(())
    }
}

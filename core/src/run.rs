//! The run record: what the archive knows about a run without reading its
//! facts. It is derived from the facts themselves (`run.started`,
//! `call.started`, `run.ended`), so it can always be rebuilt from them.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::fact::{CallOutcome, Fact, FactKind, Identity, RunStatus};

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Still being recorded.
    Running,
    /// Ended normally.
    Completed,
    /// Ended with an error.
    Failed,
    /// Was cancelled.
    Cancelled,
    /// The writer stopped (crashed) before the run ended.
    Incomplete,
}

impl RunState {
    /// Every state, in index order.
    pub const ALL: [RunState; 5] = [
        RunState::Running,
        RunState::Completed,
        RunState::Failed,
        RunState::Cancelled,
        RunState::Incomplete,
    ];

    /// The lower-case name, as the CLI spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
            RunState::Incomplete => "incomplete",
        }
    }

    /// True once no more facts will be appended.
    pub fn is_closed(self) -> bool {
        self != RunState::Running
    }
}

impl From<RunStatus> for RunState {
    fn from(s: RunStatus) -> RunState {
        match s {
            RunStatus::Completed => RunState::Completed,
            RunStatus::Failed => RunState::Failed,
            RunStatus::Cancelled => RunState::Cancelled,
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunState {
    type Err = String;
    fn from_str(s: &str) -> Result<RunState, String> {
        RunState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown run status {s:?}: use one of running, completed, failed, cancelled, incomplete"
                )
            })
    }
}

/// What the archive keeps about one run, beside its facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The key the archive keeps the stream under: the run's id, or for a
    /// call outside any run ([`RunRecord::outside_run`]) the call's
    /// [`OutsideRun::key`](crate::fact::OutsideRun::key). Use
    /// [`RunRecord::run`] for "the run id, if there is a run".
    pub run_id: String,
    /// Set when the stream is a call outside any run (seed 000: there is
    /// no run id): the call's id. `None` for a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_run: Option<String>,
    /// The hosting session, when the run is bound to one.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The caller's identity, when one was supplied.
    #[serde(default)]
    pub identity: Option<Identity>,
    /// Labels from `run.started`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Where the run stands.
    pub state: RunState,
    /// Wall-clock start, unix nanoseconds (the `at` of `run.started`).
    pub started_at: i64,
    /// Wall-clock end, unix nanoseconds, once ended.
    #[serde(default)]
    pub ended_at: Option<i64>,
    /// Number of facts recorded.
    pub facts: u64,
    /// Number of calls started.
    pub calls: u64,
    /// Number of calls ended.
    #[serde(default)]
    pub ended_calls: u64,
    /// Number of credentials that failed to resolve.
    #[serde(default)]
    pub failed_credentials: u64,
    /// Names of the tools called.
    #[serde(default)]
    pub tools: BTreeSet<String>,
}

impl RunRecord {
    /// The run's id; `None` for a call outside any run, which has none.
    pub fn run(&self) -> Option<&str> {
        self.outside_run.is_none().then_some(self.run_id.as_str())
    }

    /// What the stream is, for a person: `run <id>`, or `no run (call
    /// <id>, kept as <key>)`.
    pub fn describe(&self) -> String {
        match &self.outside_run {
            None => format!("run {}", self.run_id),
            Some(call) => format!("no run (call {call}, kept as {})", self.run_id),
        }
    }

    /// The tenant, when the caller supplied one.
    pub fn tenant(&self) -> Option<&str> {
        self.identity.as_ref()?.tenant.as_deref()
    }

    /// Duration in nanoseconds, once ended.
    pub fn duration_ns(&self) -> Option<u64> {
        self.ended_at
            .map(|end| end.saturating_sub(self.started_at).max(0) as u64)
    }

    /// A record for a stream that begins with this fact: a `run.started`,
    /// or the `call.started` of a call outside any run.
    pub fn from_first(fact: &Fact) -> Option<RunRecord> {
        let (run_id, outside_run, session_id, identity, labels) = match &fact.kind {
            FactKind::RunStarted(s) => (&s.run_id, None, &s.session_id, &s.identity, &s.labels),
            FactKind::CallStarted(c) => {
                let o = c.outside_run.as_deref()?;
                (
                    &o.key,
                    Some(c.call_id.clone()),
                    &o.session_id,
                    &o.identity,
                    &o.labels,
                )
            }
            _ => return None,
        };
        Some(RunRecord {
            run_id: run_id.clone(),
            outside_run,
            session_id: session_id.clone(),
            identity: identity.clone(),
            labels: labels.clone(),
            state: RunState::Running,
            started_at: fact.at,
            ended_at: None,
            facts: 0,
            calls: 0,
            ended_calls: 0,
            failed_credentials: 0,
            tools: BTreeSet::new(),
        })
    }

    /// Folds one more fact into the record. Returns true when a field other
    /// than the fact count changed.
    pub fn observe(&mut self, fact: &Fact) -> bool {
        self.facts = self.facts.max(fact.seq.saturating_add(1));
        match &fact.kind {
            FactKind::CallStarted(call) => {
                self.calls += 1;
                self.tools.insert(call.tool_name.clone());
                true
            }
            FactKind::CallEnded(end) => {
                self.ended_calls += 1;
                // A call outside any run ends its stream with its own end.
                if self.outside_run.is_some() && fact.call == self.outside_run {
                    self.state = match end.outcome {
                        CallOutcome::Ok { .. } => RunState::Completed,
                        CallOutcome::Error { .. } => RunState::Failed,
                        CallOutcome::Aborted { .. } => RunState::Cancelled,
                    };
                    self.ended_at = Some(fact.at);
                }
                true
            }
            FactKind::CredentialFailed(_) => {
                self.failed_credentials += 1;
                true
            }
            FactKind::RunEnded(end) => {
                self.state = end.status.into();
                self.ended_at = Some(fact.at);
                true
            }
            _ => false,
        }
    }
}

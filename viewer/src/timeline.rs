//! `Timeline`: a run rebuilt from its facts, pure (no IO).
//!
//! Built incrementally with [`TimelineBuilder::push`], so a run of any size
//! streams through it: the builder keeps one node per call, the ledgers and
//! the anomalies, never the facts themselves.

use std::collections::{BTreeMap, HashMap};

use reel_core::codec::{decode_fact, FactView, ViewSink};
use reel_core::fact::*;
use reel_core::gap::Gap;
use reel_core::sequence::Sequencer;
use reel_core::{Fact, RunRecord, RunState};
use serde::Serialize;

use crate::display::ProgressTemplates;

mod build;
pub use build::TimelineBuilder;

/// One call of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallNode {
    /// The call's id.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The parent call's id (nested dispatch).
    pub parent: Option<String>,
    /// Child calls' ids, in start order.
    pub children: Vec<String>,
    /// Seq of `call.started`.
    pub started_seq: u64,
    /// Offset of `call.started`, nanoseconds since the run started.
    pub started_offset: u64,
    /// Seq of `call.ended`, once ended.
    pub ended_seq: Option<u64>,
    /// Offset of `call.ended`.
    pub ended_offset: Option<u64>,
    /// Duration as recorded by `call.ended`.
    pub duration_ns: Option<u64>,
    /// How it ended.
    pub status: Option<CallStatus>,
    /// The error, when it failed.
    pub error: Option<String>,
    /// Facts filed under this call.
    pub facts: u64,
    /// Progress reports so far: the stored `count` of the latest report
    /// (the writer numbers them), so reports lost in a gap still count.
    pub progress: u64,
    /// The display line of the latest progress report.
    pub last_progress: Option<String>,
    /// Depth in the call tree (0 for top-level calls).
    pub depth: usize,
}

/// A credential event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CredentialEntry {
    /// Seq of the fact.
    pub seq: u64,
    /// The call.
    pub call: Option<String>,
    /// The need.
    pub need: String,
    /// Declared or pulled.
    pub mode: CredentialMode,
    /// `resolved`, `failed` or `refused`.
    pub outcome: String,
    /// Fingerprint, for resolved ones.
    pub fingerprint: Option<String>,
    /// Reason, for failed or refused ones.
    pub reason: Option<String>,
}

/// An artifact event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArtifactEntry {
    /// Seq of the fact.
    pub seq: u64,
    /// The call.
    pub call: Option<String>,
    /// `put`, `get`, `get (missing)` or `refused`.
    pub op: String,
    /// Artifact id.
    pub id: Option<String>,
    /// Digest.
    pub digest: Option<String>,
    /// Size in bytes.
    pub size: Option<u64>,
}

/// A cleanup: registered vs ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TeardownEntry {
    /// The scope.
    pub scope: TeardownScope,
    /// Hash of the key.
    pub key_hash: String,
    /// The registering call.
    pub call: Option<String>,
    /// Seq of the first registration.
    pub registered_seq: u64,
    /// Repeat registrations (kept the first).
    pub repeats: u64,
    /// Seq of `teardown.ran`, once it ran.
    pub ran_seq: Option<u64>,
    /// How it ended.
    pub outcome: Option<TeardownOutcome>,
}

/// Something an operator should look at.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "anomaly", rename_all = "snake_case")]
pub enum Anomaly {
    /// A call that never ended.
    UnendedCall {
        /// The call.
        call_id: String,
        /// Its `call.started` seq.
        seq: u64,
    },
    /// Progress reported after the call ended.
    ProgressAfterEnd {
        /// The call.
        call_id: String,
        /// Seq of the late report.
        seq: u64,
    },
    /// A cleanup registered but never run.
    TeardownNeverRan {
        /// The scope.
        scope: TeardownScope,
        /// The key hash.
        key_hash: String,
        /// Seq of the registration.
        seq: u64,
    },
    /// A cleanup that ran and failed, or did not finish in time.
    TeardownFailed {
        /// The scope.
        scope: TeardownScope,
        /// The key hash.
        key_hash: String,
        /// Seq of `teardown.ran`.
        seq: u64,
        /// What went wrong (`timed out` when it did not finish in time).
        reason: String,
    },
    /// A credential that failed to resolve.
    CredentialFailed {
        /// The call.
        call_id: Option<String>,
        /// The need.
        need: String,
        /// Seq of the failure.
        seq: u64,
    },
    /// Cancellation requested after the call ended.
    CancelAfterEnd {
        /// The call.
        call_id: String,
        /// Seq of the request.
        seq: u64,
    },
    /// Facts that could not be read (a damaged block), or seqs the
    /// stream skips.
    Gap(Gap),
    /// A fact of a call that never started.
    UnknownCall {
        /// The call id named.
        call_id: String,
        /// Seq of the fact.
        seq: u64,
    },
    /// A message an MCP recording proxy could not link to any call (a
    /// line that is not JSON, a response to no request in flight,
    /// progress on no known token), kept as the call
    /// [`UNMATCHED_TOOL`] holding it.
    Unmatched {
        /// The call that keeps the message.
        call_id: String,
        /// Who sent it (`server`, `client`), as the call's args say.
        from: String,
        /// Whether the message was a line that is not JSON.
        not_json: bool,
        /// Its `call.started` seq.
        seq: u64,
    },
    /// The run never ended.
    UnendedRun,
}

/// The tool name under which an MCP recording proxy keeps a message it
/// could not link to a call (`reel_mcp`'s `UNMATCHED`): such a call is an
/// [`Anomaly::Unmatched`] of its run.
pub const UNMATCHED_TOOL: &str = "mcp:unmatched";

impl Anomaly {
    /// The seq the anomaly points at, when it points at one.
    pub fn seq(&self) -> Option<u64> {
        match self {
            Anomaly::UnendedCall { seq, .. }
            | Anomaly::ProgressAfterEnd { seq, .. }
            | Anomaly::TeardownNeverRan { seq, .. }
            | Anomaly::TeardownFailed { seq, .. }
            | Anomaly::CredentialFailed { seq, .. }
            | Anomaly::CancelAfterEnd { seq, .. }
            | Anomaly::UnknownCall { seq, .. }
            | Anomaly::Unmatched { seq, .. } => Some(*seq),
            Anomaly::Gap(gap) => Some(gap.first),
            Anomaly::UnendedRun => None,
        }
    }

    /// One readable line.
    pub fn describe(&self) -> String {
        match self {
            Anomaly::UnendedCall { call_id, seq } => {
                format!("call {call_id} (started at #{seq}) never ended")
            }
            Anomaly::ProgressAfterEnd { call_id, seq } => {
                format!("call {call_id} reported progress after it ended (#{seq})")
            }
            Anomaly::TeardownNeverRan {
                scope,
                key_hash,
                seq,
            } => {
                format!("cleanup {key_hash} ({scope} scope, registered at #{seq}) never ran")
            }
            Anomaly::TeardownFailed {
                scope,
                key_hash,
                seq,
                reason,
            } => format!("cleanup {key_hash} ({scope} scope) failed at #{seq}: {reason}"),
            Anomaly::CredentialFailed { call_id, need, seq } => format!(
                "credential {need:?} failed (#{seq}{})",
                call_id
                    .as_deref()
                    .map(|c| format!(", call {c}"))
                    .unwrap_or_default()
            ),
            Anomaly::CancelAfterEnd { call_id, seq } => {
                format!("cancellation of call {call_id} arrived after it ended (#{seq})")
            }
            Anomaly::Gap(gap) => gap.to_string(),
            Anomaly::UnknownCall { call_id, seq } => {
                format!("fact #{seq} names call {call_id}, which never started")
            }
            Anomaly::Unmatched {
                call_id,
                from,
                not_json,
                seq,
            } => {
                let what = if *not_json {
                    "a line that is not JSON"
                } else {
                    "a message no call in flight could take"
                };
                format!("the {from} sent {what} (#{seq}, kept as call {call_id}, {UNMATCHED_TOOL})")
            }
            Anomaly::UnendedRun => {
                "the run never ended (still running, or its writer stopped)".into()
            }
        }
    }
}

/// What `run.started` said (or, for a call outside any run, what its
/// `call.started` says in its place).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunHeader {
    /// The run's id; for a call outside any run, the key it is kept under.
    pub run_id: String,
    /// Set for a call outside any run (there is no run): its call id,
    /// whose end is the stream's end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outside_run: Option<String>,
    /// Wall-clock start, unix nanoseconds.
    pub started_at: i64,
    /// The session, when bound.
    pub session_id: Option<String>,
    /// The caller's identity, when supplied.
    pub identity: Option<Identity>,
    /// The producer.
    pub producer: Producer,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Honoured teardown scopes.
    pub teardown_scopes: Vec<TeardownScope>,
}

/// A run rebuilt from its facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    /// `run.started`, when seen.
    pub run: Option<RunHeader>,
    /// How the run ended, when it did: (status, offset).
    pub ended: Option<(RunStatus, u64)>,
    /// Calls, in start order.
    pub calls: Vec<CallNode>,
    /// Credentials ledger.
    pub credentials: Vec<CredentialEntry>,
    /// Artifacts ledger.
    pub artifacts: Vec<ArtifactEntry>,
    /// Teardown ledger: registered vs ran.
    pub teardowns: Vec<TeardownEntry>,
    /// Anomalies, in the order found.
    pub anomalies: Vec<Anomaly>,
    /// Facts seen.
    pub facts: u64,
    /// Facts per kind.
    pub kinds: BTreeMap<String, u64>,
    /// The last offset seen, nanoseconds.
    pub last_offset: u64,
}

impl Timeline {
    /// Builds a timeline from facts in seq order.
    pub fn build<'a>(facts: impl IntoIterator<Item = &'a Fact>) -> Timeline {
        let mut b = TimelineBuilder::default();
        for f in facts {
            b.push(f);
        }
        b.finish()
    }

    /// The call with this id.
    pub fn call(&self, call_id: &str) -> Option<&CallNode> {
        self.calls.iter().find(|c| c.call_id == call_id)
    }

    /// Top-level calls, in start order.
    pub fn roots(&self) -> impl Iterator<Item = &CallNode> {
        self.calls.iter().filter(|c| c.parent.is_none())
    }

    /// The run's duration: from its start to `run.ended` (or the last fact).
    pub fn duration_ns(&self) -> u64 {
        self.ended.map(|(_, o)| o).unwrap_or(self.last_offset)
    }
}

//! `Timeline`: a run rebuilt from its facts, pure (no IO).
//!
//! Built incrementally with [`TimelineBuilder::push`], so a run of any size
//! streams through it: the builder keeps one node per call, the ledgers and
//! the anomalies, never the facts themselves.

use std::collections::{BTreeMap, HashMap};

use reel_core::fact::*;
use reel_core::gap::Gap;
use reel_core::sequence::Sequencer;
use reel_core::{Fact, RunRecord, RunState};
use serde::Serialize;

use crate::display::ProgressTemplates;

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
    /// The run never ended.
    UnendedRun,
}

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
            | Anomaly::UnknownCall { seq, .. } => Some(*seq),
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

pub use reel_core::gap::seq_range;

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

/// Builds a [`Timeline`] one fact at a time.
#[derive(Debug, Default)]
pub struct TimelineBuilder {
    t: Option<Timeline>,
    index: HashMap<String, usize>,
    teardown_index: HashMap<(TeardownScope, String), usize>,
    next_seq: u64,
    /// The core's numberer, observing: a report stored without a count
    /// (0) is numbered there, and drops are counted there.
    sequencer: Sequencer,
    templates: ProgressTemplates,
    live: bool,
}

impl TimelineBuilder {
    /// A builder whose calls' `last_progress` is in the wording of
    /// `templates` (the default builder uses seed 000's).
    pub fn with_templates(mut self, templates: ProgressTemplates) -> TimelineBuilder {
        self.templates = templates;
        self
    }

    /// A builder for the run `record` describes. While that run is live
    /// (`running`: its recorder is still writing), a call that has not
    /// ended yet, a cleanup that has not run yet and the run's own end not
    /// seen yet are not anomalies: they are what a live run looks like. Once the run is closed they
    /// are (a run left `incomplete`, a call its writer never ended).
    pub fn for_record(record: &RunRecord) -> TimelineBuilder {
        TimelineBuilder {
            live: record.state == RunState::Running,
            ..TimelineBuilder::default()
        }
    }

    fn t(&mut self) -> &mut Timeline {
        self.t.get_or_insert_with(|| Timeline {
            run: None,
            ended: None,
            calls: Vec::new(),
            credentials: Vec::new(),
            artifacts: Vec::new(),
            teardowns: Vec::new(),
            anomalies: Vec::new(),
            facts: 0,
            kinds: BTreeMap::new(),
            last_offset: 0,
        })
    }

    /// The call's node index, if it started.
    pub fn call_index(&self, call_id: &str) -> Option<usize> {
        self.index.get(call_id).copied()
    }

    /// The tool and depth of a call, for renderers that stream.
    pub fn call_info(&self, call_id: &str) -> Option<(&str, usize)> {
        let i = self.call_index(call_id)?;
        let c = &self.t.as_ref()?.calls[i];
        Some((&c.tool, c.depth))
    }

    /// Progress reports of a call so far.
    pub fn progress_count(&self, call_id: &str) -> u64 {
        self.call_index(call_id)
            .and_then(|i| self.t.as_ref().map(|t| t.calls[i].progress))
            .unwrap_or(0)
    }

    /// Records facts that could not be read.
    pub fn push_gap(&mut self, gap: &Gap) {
        self.t().anomalies.push(Anomaly::Gap(gap.clone()));
        if let Some(l) = gap.last {
            self.next_seq = self.next_seq.max(l + 1);
        }
    }

    /// Folds one fact in.
    pub fn push(&mut self, fact: &Fact) {
        if fact.seq > self.next_seq {
            let (first, last) = (self.next_seq, fact.seq - 1);
            let t = self.t();
            match t.anomalies.last_mut() {
                // A gap of unknown extent just reported (`push_gap` with no
                // last seq): this fact tells where it ends. One gap, not two.
                Some(Anomaly::Gap(Gap {
                    first: f,
                    last: l @ None,
                    ..
                })) if *f == first => *l = Some(last),
                _ => t.anomalies.push(Anomaly::Gap(Gap {
                    first,
                    last: Some(last),
                    detail: "the seq numbers skip".into(),
                })),
            }
        }
        self.next_seq = self.next_seq.max(fact.seq.saturating_add(1));
        let count = self.sequencer.observe_count(fact);
        let t = self.t();
        t.facts += 1;
        t.last_offset = t.last_offset.max(fact.offset);
        *t.kinds.entry(fact.kind.name().to_owned()).or_default() += 1;

        let call_idx = fact
            .call
            .as_deref()
            .and_then(|c| self.index.get(c).copied());
        if let (Some(call_id), None) = (&fact.call, call_idx) {
            if !matches!(fact.kind, FactKind::CallStarted(_)) {
                self.t().anomalies.push(Anomaly::UnknownCall {
                    call_id: call_id.clone(),
                    seq: fact.seq,
                });
            }
        }
        if let Some(i) = call_idx {
            self.t().calls[i].facts += 1;
        }
        let ended = call_idx.is_some_and(|i| {
            self.t
                .as_ref()
                .is_some_and(|t| t.calls[i].ended_seq.is_some())
        });

        match &fact.kind {
            FactKind::RunStarted(r) => {
                self.t().run = Some(RunHeader {
                    run_id: r.run_id.clone(),
                    outside_run: None,
                    started_at: fact.at,
                    session_id: r.session_id.clone(),
                    identity: r.identity.clone(),
                    producer: r.producer.clone(),
                    labels: r.labels.clone(),
                    teardown_scopes: r.teardown_scopes.clone(),
                });
            }
            FactKind::CallStarted(c) => {
                if let (Some(o), 0) = (&c.outside_run, fact.seq) {
                    self.t().run = Some(RunHeader {
                        run_id: o.key.clone(),
                        outside_run: Some(c.call_id.clone()),
                        started_at: fact.at,
                        session_id: o.session_id.clone(),
                        identity: o.identity.clone(),
                        producer: o.producer.clone(),
                        labels: o.labels.clone(),
                        teardown_scopes: o.teardown_scopes.clone(),
                    });
                }
                let parent_idx = c
                    .parent_call
                    .as_deref()
                    .and_then(|p| self.index.get(p).copied());
                let depth = parent_idx
                    .map(|p| self.t.as_ref().map_or(0, |t| t.calls[p].depth) + 1)
                    .unwrap_or(0);
                let t = self.t();
                let idx = t.calls.len();
                t.calls.push(CallNode {
                    call_id: c.call_id.clone(),
                    tool: c.tool_name.clone(),
                    parent: c.parent_call.clone(),
                    children: Vec::new(),
                    started_seq: fact.seq,
                    started_offset: fact.offset,
                    ended_seq: None,
                    ended_offset: None,
                    duration_ns: None,
                    status: None,
                    error: None,
                    facts: 1,
                    progress: 0,
                    last_progress: None,
                    depth,
                });
                if let Some(p) = parent_idx {
                    t.calls[p].children.push(c.call_id.clone());
                }
                self.index.insert(c.call_id.clone(), idx);
            }
            FactKind::Progress(p) => {
                if let Some(i) = call_idx {
                    self.t();
                    // The timeline and the templates, borrowed apart.
                    let t = self.t.as_mut().expect("made just above");
                    let node = &mut t.calls[i];
                    // The writer's count is the authority (it numbered
                    // the report; reports lost in a gap were counted
                    // there): so the fact line, which prints the stored
                    // count, and the summary agree. A report stored
                    // without one (count 0) is numbered by the core's
                    // `Sequencer`, as the writer would have.
                    node.progress = count.unwrap_or(p.count);
                    node.last_progress =
                        Some(self.templates.line(&node.tool, &p.payload, node.progress));
                    if ended {
                        let call_id = node.call_id.clone();
                        t.anomalies.push(Anomaly::ProgressAfterEnd {
                            call_id,
                            seq: fact.seq,
                        });
                    }
                }
            }
            // Reports the recorder dropped are counted (the next report's
            // count includes them; trailing drops have no next report):
            // by the `Sequencer`, which counts them where it numbers.
            FactKind::ProgressDropped(_) => {
                if let Some(i) = call_idx {
                    let so_far = self
                        .sequencer
                        .progress_so_far(fact.call.as_deref().unwrap_or_default());
                    self.t().calls[i].progress = so_far;
                }
            }
            FactKind::CredentialResolved(c) => self.t().credentials.push(CredentialEntry {
                seq: fact.seq,
                call: fact.call.clone(),
                need: c.need.clone(),
                mode: c.mode,
                outcome: "resolved".into(),
                fingerprint: Some(c.fingerprint.0.clone()),
                reason: None,
            }),
            FactKind::CredentialFailed(c) => {
                let t = self.t();
                t.credentials.push(CredentialEntry {
                    seq: fact.seq,
                    call: fact.call.clone(),
                    need: c.need.clone(),
                    mode: c.mode,
                    outcome: "failed".into(),
                    fingerprint: None,
                    reason: Some(c.reason.clone()),
                });
                t.anomalies.push(Anomaly::CredentialFailed {
                    call_id: fact.call.clone(),
                    need: c.need.clone(),
                    seq: fact.seq,
                });
            }
            FactKind::CredentialRefused(c) => self.t().credentials.push(CredentialEntry {
                seq: fact.seq,
                call: fact.call.clone(),
                need: c.need.clone(),
                mode: c.mode,
                outcome: "refused".into(),
                fingerprint: None,
                reason: Some(c.reason.clone()),
            }),
            FactKind::ArtifactPut(a) => self.t().artifacts.push(artifact(fact, "put", &a.meta)),
            FactKind::ArtifactGet(a) => {
                let entry = match &a.meta {
                    Some(meta) => artifact(fact, "get", meta),
                    None => ArtifactEntry {
                        seq: fact.seq,
                        call: fact.call.clone(),
                        op: "get (missing)".into(),
                        id: Some(a.id.clone()),
                        digest: None,
                        size: None,
                    },
                };
                self.t().artifacts.push(entry);
            }
            FactKind::ArtifactRefused(a) => self.t().artifacts.push(ArtifactEntry {
                seq: fact.seq,
                call: fact.call.clone(),
                op: "refused".into(),
                id: a.id.clone(),
                digest: None,
                size: None,
            }),
            FactKind::TeardownRegistered(r) => {
                let key = (r.scope, r.key_hash.clone());
                match self.teardown_index.get(&key) {
                    Some(&i) => self.t().teardowns[i].repeats += 1,
                    None => {
                        let t = self.t();
                        t.teardowns.push(TeardownEntry {
                            scope: r.scope,
                            key_hash: r.key_hash.clone(),
                            call: fact.call.clone(),
                            registered_seq: fact.seq,
                            repeats: 0,
                            ran_seq: None,
                            outcome: None,
                        });
                        let i = t.teardowns.len() - 1;
                        self.teardown_index.insert(key, i);
                    }
                }
            }
            FactKind::TeardownRan(r) => {
                if let Some(&i) = self.teardown_index.get(&(r.scope, r.key_hash.clone())) {
                    let entry = &mut self.t().teardowns[i];
                    entry.ran_seq = Some(fact.seq);
                    entry.outcome = Some(r.outcome.clone());
                }
                let reason = match &r.outcome {
                    TeardownOutcome::Ok => None,
                    TeardownOutcome::Error { message } => Some(message.clone()),
                    TeardownOutcome::TimedOut => Some("timed out".to_owned()),
                };
                if let Some(reason) = reason {
                    self.t().anomalies.push(Anomaly::TeardownFailed {
                        scope: r.scope,
                        key_hash: r.key_hash.clone(),
                        seq: fact.seq,
                        reason,
                    });
                }
            }
            FactKind::CancelRequested(_) => {
                if let (true, Some(call_id)) = (ended, &fact.call) {
                    let call_id = call_id.clone();
                    self.t().anomalies.push(Anomaly::CancelAfterEnd {
                        call_id,
                        seq: fact.seq,
                    });
                }
            }
            FactKind::CallEnded(e) => {
                if let Some(i) = call_idx {
                    let node = &mut self.t().calls[i];
                    node.ended_seq = Some(fact.seq);
                    node.ended_offset = Some(fact.offset);
                    node.duration_ns = Some(e.duration_ns);
                    node.status = Some(e.status());
                    if let CallOutcome::Error { error } = &e.outcome {
                        node.error = Some(error.clone());
                    }
                }
                // The end of a call outside any run is its stream's end.
                let t = self.t();
                let root = t.run.as_ref().and_then(|r| r.outside_run.as_deref());
                if root.is_some() && root == fact.call.as_deref() && t.ended.is_none() {
                    t.ended = Some((
                        match e.outcome {
                            CallOutcome::Ok { .. } => RunStatus::Completed,
                            CallOutcome::Error { .. } => RunStatus::Failed,
                            CallOutcome::Aborted { .. } => RunStatus::Cancelled,
                        },
                        fact.offset,
                    ));
                }
            }
            FactKind::RunEnded(e) => self.t().ended = Some((e.status, fact.offset)),
            _ => {}
        }
    }

    /// The timeline so far, with end-of-stream anomalies (unended calls,
    /// cleanups that never ran, an unended run), none of them while the
    /// run is live ([`TimelineBuilder::for_record`]).
    pub fn finish(mut self) -> Timeline {
        self.t();
        let Some(mut t) = self.t.take() else {
            unreachable!("t() initialised the timeline")
        };
        // A live run that has not ended: its open calls are still running.
        let live = self.live && t.ended.is_none();
        for c in &t.calls {
            if c.ended_seq.is_none() && !live {
                t.anomalies.push(Anomaly::UnendedCall {
                    call_id: c.call_id.clone(),
                    seq: c.started_seq,
                });
            }
        }
        for d in &t.teardowns {
            if d.ran_seq.is_none() && !live {
                t.anomalies.push(Anomaly::TeardownNeverRan {
                    scope: d.scope,
                    key_hash: d.key_hash.clone(),
                    seq: d.registered_seq,
                });
            }
        }
        if t.ended.is_none() && !live {
            t.anomalies.push(Anomaly::UnendedRun);
        }
        t
    }
}

fn artifact(fact: &Fact, op: &str, meta: &ArtifactMeta) -> ArtifactEntry {
    ArtifactEntry {
        seq: fact.seq,
        call: fact.call.clone(),
        op: op.into(),
        id: Some(meta.id.clone()),
        digest: Some(meta.digest.clone()),
        size: Some(meta.size),
    }
}

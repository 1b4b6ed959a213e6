//! The rules of a fact stream, stated once.
//!
//! A stream is a run, or a call outside any run (seed 000: a call served
//! where there is no run, as over MCP, has no run id). Every stream the
//! archive holds keeps these rules:
//!
//! 1. **Gapless seqs**: the facts' seqs run from 0, each one more than the
//!    one before.
//! 2. **Begins with its head**: the fact at seq 0 is `run.started` naming
//!    the run, or the `call.started` of a call outside any run whose
//!    [`OutsideRun::key`](crate::fact::OutsideRun::key) names the stream.
//! 3. **One head**: no later fact is `run.started` or a call outside any
//!    run; a call outside any run has no `run.ended`.
//! 4. **Nothing after the end**: a run's `run.ended`, or the `call.ended`
//!    of the call a stream outside any run is, when there is one, is the
//!    stream's last fact.
//! 5. **One start per call id**: no two `call.started` of a stream carry
//!    the same call id (seed 000: `toolCallId` is the "unique id of THIS
//!    tool invocation"; a second start would make every later fact filed
//!    under the id ambiguous). The recorder refuses a host-chosen id its
//!    run has started already, before anything is filed.
//!
//! [`StreamRules`] is the one place that checks them, one fact at a time, and
//! every path that takes facts in or judges stored ones goes through it:
//! `Archive::append` (each batch, from where the run stands, before anything
//! of the batch is stored), `Archive::import_run` and `Tape::import` (the
//! whole stream, before anything of the import is stored) and
//! `Archive::verify` (every stored run). So what append refuses, import
//! refuses, and what either would refuse, verify reports as damage: the
//! three cannot drift apart.
//!
//! Calls inside a run are deliberately not bracketed by a rule: a
//! `cancel.requested` may come after its call ended, and cleanups of a wider
//! scope run after the call that registered them, so a call's facts are not
//! confined to its `call.started`..`call.ended` span. Neither append nor
//! verify has ever required it; the viewer's timeline reports such facts
//! (progress or a cancel after their call ended, a fact of an unknown call)
//! as anomalies.

use std::collections::HashMap;
use std::fmt;

use crate::fact::{Fact, FactKind};
use crate::run::RunRecord;

/// A rule of [the module](self) that a fact breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// Rule 1: the fact's seq is not the one after the previous fact's.
    Gapless {
        /// The seq the fact should have had.
        expected: u64,
    },
    /// Rule 2: the fact at seq 0 is neither `run.started` nor the
    /// `call.started` of a call outside any run.
    BeginsWithRunStarted,
    /// Rule 2: the `run.started` names another run.
    RunStartedNamesRun {
        /// The run the stream belongs to.
        run_id: String,
        /// The run its `run.started` names.
        named: String,
    },
    /// Rule 2: the call outside any run names another stream key.
    CallNamesStream {
        /// The key the stream is kept under.
        key: String,
        /// The key its `call.started` names.
        named: String,
    },
    /// Rule 2: the `call.started` that begins a call outside any run
    /// belongs to another call than it starts, or than the record keeps.
    HeadNamesOtherCall,
    /// Rule 2: the stream is kept as one kind (run, or call outside any
    /// run) and its first fact begins the other.
    HeadOfOtherKind,
    /// Rule 3: a second `run.started`.
    OneRunStarted,
    /// Rule 3: a second call outside any run in one stream.
    OneCallHead,
    /// Rule 3: `run.ended` in a call outside any run.
    RunEndedOutsideRun,
    /// Rule 4: a fact after `run.ended`.
    NothingAfterRunEnded {
        /// The seq of the `run.ended`.
        ended: u64,
    },
    /// Rule 4: a fact after the `call.ended` of the call outside any run
    /// the stream is.
    NothingAfterCallEnded {
        /// The seq of that `call.ended`.
        ended: u64,
    },
    /// Rule 5: a `call.started` for a call id the stream has started
    /// already.
    OneStartPerCallId {
        /// The call id started twice.
        call_id: String,
        /// The seq of its first `call.started`.
        first: u64,
    },
}

/// A fact that breaks a [`Rule`]: which fact, and which rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The seq the fact carries.
    pub seq: u64,
    /// The fact's kind (its dotted name).
    pub kind: String,
    /// The rule it breaks.
    pub rule: Rule,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Gapless { expected } => write!(
                f,
                "seqs are not gapless: seq {expected} was expected here (seqs run from 0, one more each fact)"
            ),
            Rule::BeginsWithRunStarted => f.write_str(
                "the run does not begin with run.started: a run's first fact must be run.started (and a call outside any run's, its own call.started with `outside_run`)",
            ),
            Rule::RunStartedNamesRun { run_id, named } => write!(
                f,
                "the run.started of run {run_id:?} names another run, {named:?}"
            ),
            Rule::CallNamesStream { key, named } => write!(
                f,
                "the call outside any run kept as {key:?} names another key, {named:?}"
            ),
            Rule::HeadNamesOtherCall => f.write_str(
                "the call.started that begins a call outside any run is filed under another call than it starts, or than its record keeps",
            ),
            Rule::HeadOfOtherKind => f.write_str(
                "the stream's first fact begins a run where the record keeps a call outside any run, or the other way round",
            ),
            Rule::OneRunStarted => f.write_str(
                "a second run.started inside the run: only a run's first fact may be run.started",
            ),
            Rule::OneCallHead => f.write_str(
                "a second call outside any run inside the stream: only a stream's first fact may begin one (a call it dispatches has no `outside_run`)",
            ),
            Rule::RunEndedOutsideRun => f.write_str(
                "run.ended in a call outside any run: such a call has no run to end; its call.ended ends it",
            ),
            Rule::NothingAfterRunEnded { ended } => write!(
                f,
                "a fact after run.ended (seq {ended}): run.ended must be the run's last fact"
            ),
            Rule::NothingAfterCallEnded { ended } => write!(
                f,
                "a fact after the call outside any run ended (seq {ended}): its call.ended must be the stream's last fact"
            ),
            Rule::OneStartPerCallId { call_id, first } => write!(
                f,
                "a second call.started for call id {call_id:?} (first started at seq {first}): a call id is unique within its run; give each call its own id"
            ),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at seq {}: {}", self.kind, self.seq, self.rule)
    }
}

/// What a stream is, once its head is known.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Head {
    Run,
    /// A call outside any run: its call id.
    Call(String),
}

/// Whether `kind`, filed under `call`, ends its stream (rule 4's end): a
/// run ends with `run.ended`; the stream of a call outside any run
/// (`outside`: that call's id) ends with that call's `call.ended`. The one
/// statement of the end, for the rules here and for the recorder, which
/// stops taking a stream's facts there.
pub fn ends_stream(outside: Option<&str>, call: Option<&str>, kind: &FactKind) -> bool {
    match (outside, kind) {
        (Some(root), FactKind::CallEnded(_)) => call == Some(root),
        (Some(_), _) => false,
        (None, kind) => matches!(kind, FactKind::RunEnded(_)),
    }
}

/// The stream a head (rule 2) names: the run of a `run.started`, or the
/// key of the `call.started` of a call outside any run; `None` for any
/// other fact. A stream read whole (an import, a tape) is checked with the
/// rules of the stream its first fact names.
pub fn head_names(kind: &FactKind) -> Option<&str> {
    match kind {
        FactKind::RunStarted(s) => Some(&s.run_id),
        FactKind::CallStarted(c) => c.outside_run.as_ref().map(|o| o.key.as_str()),
        _ => None,
    }
}

/// A fact filed after its stream ended (rule 4): it is not recorded. The
/// one error for it, wherever the recorder meets one (a tool filing after
/// `run.ended`, a fact racing the end in the writer's queue, a store that
/// has closed the stream).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stream {stream:?}: {count} {kind} fact(s) filed after the stream ended were not recorded (run.ended, or the call.ended of a call outside any run, is a stream's last fact)")]
pub struct LateFact {
    /// The stream's key (run id, or the key of a call outside any run).
    pub stream: String,
    /// The kind of the late fact (or `fact` for several kinds).
    pub kind: String,
    /// How many.
    pub count: usize,
}

/// Checks a stream's facts against the rules, in order, one at a time:
/// where the stream stands is the state.
///
/// After a violation the state moves on as if the fact were kept, so that a
/// reader of damaged data ([`Archive::verify`](super::Archive::verify)) can go
/// on and report every fact that breaks a rule; a writer refuses at the
/// first one.
#[derive(Debug, Clone)]
pub struct StreamRules {
    run_id: String,
    next_seq: u64,
    /// Seq 0 was seen, or is known to have been there.
    started: bool,
    /// What the stream is: from its first fact, or its record.
    head: Option<Head>,
    /// The seq of the stream's end, once seen.
    ended: Option<u64>,
    /// The call ids started so far (rule 5), with the seq of each one's
    /// `call.started`.
    calls: HashMap<String, u64>,
}

/// What [`StreamRules::check_batch`] needs to take an accepted batch back
/// ([`StreamRules::undo`]): where the stream stood before it, and the call
/// ids it started.
#[derive(Debug)]
#[must_use = "an accepted batch that is not stored must be undone"]
pub struct Undo {
    next_seq: u64,
    started: bool,
    head: Option<Head>,
    ended: Option<u64>,
    added: Vec<String>,
}

impl StreamRules {
    /// The rules for the stream kept as `run_id`, before its first fact:
    /// the first fact says whether it is a run or a call outside any run.
    pub fn new(run_id: impl Into<String>) -> StreamRules {
        StreamRules {
            run_id: run_id.into(),
            next_seq: 0,
            started: false,
            head: None,
            ended: None,
            calls: HashMap::new(),
        }
    }

    /// The rules for the stream `record` describes, before its first fact:
    /// what it is comes from the record, so a stream whose first facts are
    /// lost is still judged as what it is.
    pub fn of(record: &RunRecord) -> StreamRules {
        StreamRules {
            head: Some(match &record.outside_run {
                None => Head::Run,
                Some(call) => Head::Call(call.clone()),
            }),
            ..StreamRules::new(record.run_id.as_str())
        }
    }

    /// The rules for the stream `record` describes, whose first `next_seq`
    /// facts were checked when they were stored, none of them its end (a
    /// stream being appended to).
    pub fn resume(record: &RunRecord, next_seq: u64) -> StreamRules {
        StreamRules {
            next_seq,
            started: next_seq > 0,
            ..StreamRules::of(record)
        }
    }

    /// The seq the next fact must have.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// A call id the stream started at `seq` before these rules took it up
    /// (a stream resumed where it stands: [`StreamRules::resume`] knows its
    /// length, not its calls): a later `call.started` with it breaks rule 5.
    pub fn knows_call(&mut self, call_id: &str, seq: u64) {
        self.calls.entry(call_id.to_owned()).or_insert(seq);
    }

    /// Checks a batch, whole or not at all, from where the stream stands:
    /// on a violation (with the index of the fact in the batch) the rules
    /// stand where they stood; once accepted, [`StreamRules::undo`] takes
    /// the batch back (a batch its store then failed to keep). Costs what
    /// the batch holds, not what the stream holds (no copy of the rules).
    pub fn check_batch(&mut self, facts: &[Fact]) -> Result<Undo, (usize, Violation)> {
        let mut undo = Undo {
            next_seq: self.next_seq,
            started: self.started,
            head: self.head.clone(),
            ended: self.ended,
            added: Vec::new(),
        };
        for (i, fact) in facts.iter().enumerate() {
            if let FactKind::CallStarted(c) = &fact.kind {
                if !self.calls.contains_key(&c.call_id) {
                    undo.added.push(c.call_id.clone());
                }
            }
            if let Err(v) = self.check(fact) {
                self.undo(undo);
                return Err((i, v));
            }
        }
        Ok(undo)
    }

    /// Takes back a batch [`StreamRules::check_batch`] accepted: the rules
    /// stand where they stood before it.
    pub fn undo(&mut self, undo: Undo) {
        self.next_seq = undo.next_seq;
        self.started = undo.started;
        self.head = undo.head;
        self.ended = undo.ended;
        for id in undo.added {
            self.calls.remove(&id);
        }
    }

    /// Checks the next fact of the stream.
    pub fn check(&mut self, fact: &Fact) -> Result<(), Violation> {
        self.check_kind(fact.seq, fact.call.as_deref(), &fact.kind)
    }

    /// [`StreamRules::check`] for a fact given by its seq, call and kind.
    pub fn check_kind(
        &mut self,
        seq: u64,
        call: Option<&str>,
        kind: &FactKind,
    ) -> Result<(), Violation> {
        let gap = (seq != self.next_seq).then_some(Rule::Gapless {
            expected: self.next_seq,
        });
        if gap.is_some() {
            // The facts in between are missing: the stream goes on here.
            self.lost_until(seq);
        }
        let rule = gap.or_else(|| self.broken(call, kind));
        self.next_seq = seq.saturating_add(1);
        let first = !self.started && seq == 0;
        if first && self.head.is_none() {
            self.head = match kind {
                FactKind::RunStarted(_) => Some(Head::Run),
                FactKind::CallStarted(c) if c.outside_run.is_some() => {
                    Some(Head::Call(c.call_id.clone()))
                }
                _ => None,
            };
        }
        self.started |= seq == 0 || is_head(kind);
        let outside = match &self.head {
            Some(Head::Call(root)) => Some(root.as_str()),
            _ => None,
        };
        let ends = ends_stream(outside, call, kind);
        if ends && self.ended.is_none() {
            self.ended = Some(seq);
        }
        if let FactKind::CallStarted(c) = kind {
            self.calls.entry(c.call_id.clone()).or_insert(seq);
        }
        match rule {
            None => Ok(()),
            Some(rule) => Err(Violation {
                seq,
                kind: kind.name().to_owned(),
                rule,
            }),
        }
    }

    /// The first of rules 2 to 4 that `kind`, as the next fact, breaks.
    fn broken(&self, call: Option<&str>, kind: &FactKind) -> Option<Rule> {
        if let Some(ended) = self.ended {
            return Some(match self.head {
                Some(Head::Call(_)) => Rule::NothingAfterCallEnded { ended },
                _ => Rule::NothingAfterRunEnded { ended },
            });
        }
        if is_head(kind) && self.started {
            return Some(match kind {
                FactKind::RunStarted(_) => Rule::OneRunStarted,
                _ => Rule::OneCallHead,
            });
        }
        if !self.started {
            return match (kind, &self.head) {
                (FactKind::RunStarted(s), None | Some(Head::Run)) if s.run_id != self.run_id => {
                    Some(Rule::RunStartedNamesRun {
                        run_id: self.run_id.clone(),
                        named: s.run_id.clone(),
                    })
                }
                (FactKind::RunStarted(_), None | Some(Head::Run)) => None,
                (FactKind::CallStarted(c), None | Some(Head::Call(_)))
                    if c.outside_run.is_some() =>
                {
                    let named = c.outside_run.as_ref().map(|o| o.key.as_str());
                    let kept = match &self.head {
                        Some(Head::Call(root)) => root.as_str(),
                        _ => c.call_id.as_str(),
                    };
                    if named != Some(self.run_id.as_str()) {
                        Some(Rule::CallNamesStream {
                            key: self.run_id.clone(),
                            named: named.unwrap_or_default().to_owned(),
                        })
                    } else if call != Some(c.call_id.as_str()) || c.call_id != kept {
                        Some(Rule::HeadNamesOtherCall)
                    } else {
                        None
                    }
                }
                _ if is_head(kind) => Some(Rule::HeadOfOtherKind),
                _ => Some(Rule::BeginsWithRunStarted),
            };
        }
        match (&self.head, kind) {
            (Some(Head::Call(_)), FactKind::RunEnded(_)) => Some(Rule::RunEndedOutsideRun),
            (_, FactKind::CallStarted(c)) => {
                self.calls
                    .get(&c.call_id)
                    .map(|&first| Rule::OneStartPerCallId {
                        call_id: c.call_id.clone(),
                        first,
                    })
            }
            _ => None,
        }
    }

    /// The facts before `next_seq` that were not checked are lost to the
    /// reader (a missing or damaged block, already reported as such): the
    /// stream goes on at `next_seq`, assuming the lost facts began the
    /// stream if they held seq 0.
    pub fn lost_until(&mut self, next_seq: u64) {
        self.started |= self.next_seq == 0 && next_seq > 0;
        self.next_seq = next_seq;
    }
}

fn is_head(kind: &FactKind) -> bool {
    kind.begins_stream()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fact::{
        CallEnded, CallMode, CallOutcome, CallStarted, Log, OutsideRun, Producer, RunEnded,
        RunStarted, RunStatus,
    };

    #[test]
    fn ends_stream_is_run_ended_or_the_outside_calls_call_ended() {
        let ended = FactKind::RunEnded(RunEnded {
            status: RunStatus::Completed,
        });
        let call_ended = FactKind::CallEnded(CallEnded {
            outcome: CallOutcome::Ok {
                result: serde_json::json!(null),
            },
            duration_ns: 0,
            invocation_id: None,
        });
        assert!(ends_stream(None, None, &ended));
        assert!(!ends_stream(None, Some("c1"), &call_ended));
        assert!(ends_stream(Some("c1"), Some("c1"), &call_ended));
        assert!(!ends_stream(Some("c1"), Some("c2"), &call_ended));
        assert!(!ends_stream(Some("c1"), None, &ended));
        let late = LateFact {
            stream: "r".into(),
            kind: "log".into(),
            count: 2,
        };
        assert_eq!(
            late.to_string(),
            "stream \"r\": 2 log fact(s) filed after the stream ended were not recorded (run.ended, or the call.ended of a call outside any run, is a stream's last fact)"
        );
    }

    fn record(key: &str, outside_run: Option<&str>) -> RunRecord {
        let head = match outside_run {
            None => Fact {
                seq: 0,
                at: 0,
                offset: 0,
                call: None,
                kind: started(key),
            },
            Some(call) => Fact {
                seq: 0,
                at: 0,
                offset: 0,
                call: Some(call.into()),
                kind: call_head(key, call),
            },
        };
        RunRecord::from_first(&head).unwrap()
    }

    /// The `call.started` of a call `call_id` outside any run, kept as `key`.
    fn call_head(key: &str, call_id: &str) -> FactKind {
        FactKind::CallStarted(CallStarted {
            outside_run: Some(Box::new(OutsideRun {
                key: key.into(),
                session_id: None,
                identity: None,
                producer: Producer {
                    name: "rules".into(),
                    version: "0".into(),
                },
                labels: Default::default(),
                teardown_scopes: vec![],
            })),
            ..plain_call(call_id)
        })
    }

    fn plain_call(call_id: &str) -> CallStarted {
        CallStarted {
            call_id: call_id.into(),
            tool_name: "t".into(),
            tool_id: None,
            parent_call: None,
            iteration: 0,
            invocation_id: None,
            mode: CallMode::Async,
            protocol: None,
            platform: None,
            client_info: None,
            args: serde_json::json!({}),
            wanted: None,
            attached: None,
            spec: None,
            dispatch_tools: None,
            outside_run: None,
        }
    }

    fn call_ended() -> FactKind {
        FactKind::CallEnded(CallEnded {
            outcome: CallOutcome::Ok {
                result: serde_json::json!(1),
            },
            duration_ns: 0,
            invocation_id: None,
        })
    }

    /// The rule each fact breaks, for a stream kept as "k" (facts given
    /// with their call).
    fn check_calls(
        mut rules: StreamRules,
        stream: &[(u64, Option<&str>, FactKind)],
    ) -> Vec<Option<Rule>> {
        stream
            .iter()
            .map(|(seq, call, kind)| rules.check_kind(*seq, *call, kind).err().map(|v| v.rule))
            .collect()
    }

    #[test]
    fn a_call_outside_any_run_is_a_stream_of_its_own() {
        let new = || StreamRules::new("k");
        // Begins with its call.started, ends with that call's call.ended;
        // a dispatched child's end does not end it.
        assert_eq!(
            check_calls(
                new(),
                &[
                    (0, Some("c1"), call_head("k", "c1")),
                    (1, Some("c2"), FactKind::CallStarted(plain_call("c2"))),
                    (2, Some("c2"), call_ended()),
                    (3, Some("c1"), log()),
                    (4, Some("c1"), call_ended()),
                    (5, Some("c1"), log()),
                ]
            ),
            [
                None,
                None,
                None,
                None,
                None,
                Some(Rule::NothingAfterCallEnded { ended: 4 })
            ]
        );
        // It names the key it is kept under, and is filed under its own call.
        assert_eq!(
            check_calls(new(), &[(0, Some("c1"), call_head("other", "c1"))]),
            [Some(Rule::CallNamesStream {
                key: "k".into(),
                named: "other".into()
            })]
        );
        assert_eq!(
            check_calls(new(), &[(0, Some("c9"), call_head("k", "c1"))]),
            [Some(Rule::HeadNamesOtherCall)]
        );
        // A plain call.started begins nothing.
        assert_eq!(
            check_calls(
                new(),
                &[(0, Some("c1"), FactKind::CallStarted(plain_call("c1")))]
            ),
            [Some(Rule::BeginsWithRunStarted)]
        );
        // No run.ended, no second head, no run.started inside it.
        assert_eq!(
            check_calls(
                new(),
                &[
                    (0, Some("c1"), call_head("k", "c1")),
                    (1, None, ended()),
                    (2, Some("c2"), call_head("k", "c2")),
                    (3, None, started("k")),
                ]
            ),
            [
                None,
                Some(Rule::RunEndedOutsideRun),
                Some(Rule::OneCallHead),
                Some(Rule::OneRunStarted)
            ]
        );
        // A run's call.ended ends nothing.
        assert_eq!(
            check_calls(
                StreamRules::new("r"),
                &[
                    (0, None, started("r")),
                    (1, Some("c1"), FactKind::CallStarted(plain_call("c1"))),
                    (2, Some("c1"), call_ended()),
                    (3, Some("c1"), log()),
                ]
            ),
            [None, None, None, None]
        );
    }

    #[test]
    fn the_record_says_what_the_stream_is() {
        // A record of a call outside any run takes no run.started at seq 0,
        // nor another call as its head; and the other way round.
        assert_eq!(
            check_calls(
                StreamRules::of(&record("k", Some("c1"))),
                &[(0, None, started("k"))]
            ),
            [Some(Rule::HeadOfOtherKind)]
        );
        assert_eq!(
            check_calls(
                StreamRules::of(&record("k", Some("c1"))),
                &[(0, Some("c2"), call_head("k", "c2"))]
            ),
            [Some(Rule::HeadNamesOtherCall)]
        );
        assert_eq!(
            check_calls(
                StreamRules::of(&record("k", None)),
                &[(0, Some("c1"), call_head("k", "c1"))]
            ),
            [Some(Rule::HeadOfOtherKind)]
        );
        // Resumed after its head was stored, it still ends with its call.
        assert_eq!(
            check_calls(
                StreamRules::resume(&record("k", Some("c1")), 1),
                &[(1, Some("c1"), call_ended()), (2, Some("c1"), log())]
            ),
            [None, Some(Rule::NothingAfterCallEnded { ended: 1 })]
        );
    }

    fn started(run_id: &str) -> FactKind {
        FactKind::RunStarted(RunStarted {
            run_id: run_id.into(),
            session_id: None,
            identity: None,
            producer: Producer {
                name: "rules".into(),
                version: "0".into(),
            },
            labels: Default::default(),
            teardown_scopes: vec![],
        })
    }

    fn log() -> FactKind {
        FactKind::Log(Log {
            level: crate::fact::Level::Info,
            logger: None,
            subflow: None,
            data: serde_json::json!("x"),
            delivered: true,
            in_flight: Vec::new(),
        })
    }

    fn ended() -> FactKind {
        FactKind::RunEnded(RunEnded {
            status: RunStatus::Completed,
        })
    }

    /// The rule each fact breaks (`None`: kept), for a stream of run "r".
    fn check(stream: &[(u64, FactKind)]) -> Vec<Option<Rule>> {
        let mut rules = StreamRules::new("r");
        stream
            .iter()
            .map(|(seq, kind)| rules.check_kind(*seq, None, kind).err().map(|v| v.rule))
            .collect()
    }

    #[test]
    fn each_rule_is_broken_where_it_is_broken() {
        assert_eq!(
            check(&[(0, started("r")), (1, log()), (2, ended())]),
            [None, None, None]
        );
        assert_eq!(
            check(&[(0, started("r")), (2, log())]),
            [None, Some(Rule::Gapless { expected: 1 })]
        );
        assert_eq!(
            check(&[(1, started("r")), (2, log())]),
            [Some(Rule::Gapless { expected: 0 }), None]
        );
        assert_eq!(
            check(&[(0, started("r")), (1, log()), (1, log())]),
            [None, None, Some(Rule::Gapless { expected: 2 })]
        );
        assert_eq!(
            check(&[(0, log()), (1, log())]),
            [Some(Rule::BeginsWithRunStarted), None]
        );
        assert_eq!(
            check(&[(0, started("other"))]),
            [Some(Rule::RunStartedNamesRun {
                run_id: "r".into(),
                named: "other".into()
            })]
        );
        assert_eq!(
            check(&[(0, started("r")), (1, started("r"))]),
            [None, Some(Rule::OneRunStarted)]
        );
        assert_eq!(
            check(&[(0, started("r")), (1, ended()), (2, log()), (3, ended())]),
            [
                None,
                None,
                Some(Rule::NothingAfterRunEnded { ended: 1 }),
                Some(Rule::NothingAfterRunEnded { ended: 1 })
            ]
        );
    }

    #[test]
    fn a_resumed_run_takes_no_second_start() {
        let mut rules = StreamRules::resume(&record("r", None), 4);
        assert_eq!(rules.check_kind(4, None, &log()), Ok(()));
        assert_eq!(
            rules.check_kind(5, None, &started("r")).map_err(|v| v.rule),
            Err(Rule::OneRunStarted)
        );
    }

    #[test]
    fn facts_lost_at_the_start_are_assumed_to_begin_the_run() {
        let mut rules = StreamRules::new("r");
        rules.lost_until(3);
        assert_eq!(rules.check_kind(3, None, &log()), Ok(()));
        assert_eq!(
            rules.check_kind(4, None, &started("r")).map_err(|v| v.rule),
            Err(Rule::OneRunStarted)
        );
    }
}

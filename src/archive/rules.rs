//! The rules of a run's fact stream, stated once.
//!
//! A run is one stream of facts, and every stream the archive holds keeps
//! these rules:
//!
//! 1. **Gapless seqs**: the facts' seqs run from 0, each one more than the
//!    one before.
//! 2. **Begins with `run.started`**: the fact at seq 0 is `run.started`, and
//!    it names the run it begins.
//! 3. **One `run.started`**: no later fact is `run.started`.
//! 4. **Nothing after `run.ended`**: `run.ended`, when there is one, is the
//!    run's last fact.
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
//! Calls are deliberately not bracketed by a rule: a `cancel.requested` may
//! come after its call ended, and cleanups of a wider scope run after the
//! call that registered them, so a call's facts are not confined to its
//! `call.started`..`call.ended` span. Neither append nor verify has ever
//! required it; the viewer's timeline reports such facts (progress or a
//! cancel after their call ended, a fact of an unknown call) as anomalies.

use std::fmt;

use crate::fact::{Fact, FactKind};

/// A rule of [the module](self) that a fact breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// Rule 1: the fact's seq is not the one after the previous fact's.
    Gapless {
        /// The seq the fact should have had.
        expected: u64,
    },
    /// Rule 2: the fact at seq 0 is not `run.started`.
    BeginsWithRunStarted,
    /// Rule 2: the `run.started` names another run.
    RunStartedNamesRun {
        /// The run the stream belongs to.
        run_id: String,
        /// The run its `run.started` names.
        named: String,
    },
    /// Rule 3: a second `run.started`.
    OneRunStarted,
    /// Rule 4: a fact after `run.ended`.
    NothingAfterRunEnded {
        /// The seq of the `run.ended`.
        ended: u64,
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
            Rule::BeginsWithRunStarted => {
                f.write_str("the run does not begin with run.started: a run's first fact must be")
            }
            Rule::RunStartedNamesRun { run_id, named } => write!(
                f,
                "the run.started of run {run_id:?} names another run, {named:?}"
            ),
            Rule::OneRunStarted => f.write_str(
                "a second run.started inside the run: only a run's first fact may be run.started",
            ),
            Rule::NothingAfterRunEnded { ended } => write!(
                f,
                "a fact after run.ended (seq {ended}): run.ended must be the run's last fact"
            ),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at seq {}: {}", self.kind, self.seq, self.rule)
    }
}

/// Checks a run's facts against the rules, in order, one at a time: where
/// the stream stands is the state.
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
    /// The seq of the run's `run.ended`, once seen.
    ended: Option<u64>,
}

impl StreamRules {
    /// The rules for run `run_id`, before its first fact.
    pub fn new(run_id: impl Into<String>) -> StreamRules {
        StreamRules {
            run_id: run_id.into(),
            next_seq: 0,
            started: false,
            ended: None,
        }
    }

    /// The rules for run `run_id` whose first `next_seq` facts were checked
    /// when they were stored, none of them `run.ended` (a run being
    /// appended to).
    pub(crate) fn resume(run_id: impl Into<String>, next_seq: u64) -> StreamRules {
        StreamRules {
            run_id: run_id.into(),
            next_seq,
            started: next_seq > 0,
            ended: None,
        }
    }

    /// The seq the next fact must have.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Checks the next fact of the stream.
    pub fn check(&mut self, fact: &Fact) -> Result<(), Violation> {
        self.check_kind(fact.seq, &fact.kind)
    }

    /// [`StreamRules::check`] for a fact given by its seq and kind.
    pub fn check_kind(&mut self, seq: u64, kind: &FactKind) -> Result<(), Violation> {
        let gap = (seq != self.next_seq).then_some(Rule::Gapless {
            expected: self.next_seq,
        });
        if gap.is_some() {
            // The facts in between are missing: the stream goes on here.
            self.lost_until(seq);
        }
        let rule = gap.or_else(|| self.broken(kind));
        self.next_seq = seq.saturating_add(1);
        self.started |= seq == 0 || matches!(kind, FactKind::RunStarted(_));
        if matches!(kind, FactKind::RunEnded(_)) && self.ended.is_none() {
            self.ended = Some(seq);
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
    fn broken(&self, kind: &FactKind) -> Option<Rule> {
        if let Some(ended) = self.ended {
            return Some(Rule::NothingAfterRunEnded { ended });
        }
        match kind {
            FactKind::RunStarted(_) if self.started => Some(Rule::OneRunStarted),
            FactKind::RunStarted(s) if s.run_id != self.run_id => Some(Rule::RunStartedNamesRun {
                run_id: self.run_id.clone(),
                named: s.run_id.clone(),
            }),
            FactKind::RunStarted(_) => None,
            _ if !self.started => Some(Rule::BeginsWithRunStarted),
            _ => None,
        }
    }

    /// The facts before `next_seq` that were not checked are lost to the
    /// reader (a missing or damaged block, already reported as such): the
    /// stream goes on at `next_seq`, assuming the lost facts began the run
    /// if they held seq 0.
    pub(crate) fn lost_until(&mut self, next_seq: u64) {
        self.started |= self.next_seq == 0 && next_seq > 0;
        self.next_seq = next_seq;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fact::{Log, Producer, RunEnded, RunStarted, RunStatus};

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
            .map(|(seq, kind)| rules.check_kind(*seq, kind).err().map(|v| v.rule))
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
        let mut rules = StreamRules::resume("r", 4);
        assert_eq!(rules.check_kind(4, &log()), Ok(()));
        assert_eq!(
            rules.check_kind(5, &started("r")).map_err(|v| v.rule),
            Err(Rule::OneRunStarted)
        );
    }

    #[test]
    fn facts_lost_at_the_start_are_assumed_to_begin_the_run() {
        let mut rules = StreamRules::new("r");
        rules.lost_until(3);
        assert_eq!(rules.check_kind(3, &log()), Ok(()));
        assert_eq!(
            rules.check_kind(4, &started("r")).map_err(|v| v.rule),
            Err(Rule::OneRunStarted)
        );
    }
}

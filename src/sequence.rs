//! The one authority that numbers facts: a stream's `seq` (gapless, from
//! where the stream stands) and each call's progress `count` (from 1, per
//! call). The archive numbers appends with it, the recorder's writer counts
//! progress with it, and the replayer numbers what a replayed tool files
//! with it, so a recording and its replay cannot number differently.

use std::collections::HashMap;

use crate::fact::{Fact, NewFact};

/// Numbers one stream's facts and its calls' progress reports.
///
/// ```
/// use reel::sequence::Sequencer;
/// use reel::fact::{FactKind, Log, Level, NewFact};
///
/// let mut seq = Sequencer::new();
/// let fact = NewFact { at: 0, offset: 0, call: None, kind: FactKind::Log(Log {
///     level: Level::Info, logger: None, subflow: None, data: "x".into(), delivered: false,
/// })};
/// assert_eq!(seq.number(fact.clone()).seq, 0);
/// assert_eq!(seq.number(fact).seq, 1);
/// assert_eq!((seq.progress("c1"), seq.progress("c1"), seq.progress("c2")), (1, 2, 1));
/// assert_eq!(seq.progress_so_far("c1"), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sequencer {
    next_seq: u64,
    progress: HashMap<String, u64>,
}

impl Sequencer {
    /// A stream before its first fact.
    pub fn new() -> Sequencer {
        Sequencer::default()
    }

    /// A stream whose first `next_seq` facts are numbered already.
    pub fn resume(next_seq: u64) -> Sequencer {
        Sequencer {
            next_seq,
            progress: HashMap::new(),
        }
    }

    /// The seq the next fact gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Gives `fact` the next seq.
    pub fn number(&mut self, fact: NewFact) -> Fact {
        let seq = self.next_seq;
        self.next_seq += 1;
        fact.with_seq(seq)
    }

    /// Numbers a batch, in order.
    pub fn number_all(&mut self, facts: Vec<NewFact>) -> Vec<Fact> {
        facts.into_iter().map(|f| self.number(f)).collect()
    }

    /// The count of the next progress report of `call` (1 for its first).
    pub fn progress(&mut self, call: &str) -> u64 {
        let n = self.progress.entry(call.to_owned()).or_insert(0);
        *n += 1;
        *n
    }

    /// How many progress reports `call` has filed so far.
    pub fn progress_so_far(&self, call: &str) -> u64 {
        self.progress.get(call).copied().unwrap_or(0)
    }
}

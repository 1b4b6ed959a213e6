//! The one authority that numbers facts: a stream's `seq` (gapless, from
//! where the stream stands) and each call's progress `count` (from 1, per
//! call). The archive numbers appends with it, the recorder's writer counts
//! progress with it, and the replayer numbers what a replayed tool files
//! with it, so a recording and its replay cannot number differently.

use std::collections::HashMap;

use crate::fact::{Fact, FactKind, NewFact};

/// Numbers one stream's facts and its calls' progress reports.
///
/// ```
/// use reel_core::sequence::Sequencer;
/// use reel_core::fact::{FactKind, Log, Level, NewFact};
///
/// let mut seq = Sequencer::new();
/// let fact = NewFact { at: 0, offset: 0, call: None, kind: FactKind::Log(Log {
///     level: Level::Info, logger: None, subflow: None, data: "x".into(), delivered: false,
///     in_flight: Vec::new(),
/// })};
/// assert_eq!(seq.number(fact.clone()).seq, 0);
/// assert_eq!(seq.number(fact).seq, 1);
/// assert_eq!((seq.progress("c1"), seq.progress("c1"), seq.progress("c2")), (1, 2, 1));
/// assert_eq!(seq.progress_so_far("c1"), 2);
///
/// // A progress report filed unnumbered (count 0) gets its call's next count.
/// use reel_core::fact::Progress;
/// let report = |count| NewFact { at: 0, offset: 0, call: Some("c1".into()),
///     kind: FactKind::Progress(Progress { payload: "p".into(), count, delivered: false }) };
/// let FactKind::Progress(p) = seq.number(report(0)).kind else { unreachable!() };
/// assert_eq!(p.count, 3);
///
/// // Dropped reports are counted: the next report says how many came before.
/// use reel_core::fact::ProgressDropped;
/// seq.number(NewFact { at: 0, offset: 0, call: Some("c1".into()),
///     kind: FactKind::ProgressDropped(ProgressDropped { count: 10 }) });
/// let FactKind::Progress(p) = seq.number(report(0)).kind else { unreachable!() };
/// assert_eq!(p.count, 14);
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

    /// Gives `fact` the next seq, and a progress report filed unnumbered
    /// (`count` 0, as the context files it) its call's next count. A
    /// progress report that carries a count keeps it, and later reports of
    /// its call count on from it.
    ///
    /// A `progress.dropped` fact counts its dropped reports: the call's
    /// next report counts on after them.
    pub fn number(&mut self, fact: NewFact) -> Fact {
        let mut fact = fact.with_seq(0);
        self.number_in_place(&mut fact);
        fact
    }

    /// [`Sequencer::number`] of a fact in place: its `seq` (whatever it
    /// held) becomes the next seq, and an unnumbered progress report gets
    /// its count. (The recorder's writer numbers its batches this way, so a
    /// fact is not moved to be numbered.)
    pub fn number_in_place(&mut self, fact: &mut Fact) {
        match &mut fact.kind {
            FactKind::Progress(p) => {
                let call = fact.call.as_deref().unwrap_or_default();
                if p.count == 0 {
                    p.count = self.progress(call);
                } else {
                    self.saw_progress(call, p.count);
                }
            }
            FactKind::ProgressDropped(d) => {
                self.dropped(fact.call.as_deref().unwrap_or_default(), d.count)
            }
            _ => {}
        }
        fact.seq = self.next_seq;
        self.next_seq += 1;
    }

    /// Takes note of a fact numbered elsewhere (an import, or a batch
    /// another sequencer numbered): the next seq follows it, and a
    /// progress report's call counts on from its count.
    pub fn observe(&mut self, fact: &Fact) {
        self.next_seq = self.next_seq.max(fact.seq.saturating_add(1));
        match &fact.kind {
            FactKind::Progress(p) => {
                self.saw_progress(fact.call.as_deref().unwrap_or_default(), p.count)
            }
            FactKind::ProgressDropped(d) => {
                self.dropped(fact.call.as_deref().unwrap_or_default(), d.count)
            }
            _ => {}
        }
    }

    /// [`Sequencer::observe`] for a reader of a stored stream, giving the
    /// count a progress report stands for: its stored count, or, for a
    /// report stored without one (count 0), the count numbering gives it
    /// (its call's next). `None` for any other fact; a `progress.dropped`
    /// counts its reports ([`Sequencer::progress_so_far`] includes them).
    /// The viewer's timeline counts with it, so that a report is numbered
    /// in one place only.
    pub fn observe_count(&mut self, fact: &Fact) -> Option<u64> {
        match &fact.kind {
            FactKind::Progress(p) => Some(self.observe_report(
                fact.seq,
                fact.call.as_deref().unwrap_or_default(),
                p.count,
            )),
            _ => {
                self.observe(fact);
                None
            }
        }
    }

    /// [`Sequencer::observe_count`] of a progress report of `call` (the
    /// empty string for none) at `seq` stored with `count`, for a reader
    /// that did not build the fact (a `FactView` of the codec).
    pub fn observe_report(&mut self, seq: u64, call: &str, count: u64) -> u64 {
        self.next_seq = self.next_seq.max(seq.saturating_add(1));
        if count == 0 {
            self.progress(call)
        } else {
            self.saw_progress(call, count);
            count
        }
    }

    /// `count` reports of `call` were dropped: they are counted.
    fn dropped(&mut self, call: &str, count: u64) {
        self.update(call, |n| n.saturating_add(count));
    }

    /// Sets the progress count of `call` (0 when it has none yet) to
    /// `f` of it and returns it. One look-up, and the key is copied only
    /// the first time: this runs for every progress report.
    fn update(&mut self, call: &str, f: impl FnOnce(u64) -> u64) -> u64 {
        match self.progress.get_mut(call) {
            Some(n) => {
                *n = f(*n);
                *n
            }
            None => {
                let n = f(0);
                self.progress.insert(call.to_owned(), n);
                n
            }
        }
    }

    /// Sets the next seq back (or on) to `next_seq`: a batch numbered from
    /// there was not stored. Progress counts stay: those reports were filed.
    pub fn rewind(&mut self, next_seq: u64) {
        self.next_seq = next_seq;
    }

    fn saw_progress(&mut self, call: &str, count: u64) {
        self.update(call, |n| n.max(count));
    }

    /// Numbers a batch, in order.
    pub fn number_all(&mut self, facts: Vec<NewFact>) -> Vec<Fact> {
        facts.into_iter().map(|f| self.number(f)).collect()
    }

    /// The count of the next progress report of `call` (1 for its first).
    /// Saturates: a stored count of `u64::MAX` (damaged or hostile bytes
    /// read back) is followed by itself, never a panic.
    pub fn progress(&mut self, call: &str) -> u64 {
        self.update(call, |n| n.saturating_add(1))
    }

    /// How many progress reports `call` has filed so far.
    pub fn progress_so_far(&self, call: &str) -> u64 {
        self.progress.get(call).copied().unwrap_or(0)
    }
}

//! Spans held by trace until their run can be written whole.
//!
//! Exporters send a trace's spans as they end (children before their
//! parents), split across requests, and retry a request they are not sure
//! arrived. A run is append-only with gapless seqs, so a trace is held
//! here until its root span has arrived and no span of it has come for
//! the grace period; then it is handed out whole, to be written in span
//! time order. A span id seen before (a retry) is dropped: nothing doubled.
//! A span of a trace already handed out is late: the run it belongs to has
//! ended, and the stream rules take nothing after `run.ended`, so late
//! spans are held apart, by trace, until none came for the grace period,
//! and handed out marked late, to be written as a run of their own linked
//! to the first ([`crate::map::map_late`]). Their span ids join the
//! trace's: a retry of a late span is dropped as well.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use crate::decode::SpanIn;

/// How many written traces' span ids are remembered, to tell a retry from
/// a late span.
const REMEMBERED: usize = 4096;

/// What became of a span offered to the [`Assembler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// Held for its trace.
    Held,
    /// Its span id was seen before (an exporter's retry): dropped.
    Duplicate,
    /// Its trace was written already: held with the trace's other late
    /// spans, to be written as a run of their own.
    Late,
}

/// A trace handed out whole, to be written.
#[derive(Debug)]
pub struct Ready {
    /// Its spans, in arrival order.
    pub spans: Vec<SpanIn>,
    /// The spans came after their trace's run was written.
    pub late: bool,
}

/// One trace being held.
#[derive(Debug)]
struct Pending {
    spans: Vec<SpanIn>,
    ids: HashSet<String>,
    rooted: bool,
    last: Instant,
}

/// The traces held until they are whole.
#[derive(Debug, Default)]
pub struct Assembler {
    pending: HashMap<String, Pending>,
    /// Late spans, by trace (their ids are in `written`).
    late: HashMap<String, Pending>,
    written: HashMap<String, HashSet<String>>,
    order: VecDeque<String>,
}

impl Assembler {
    /// An empty assembler.
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// Takes a span in, at `now`.
    pub fn offer(&mut self, span: SpanIn, now: Instant) -> Offered {
        if let Some(seen) = self.written.get_mut(&span.trace_id) {
            if !seen.insert(span.span_id.clone()) {
                return Offered::Duplicate;
            }
            let late = self
                .late
                .entry(span.trace_id.clone())
                .or_insert_with(|| Pending {
                    spans: Vec::new(),
                    ids: HashSet::new(),
                    rooted: true,
                    last: now,
                });
            late.last = now;
            late.spans.push(span);
            return Offered::Late;
        }
        let pending = self
            .pending
            .entry(span.trace_id.clone())
            .or_insert_with(|| Pending {
                spans: Vec::new(),
                ids: HashSet::new(),
                rooted: false,
                last: now,
            });
        if !pending.ids.insert(span.span_id.clone()) {
            return Offered::Duplicate;
        }
        pending.rooted |= span.parent.is_none();
        pending.last = now;
        pending.spans.push(span);
        Offered::Held
    }

    /// Hands out every trace whose root has arrived and that has been
    /// quiet for `grace` at `now`, and every trace's late spans that have
    /// been quiet for `grace`; with `all`, everything held (a shutdown).
    /// A trace's late spans come after the trace itself.
    pub fn take_ready(&mut self, now: Instant, grace: Duration, all: bool) -> Vec<Ready> {
        let ready = |held: &HashMap<String, Pending>| -> Vec<String> {
            held.iter()
                .filter(|(_, p)| {
                    all || (p.rooted && now.saturating_duration_since(p.last) >= grace)
                })
                .map(|(id, _)| id.clone())
                .collect()
        };
        let (whole, late) = (ready(&self.pending), ready(&self.late));
        let mut out = Vec::with_capacity(whole.len() + late.len());
        for id in whole {
            if let Some(p) = self.pending.remove(&id) {
                self.remember(id, p.ids);
                out.push(Ready {
                    spans: p.spans,
                    late: false,
                });
            }
        }
        for id in late {
            if let Some(p) = self.late.remove(&id) {
                out.push(Ready {
                    spans: p.spans,
                    late: true,
                });
            }
        }
        out
    }

    /// How many traces are held, late spans of a trace counted as one.
    pub fn held(&self) -> usize {
        self.pending.len() + self.late.len()
    }

    /// The spans of each trace held (not late spans: their run is
    /// listed as written), in arrival order.
    pub fn held_traces(&self) -> impl Iterator<Item = &[SpanIn]> {
        self.pending.values().map(|p| p.spans.as_slice())
    }

    fn remember(&mut self, trace: String, ids: HashSet<String>) {
        if self.order.len() >= REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.written.remove(&old);
            }
        }
        self.order.push_back(trace.clone());
        self.written.insert(trace, ids);
    }
}

//! Spans held by trace until their run can be written whole.
//!
//! Exporters send a trace's spans as they end (children before their
//! parents), split across requests, and retry a request they are not sure
//! arrived. A run is append-only with gapless seqs, so a trace is held
//! here until its root span has arrived and no span of it has come for
//! the grace period; then it is handed out whole, to be written in span
//! time order. A span id seen before (a retry) is dropped: nothing doubled.
//! A span of a trace already handed out is late: counted, not recorded (the
//! run has ended; the stream rules take nothing after `run.ended`).

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
    /// Its trace was written already: not recorded.
    Late,
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
        if let Some(seen) = self.written.get(&span.trace_id) {
            return if seen.contains(&span.span_id) {
                Offered::Duplicate
            } else {
                Offered::Late
            };
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
    /// quiet for `grace` at `now`, each as its spans; with `all`, every
    /// trace held (a shutdown).
    pub fn take_ready(&mut self, now: Instant, grace: Duration, all: bool) -> Vec<Vec<SpanIn>> {
        let ready: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| all || (p.rooted && now.saturating_duration_since(p.last) >= grace))
            .map(|(id, _)| id.clone())
            .collect();
        let mut out = Vec::with_capacity(ready.len());
        for id in ready {
            if let Some(p) = self.pending.remove(&id) {
                self.remember(id, p.ids);
                out.push(p.spans);
            }
        }
        out
    }

    /// How many traces are held.
    pub fn held(&self) -> usize {
        self.pending.len()
    }

    /// The spans of each trace held, in arrival order.
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

//! The light stream of a call outside any run (a call served over MCP):
//! its facts wait in the writer until its `call.ended`, and are appended
//! with it as one block, so the store creates the stream, writes its
//! block, updates its record and moves its status once per call, not once
//! per drain the call's facts happened to fall into.
//!
//! Nothing waits on an unappended fact: a durable flush is asked for at
//! the call's end (its `call.ended` is then in hand), or for the whole
//! recorder, and either writes what is held first. What is held is
//! appended anyway when it grows past [`HOLD_MAX`] facts or is older than
//! [`HOLD_AGE`] at a drain (a long call is seen by readers while it runs,
//! if later than a short one), and when the recorder closes. *Why:* a
//! served call was two appends (its start in one drain, its end in the
//! next), each creating or updating the stream's record and indexes in
//! sled: the `mcp-serve` row's host cost.

use std::sync::Arc;
use std::time::Duration;

use reel::fact::Fact;

use super::drain::Writer;
use super::flusher::Ack;

/// The most facts a call outside any run holds back.
pub(super) const HOLD_MAX: usize = 256;

/// How long the facts of a call outside any run are held at most, counted
/// from the first held (checked at each drain).
pub(super) const HOLD_AGE: Duration = Duration::from_millis(100);

/// What [`Writer::append`] does with a run's numbered facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// Append them (after any held before them).
    Append,
    /// Hold them back, to append with a later batch.
    Hold,
}

impl Writer {
    /// Whether the numbered `facts` of `run` are held back rather than
    /// appended: a call outside any run whose end is not among them, on a
    /// writer that does not flush every batch, with room in the hold.
    pub(super) fn place(&self, run: &str, facts: &[Fact], end: bool) -> Place {
        if end || self.flush_every_batch {
            return Place::Append;
        }
        let hold = self.runs.get(run).is_some_and(|state| {
            state.outside.is_some() && state.held.len() + facts.len() <= HOLD_MAX
        });
        if hold {
            Place::Hold
        } else {
            Place::Append
        }
    }

    /// Appends the facts held for calls outside any run that may not wait
    /// any longer: all of them when the writer closes, those a flush of
    /// this drain asked for (its stream's, or the whole recorder's), and
    /// those held longer than [`HOLD_AGE`] (`now` and the held facts'
    /// first tick are the clock's raw ticks).
    pub(super) fn release_held(&mut self, acks: &[Ack], closing: bool, now: u64) {
        if self.holding.is_empty() {
            return;
        }
        // A stream forgotten meanwhile holds nothing any more.
        let runs = &self.runs;
        self.holding
            .retain(|run| runs.get(run).is_some_and(|s| !s.held.is_empty()));
        let all = closing || acks.iter().any(|(run, _)| run.is_none());
        let due: Vec<Arc<str>> = self
            .holding
            .iter()
            .filter(|run| {
                all || acks.iter().any(|(r, _)| r.as_deref() == Some(&***run))
                    || self.clock.delta(runs[*run].held_since, now) >= HOLD_AGE
            })
            .cloned()
            .collect();
        for run in due {
            self.append(&run, Vec::new(), Vec::new(), Place::Append);
        }
    }
}

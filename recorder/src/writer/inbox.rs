//! The queue's channel: the tools file messages into chunks of [`CHUNK`]
//! slots under one lock, the writer takes every filled chunk at once and
//! hands the emptied ones back, so that in steady state the tools' side
//! never allocates.
//!
//! *Why not tokio's unbounded channel* (what the queue was): it allocates
//! a block of 32 slots on the sending thread every 32 messages unless its
//! receiver has handed one back, and it hands back at most the few that
//! fit behind its tail, freeing the rest on the receiving thread. reel's
//! writer lags a burst (it encodes and stores), so the tool's thread
//! allocated a fresh block, often on fresh pages (a page fault), for one
//! report in 32: 3% of the reports, which is where the `progress` row's
//! p99 was (the book's Performance page).
//!
//! Here the writer keeps a pool of emptied chunks for the tools, sized to
//! what they filed since the writer last took (between [`SPARE_MIN`] and
//! [`SPARE_MAX`] chunks), and tops it up on its own thread when the
//! tools took more than it gave back: the tools' side allocates a chunk
//! only when a burst outruns the pool within one drain of the writer.
//!
//! Order: one lock orders every send, so the writer receives messages in
//! the order they were filed (a send that happens before another, on any
//! thread, is received first). Filing never waits for the writer: the
//! lock is held for a slot's copy by a tool, and for swapping the chunk
//! lists by the writer. A send wakes the writer only when it waits for
//! messages (one wake, whatever is sent until it wakes).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use reel::lock::{lock, wait};

use super::Msg;

/// Messages per chunk (a chunk of 56-byte messages is 28 KiB).
const CHUNK: usize = 512;
/// Emptied chunks kept for the tools at least (1,024 messages).
const SPARE_MIN: usize = 2;
/// Emptied chunks kept for the tools at most (65,536 messages, the
/// default `progress_bound`; more goes back to the allocator).
const SPARE_MAX: usize = 128;

type Chunk = VecDeque<Msg>;

/// What the tools and the writer share.
#[derive(Default)]
struct Shared {
    filed: Mutex<Filed>,
    /// The writer waits here for messages.
    wake: Condvar,
}

#[derive(Default)]
struct Filed {
    /// Chunks in filing order; the last one is being filled.
    chunks: VecDeque<Chunk>,
    /// Emptied chunks (capacity [`CHUNK`]) for the tools to fill next.
    spare: Vec<Chunk>,
    /// The writer waits on [`Shared::wake`].
    waiting: bool,
    /// Sends fail: the writer met the close message, or stopped.
    closed: bool,
    /// Facts filed and not yet written (see [`Count`]).
    in_flight: usize,
}

/// Makes a channel: the tools' end and the writer's.
pub(super) fn channel() -> (Sender, Receiver) {
    let shared = Arc::new(Shared::default());
    let spare = (0..SPARE_MIN)
        .map(|_| Chunk::with_capacity(CHUNK))
        .collect();
    lock(&shared.filed).spare = spare;
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver {
            shared,
            taken: VecDeque::new(),
            emptied: Vec::new(),
        },
    )
}

/// The tools' end.
pub(super) struct Sender {
    shared: Arc<Shared>,
}

impl Sender {
    /// Files `msg`, counting it as a fact in flight when `count` says so
    /// (refused over a bound: see [`Count`]). Never waits for the writer.
    #[inline]
    pub(super) fn send(&self, msg: Msg, count: Count) -> Result<(), Refused> {
        let mut filed = lock(&self.shared.filed);
        let refused = match count {
            _ if filed.closed => Some(Refused::Closed),
            Count::No => None,
            Count::Fact => {
                filed.in_flight += 1;
                None
            }
            Count::Under(bound) if filed.in_flight < bound => {
                filed.in_flight += 1;
                None
            }
            Count::Under(_) => Some(Refused::Full),
        };
        if let Some(refused) = refused {
            // The payload is freed after the lock.
            drop(filed);
            drop(msg);
            return Err(refused);
        }
        match filed.chunks.back_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push_back(msg),
            _ => {
                let mut chunk = filed
                    .spare
                    .pop()
                    .unwrap_or_else(|| Chunk::with_capacity(CHUNK));
                chunk.push_back(msg);
                filed.chunks.push_back(chunk);
            }
        }
        let wake = std::mem::take(&mut filed.waiting);
        drop(filed);
        if wake {
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Facts filed and not yet written (see [`Receiver::written`]).
    pub(super) fn in_flight(&self) -> usize {
        lock(&self.shared.filed).in_flight
    }
}

/// Whether a message counts as a fact in flight (the count the queue's
/// bounds are on): kept beside the chunks, under their lock, so that
/// filing touches one cache line the writer also writes, not two.
#[derive(Clone, Copy)]
pub(super) enum Count {
    /// Not a fact (a call, a secret, a flush...).
    No,
    /// A fact: counted, never refused.
    Fact,
    /// A progress report: counted, refused when this many are in flight.
    Under(usize),
}

/// Why a message was not filed (it was dropped).
#[derive(Debug, PartialEq)]
pub(super) enum Refused {
    /// The writer closed the channel.
    Closed,
    /// Over the bound of [`Count::Under`].
    Full,
}

/// Whether [`Receiver::take`] waits for a chunk when none is filed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Take {
    /// Wait until a chunk is filed or the channel is closed.
    Wait,
    /// Return at once.
    NoWait,
}

/// The writer's end. Dropped (the writer stopped), it closes the channel
/// and drops what was filed (a flush waiting on it is told).
pub(super) struct Receiver {
    shared: Arc<Shared>,
    /// The chunks taken from the tools, being received.
    taken: VecDeque<Chunk>,
    /// Chunks received whole, to hand back at the next take.
    emptied: Vec<Chunk>,
}

impl Receiver {
    /// The next message, waiting for one; `None` once the channel is
    /// closed and everything filed before was received.
    pub(super) fn recv(&mut self) -> Option<Msg> {
        loop {
            if let Some(msg) = self.next() {
                return Some(msg);
            }
            if !self.take(Take::Wait) {
                return None;
            }
        }
    }

    /// The next message if one was filed.
    pub(super) fn try_recv(&mut self) -> Option<Msg> {
        match self.next() {
            Some(msg) => Some(msg),
            None => {
                self.take(Take::NoWait);
                self.next()
            }
        }
    }

    /// Whether every message filed so far was received.
    pub(super) fn is_empty(&self) -> bool {
        self.taken.iter().all(|chunk| chunk.is_empty())
            && lock(&self.shared.filed).chunks.is_empty()
    }

    /// `n` facts received were written: no longer in flight.
    pub(super) fn written(&self, n: usize) {
        if n > 0 {
            let mut filed = lock(&self.shared.filed);
            filed.in_flight = filed.in_flight.saturating_sub(n);
        }
    }

    /// Closes the channel: later sends fail; what was filed before is
    /// still received.
    pub(super) fn close(&mut self) {
        lock(&self.shared.filed).closed = true;
    }

    fn next(&mut self) -> Option<Msg> {
        loop {
            let chunk = self.taken.front_mut()?;
            if let Some(msg) = chunk.pop_front() {
                return Some(msg);
            }
            if let Some(chunk) = self.taken.pop_front() {
                self.emptied.push(chunk);
            }
        }
    }

    /// Takes every filled chunk (waiting for one with [`Take::Wait`]),
    /// handing the emptied ones back. False when there is nothing to take
    /// and the channel is closed (or, not waiting, nothing to take).
    fn take(&mut self, how: Take) -> bool {
        let mut filed = lock(&self.shared.filed);
        while filed.chunks.is_empty() {
            if filed.closed || how == Take::NoWait {
                return false;
            }
            filed.waiting = true;
            filed = wait(&self.shared.wake, filed);
        }
        debug_assert!(self.taken.is_empty());
        std::mem::swap(&mut filed.chunks, &mut self.taken);
        // The pool: as many chunks as the tools filled since the last take,
        // so that they can file as much again before the next.
        let want = self.taken.len().clamp(SPARE_MIN, SPARE_MAX);
        while filed.spare.len() < want {
            match self.emptied.pop() {
                Some(chunk) => filed.spare.push(chunk),
                None => break,
            }
        }
        let short = want.saturating_sub(filed.spare.len());
        drop(filed);
        // What the pool does not want goes back to the allocator, and
        // what it lacks comes from it, here on the writer's thread.
        self.emptied.clear();
        if short > 0 {
            let fresh: Vec<Chunk> = (0..short).map(|_| Chunk::with_capacity(CHUNK)).collect();
            lock(&self.shared.filed).spare.extend(fresh);
        }
        true
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let left = {
            let mut filed = lock(&self.shared.filed);
            filed.closed = true;
            std::mem::take(&mut filed.chunks)
        };
        drop(left);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn closed(run: &str) -> Msg {
        Msg::RunClosed { run: run.into() }
    }

    fn name(msg: Msg) -> String {
        match msg {
            Msg::RunClosed { run } => run.to_string(),
            _ => unreachable!("only RunClosed is sent here"),
        }
    }

    /// Messages come out in the order they went in, across chunk
    /// boundaries and takes, and a closed channel still yields what was
    /// filed before, then ends.
    #[test]
    fn in_order_across_chunks_then_closed() {
        let (tx, mut rx) = channel();
        let mut got = Vec::new();
        for i in 0..CHUNK * 5 + 3 {
            assert!(tx.send(closed(&i.to_string()), Count::No).is_ok());
            if i % 97 == 0 {
                while let Some(m) = rx.try_recv() {
                    got.push(name(m));
                }
            }
        }
        rx.close();
        assert!(
            tx.send(closed("late"), Count::No).is_err(),
            "closed: sends fail"
        );
        while let Some(m) = rx.recv() {
            got.push(name(m));
        }
        let want: Vec<String> = (0..CHUNK * 5 + 3).map(|i| i.to_string()).collect();
        assert_eq!(got, want);
    }

    /// A bounded message is refused at the bound, and filed again once
    /// the writer has written some; other facts are counted, never
    /// refused.
    #[test]
    fn the_bound_counts_facts_in_flight() {
        let (tx, mut rx) = channel();
        assert_eq!(tx.send(closed("a"), Count::Under(2)), Ok(()));
        assert_eq!(tx.send(closed("b"), Count::Fact), Ok(()));
        assert_eq!(tx.send(closed("c"), Count::Under(2)), Err(Refused::Full));
        assert_eq!(tx.send(closed("d"), Count::Fact), Ok(()));
        assert_eq!(tx.send(closed("e"), Count::No), Ok(()));
        assert_eq!(tx.in_flight(), 3);
        let got: Vec<String> = std::iter::from_fn(|| rx.try_recv()).map(name).collect();
        assert_eq!(got, ["a", "b", "d", "e"]);
        rx.written(2);
        assert_eq!(tx.send(closed("f"), Count::Under(2)), Ok(()));
        assert_eq!(tx.in_flight(), 2);
    }

    /// A writer waiting for messages is woken by a send from another
    /// thread; a dropped receiver makes sends fail.
    #[test]
    fn a_send_wakes_the_waiting_writer_and_a_dropped_writer_refuses() {
        let (tx, mut rx) = channel();
        let tx = Arc::new(tx);
        let sender = {
            let tx = tx.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                tx.send(closed("a"), Count::Fact).is_ok()
            })
        };
        assert_eq!(rx.recv().map(name).as_deref(), Some("a"));
        assert!(sender.join().unwrap());
        drop(rx);
        assert!(tx.send(closed("b"), Count::No).is_err());
    }
}

//! The order in which the HTTP proxy forwards requests: the order they
//! reached it, across connections.
//!
//! A client that opens a GET stream and then sends a POST on another
//! connection expects the server to have the stream first. The proxy's
//! connections are served concurrently, so without a line a later request
//! could be forwarded first. Each request takes a [`Ticket`] where it
//! enters: a connection's first request when the connection is accepted
//! (accepts are taken in order), a later one on a kept-alive connection
//! when its head is read. It is forwarded once every earlier ticket is
//! released (its request written upstream, refused, or its connection
//! gone), and releases its own once its first bytes are in the upstream's
//! socket. A ticket holds its place for at most [`PATIENCE`]: a
//! connection that sends nothing, or a body that crawls, cannot stall the
//! line (its request then queues again at the back).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a ticket holds its place before later requests may pass it.
pub(crate) const PATIENCE: Duration = Duration::from_secs(1);

/// The line of requests waiting to be forwarded.
#[derive(Default)]
pub(crate) struct Line {
    state: Mutex<State>,
    moved: Notify,
}

#[derive(Default)]
struct State {
    next: u64,
    /// Tickets not released: number -> until when it holds its place.
    waiting: BTreeMap<u64, Instant>,
}

/// A place in the [`Line`]; released when dropped.
pub(crate) struct Ticket {
    line: Arc<Line>,
    n: u64,
    until: Instant,
}

impl Line {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        reel::lock::lock(&self.state)
    }

    /// A place at the back of the line.
    pub(crate) fn take(self: &Arc<Line>) -> Ticket {
        let until = Instant::now() + PATIENCE;
        let mut state = self.state();
        let n = state.next;
        state.next += 1;
        state.waiting.insert(n, until);
        Ticket {
            line: self.clone(),
            n,
            until,
        }
    }
}

impl Ticket {
    /// Waits until every earlier ticket is released or out of patience.
    /// A ticket itself out of patience goes to the back first.
    pub(crate) async fn turn(mut self) -> Ticket {
        if Instant::now() >= self.until {
            self = self.line.take();
        }
        let line = self.line.clone();
        loop {
            let moved = line.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            let now = Instant::now();
            let blocking = line
                .state()
                .waiting
                .range(..self.n)
                .map(|(_, until)| *until)
                .filter(|until| *until > now)
                .min();
            let Some(until) = blocking else {
                return self;
            };
            tokio::select! {
                _ = moved => {}
                _ = tokio::time::sleep_until(until) => {}
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.line.state().waiting.remove(&self.n);
        self.line.moved.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tickets_are_served_in_order_and_a_silent_one_is_passed_after_its_patience() {
        let line = Arc::new(Line::default());
        let first = line.take();
        let second = line.take();
        let third = line.take();
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let later = tokio::spawn(async move {
            let t = third.turn().await;
            o.lock().unwrap().push(3);
            drop(t);
        });
        let o = order.clone();
        let mid = tokio::spawn(async move {
            let t = second.turn().await;
            o.lock().unwrap().push(2);
            drop(t);
        });
        tokio::task::yield_now().await;
        assert!(order.lock().unwrap().is_empty(), "all wait for the first");
        let t = first.turn().await;
        order.lock().unwrap().push(1);
        drop(t);
        mid.await.unwrap();
        later.await.unwrap();
        assert_eq!(*order.lock().unwrap(), [1, 2, 3]);

        // A ticket never used holds the line only for its patience.
        let silent = line.take();
        let next = line.take();
        let started = Instant::now();
        let t = next.turn().await;
        assert!(started.elapsed() >= PATIENCE - Duration::from_millis(50));
        drop(t);
        drop(silent);
    }
}

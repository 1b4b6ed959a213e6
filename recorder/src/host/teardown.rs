//! Cleanups: what each holder (call, run, the recorder's per-session map)
//! keeps, and running them in reverse with a time bound.

use std::collections::HashMap;
use std::time::Duration;

use reel::context::*;
use reel::fact::*;

pub(super) async fn run_cleanup(cleanup: Cleanup, bound: Duration) -> TeardownOutcome {
    // Spawned, so that a panicking cleanup is recorded, not thrown.
    let mut task = tokio::spawn(cleanup());
    match tokio::time::timeout(bound, &mut task).await {
        Err(_) => {
            // Stopped, not abandoned: a cleanup never runs past its bound,
            // nor alongside the next one (reverse order is a dependency
            // order). Waits for the task to be dropped, itself bounded.
            task.abort();
            let _ = tokio::time::timeout(bound, task).await;
            TeardownOutcome::TimedOut
        }
        Ok(Err(join)) => TeardownOutcome::Error {
            message: if join.is_panic() {
                "the cleanup panicked".into()
            } else {
                "the cleanup was cancelled".into()
            },
        },
        Ok(Ok(Err(message))) => TeardownOutcome::Error { message },
        Ok(Ok(Ok(()))) => TeardownOutcome::Ok,
    }
}

/// Cleanups of one scope holder, first registration per key wins; a
/// repeat refreshes the key's liveness (seed 000).
#[derive(Default)]
pub(super) struct Teardowns {
    pub(super) order: Vec<(String, Cleanup)>,
    /// Per key: (registrations so far, unix nanos of the last one).
    pub(super) liveness: HashMap<String, (u64, i64)>,
}

impl Teardowns {
    /// Registers at `at` (unix nanos); a repeat key drops its cleanup, keeps
    /// the first one, and counts.
    pub(super) fn register(&mut self, key_hash: &str, cleanup: Cleanup, at: i64) -> Registration {
        let entry = self.liveness.entry(key_hash.to_owned()).or_insert((0, at));
        entry.0 += 1;
        entry.1 = at;
        let registrations = entry.0;
        let first = registrations == 1;
        if first {
            self.order.push((key_hash.to_owned(), cleanup));
        }
        Registration {
            first,
            registrations,
            at,
        }
    }

    /// The cleanups, last registered first, each with its liveness.
    pub(super) fn into_reverse_order(
        mut self,
    ) -> impl Iterator<Item = (String, Cleanup, (u64, i64))> {
        self.order.into_iter().rev().map(move |(key, cleanup)| {
            let live = self.liveness.remove(&key).unwrap_or_default();
            (key, cleanup, live)
        })
    }
}

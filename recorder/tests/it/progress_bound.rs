//! The progress bound is exact: with the writer held (a store whose append
//! of a batch holding progress waits on a gate), reports filed from several
//! threads at once are queued until exactly `progress_bound` facts are in
//! flight, and every later one is dropped and counted, whatever the
//! interleaving; once the writer has caught up, a report is queued again
//! (the tools' copy of the writer's count is refreshed). The record counts
//! every report filed: kept plus `progress.dropped` is what the tool
//! filed, each thread's reports stay in their filing order, and the
//! counts are gapless. Nothing here depends on timing: the gate, not the
//! clock, holds the writer.

use std::sync::{Arc, Condvar, Mutex};

use reel::context::{ToolContext, ToolError};
use reel::fact::{Fact, FactKind, RunStatus};
use reel::store::{Store, StoreError};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

const BOUND: usize = 1_000;
const THREADS: usize = 4;
/// Reports per thread while the writer is held: together well over the bound.
const PER_THREAD: usize = 600;

/// Keeps every batch; an append of a batch holding a progress report waits
/// until the gate is open.
#[derive(Default)]
struct GatedStore {
    batches: Mutex<Vec<Vec<Fact>>>,
    open: Mutex<bool>,
    opened: Condvar,
}

impl GatedStore {
    fn open_gate(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl Store for GatedStore {
    fn append_batch(&self, _stream: &str, facts: Vec<Fact>) -> Result<(), StoreError> {
        if facts
            .iter()
            .any(|f| matches!(f.kind, FactKind::Progress(_)))
        {
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.opened.wait(open).unwrap();
            }
        }
        self.batches.lock().unwrap().push(facts);
        Ok(())
    }

    fn put_artifact(&self, _bytes: &[u8]) -> Result<String, StoreError> {
        Ok(format!("sha256:{}", "0".repeat(64)))
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn close_stream(&self, _stream: &str) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Waits (no clock: yields) until the writer has written everything filed.
fn drained(recorder: &Recorder) {
    while recorder.queued() > 0 {
        std::thread::yield_now();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_progress_bound_is_exact_across_threads_and_every_drop_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let archive = Archive::open(
        dir.path(),
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([4; 32]),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let store = Arc::new(GatedStore::default());
    let recorder = Recorder::with_archive_and_store(
        archive,
        store.clone(),
        RecorderConfig {
            fingerprint_key: FingerprintKey::Key([4; 32]),
            serve_live: false,
            progress_bound: BOUND,
            ..RecorderConfig::default()
        },
    )
    .unwrap();
    let run = recorder.start_run(RunStart::new("bound")).await.unwrap();
    let (rec, gate) = (recorder.clone(), store.clone());
    run.call("storm", json!({}))
        .invoke(move |ctx: ToolContext, _: Value| async move {
            // call.started is written: nothing else is in flight.
            drained(&rec);
            // The writer holds at the first batch with a report in it, so
            // from here on nothing in flight is written.
            std::thread::scope(|s| {
                for t in 0..THREADS {
                    let ctx = ctx.clone();
                    s.spawn(move || {
                        for i in 0..PER_THREAD {
                            ctx.progress(json!({ "t": t, "i": i }));
                        }
                    });
                }
            });
            assert_eq!(rec.queued(), BOUND, "exactly the bound is in flight");
            gate.open_gate();
            drained(&rec);
            // Room again: the first report files the drop count (one fact in
            // flight), so a bound less one more reports all fit.
            for i in 0..BOUND - 1 {
                ctx.progress(json!({ "t": THREADS, "i": i }));
            }
            Ok::<_, ToolError>(json!({}))
        })
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    recorder.shutdown().await.unwrap();

    let facts: Vec<Fact> = store.batches.lock().unwrap().concat();
    let mut count = 0u64;
    let mut kept = [0usize; THREADS + 1];
    let mut next = [0u64; THREADS + 1];
    let mut drops = Vec::new();
    for f in &facts {
        match &f.kind {
            FactKind::Progress(p) => {
                count += 1;
                assert_eq!(p.count, count, "counts are gapless, drops included");
                let t = p.payload["t"].as_u64().unwrap() as usize;
                let i = p.payload["i"].as_u64().unwrap();
                assert!(i >= next[t], "thread {t}'s reports keep their order");
                next[t] = i + 1;
                kept[t] += 1;
            }
            FactKind::ProgressDropped(d) => {
                count += d.count;
                drops.push(d.count);
            }
            _ => {}
        }
    }
    let held: usize = kept[..THREADS].iter().sum();
    assert_eq!(held, BOUND, "queued while the writer was held: {kept:?}");
    assert_eq!(
        drops,
        vec![(THREADS * PER_THREAD - BOUND) as u64],
        "every drop counted, once, before the next report"
    );
    assert_eq!(kept[THREADS], BOUND - 1, "nothing dropped below the bound");
    assert_eq!(count as usize, THREADS * PER_THREAD + BOUND - 1);
}

//! A batch the store did not take must not take its seqs: the run's later
//! batches reach the store numbered on from where the stream is, with no
//! gap (a gap would make the store refuse the rest of the run), and the
//! failure is said, never silent. The store pauses on the failing batch
//! while the tool goes on filing, so the batches after it are drained
//! while it fails (a writer that numbered ahead of the store, as a
//! pipelined one would, must number them again).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reel::context::{ToolContext, ToolError};
use reel::fact::{Fact, FactKind, RunStatus};
use reel::rules::StreamRules;
use reel::store::{Store, StoreError};
use reel_archive::FingerprintKey;
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use serde_json::json;

/// Keeps every batch it takes, each held to its stream's rules (a gap in
/// the seqs is refused, as the archive refuses it). Its `fail_at`-th
/// append fails as a whole-store error (a disk hiccup), after a pause in
/// which the tool goes on filing.
struct HiccupStore {
    batches: Mutex<Vec<(String, Vec<Fact>)>>,
    rules: Mutex<HashMap<String, StreamRules>>,
    appends: AtomicUsize,
    fail_at: usize,
    /// Facts of the batch that failed.
    lost: AtomicUsize,
}

impl Store for HiccupStore {
    fn append_batch(&self, stream: &str, facts: Vec<Fact>) -> Result<(), StoreError> {
        if self.appends.fetch_add(1, Ordering::SeqCst) == self.fail_at {
            std::thread::sleep(Duration::from_millis(150));
            self.lost.store(facts.len(), Ordering::SeqCst);
            return Err(StoreError::Other("the device hiccupped".into()));
        }
        let mut rules = self.rules.lock().unwrap();
        let mut next = rules
            .get(stream)
            .cloned()
            .unwrap_or_else(|| StreamRules::new(stream));
        for fact in &facts {
            next.check(fact)
                .map_err(|v| StoreError::stream(stream, v.to_string()))?;
        }
        rules.insert(stream.to_owned(), next);
        self.batches
            .lock()
            .unwrap()
            .push((stream.to_owned(), facts));
        Ok(())
    }

    fn put_artifact(&self, _bytes: &[u8]) -> Result<String, StoreError> {
        Err(StoreError::Other("no artifacts here".into()))
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn close_stream(&self, _stream: &str) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Files `n` reports a millisecond apart: many drains, some of them
/// filed while the store pauses on the failing batch.
async fn steady(ctx: ToolContext, n: u32) -> Result<u32, ToolError> {
    for i in 0..n {
        ctx.progress(json!({ "step": i }));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_store_did_not_take_leaves_no_gap_in_the_batches_numbered_after_it() {
    let store = Arc::new(HiccupStore {
        batches: Mutex::default(),
        rules: Mutex::default(),
        appends: AtomicUsize::new(0),
        // run.started, call.started, then some reports: a batch in the
        // middle of the call.
        fail_at: 4,
        lost: AtomicUsize::new(0),
    });
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([9; 32]),
        serve_live: false,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::with_store(store.clone(), config).expect("recorder");
    let run = recorder
        .start_run(RunStart::new("r1"))
        .await
        .expect("start");
    let filed = 400;
    // The call's end is not durable: the store failed on the way.
    let call = run.call("steady", filed).invoke(steady).await;
    assert!(call.is_err(), "{call:?}");
    let _ = run.end(RunStatus::Completed).await;
    let shut = recorder.shutdown().await.expect_err("the failure is said");
    assert!(shut.to_string().contains("the device hiccupped"), "{shut}");

    let lost = store.lost.load(Ordering::SeqCst);
    assert!(lost > 0, "the failing batch held facts");
    let batches = store.batches.lock().unwrap();
    let failed_at = store.fail_at;
    assert!(
        batches.len() > failed_at + 3,
        "batches after the failed one were taken: {} in all",
        batches.len()
    );
    let facts: Vec<&Fact> = batches.iter().flat_map(|(_, f)| f).collect();
    // Every fact taken, numbered 0.. with no gap (the store's rules would
    // have refused a gap and the run's later facts with it).
    for (i, fact) in facts.iter().enumerate() {
        assert_eq!(fact.seq, i as u64, "{:?}", fact.kind.name());
    }
    let reports = facts
        .iter()
        .filter(|f| matches!(f.kind, FactKind::Progress(_)))
        .count();
    assert_eq!(
        reports + lost,
        filed as usize,
        "only the failed batch is missing"
    );
    assert!(matches!(
        facts.last().map(|f| &f.kind),
        Some(FactKind::RunEnded(_))
    ));
}

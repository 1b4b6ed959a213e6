//! A call's facts are recorded in the order its tool filed them, progress
//! reports interleaved with its other facts, while many calls of several
//! runs file at once on a multi-thread runtime (and some hand their
//! context to a thread of their own for a while). Each tool writes down
//! what it filed, in order; the archive must hold exactly that between the
//! call's `call.started` and its `call.ended`, with gapless progress
//! counts. Many rounds, each with its own shape, against the real archive.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use reel::context::{ToolContext, ToolError};
use reel::fact::{FactKind, RunStatus};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

const ROUNDS: u64 = 12;
const RUNS: u64 = 2;
const CALLS: u64 = 4;

/// What a tool filed, in order (by run and call id).
#[derive(Debug, Clone, PartialEq)]
enum Filed {
    Progress(u64),
    Random(u64),
}

type Log = Arc<Mutex<HashMap<String, Vec<Filed>>>>;

fn key() -> FingerprintKey {
    FingerprintKey::Key([3; 32])
}

/// Files `n` items, a random draw every `every` reports, yielding now and
/// then; in the middle, when `thread`, a thread of its own files a block
/// of reports with a clone of the context (joined before going on).
async fn tool(ctx: ToolContext, n: u64, every: u64, thread: bool, log: Log) -> Vec<Filed> {
    let mut filed = Vec::new();
    for i in 0..n {
        if i % every == every - 1 {
            filed.push(Filed::Random(ctx.random()));
        } else {
            ctx.progress(json!(i));
            filed.push(Filed::Progress(i));
        }
        if i.is_multiple_of(7) {
            tokio::task::yield_now().await;
        }
        if thread && i == n / 2 {
            let ctx = ctx.clone();
            let block = std::thread::spawn(move || {
                (n..n + 50)
                    .map(|j| {
                        ctx.progress(json!(j));
                        Filed::Progress(j)
                    })
                    .collect::<Vec<_>>()
            })
            .join()
            .unwrap();
            filed.extend(block);
        }
    }
    let key = format!("{}/{}", ctx.run_id().unwrap_or_default(), ctx.call_id());
    log.lock().unwrap().insert(key, filed.clone());
    filed
}

async fn round(r: u64) {
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig {
        fingerprint_key: key(),
        serve_live: false,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(dir.path(), config).await.unwrap();
    let log: Log = Arc::default();
    let mut runs = Vec::new();
    let mut tasks = Vec::new();
    for k in 0..RUNS {
        let run = recorder
            .start_run(RunStart::new(format!("order-{r}-{k}")))
            .await
            .unwrap();
        for c in 0..CALLS {
            let (n, every) = (50 + (r * 37 + k * 11 + c * 53) % 400, 2 + (r + c) % 9);
            let thread = (r + k + c).is_multiple_of(3);
            let log = log.clone();
            let call = run.call(&format!("tool-{c}"), json!({}));
            tasks.push(tokio::spawn(async move {
                call.invoke(move |ctx: ToolContext, _: Value| async move {
                    tool(ctx, n, every, thread, log).await;
                    Ok::<_, ToolError>(json!({}))
                })
                .await
                .unwrap();
            }));
        }
        runs.push(run);
    }
    for t in tasks {
        t.await.unwrap();
    }
    let ids: Vec<String> = runs.iter().map(|r| r.id().to_owned()).collect();
    for run in runs {
        run.end(RunStatus::Completed).await.unwrap();
    }
    recorder.shutdown().await.unwrap();

    let archive = Archive::open(
        dir.path(),
        ArchiveConfig {
            fingerprint_key: key(),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let log = log.lock().unwrap();
    let mut seen = 0;
    for id in &ids {
        // Per call: started, what was filed, ended.
        let mut recorded: HashMap<String, (bool, Vec<Filed>, bool, u64)> = HashMap::new();
        for f in archive.facts(id, ..).unwrap() {
            let f = f.unwrap();
            let Some(call) = f.call.clone() else { continue };
            let entry = recorded.entry(call.clone()).or_default();
            assert!(!entry.2, "round {r}: a fact of {call} after its call.ended");
            match f.kind {
                FactKind::CallStarted(_) => entry.0 = true,
                FactKind::Progress(p) => {
                    assert!(entry.0, "round {r}: a report of {call} before call.started");
                    entry.3 += 1;
                    assert_eq!(p.count, entry.3, "round {r}: {call}'s counts are gapless");
                    entry.1.push(Filed::Progress(p.payload.as_u64().unwrap()));
                }
                FactKind::Random(x) => entry.1.push(Filed::Random(x.value)),
                FactKind::CallEnded(_) => entry.2 = true,
                _ => {}
            }
        }
        for (call, (started, facts, ended, _)) in recorded {
            let want = log
                .get(&format!("{id}/{call}"))
                .unwrap_or_else(|| panic!("{id}/{call} was filed"));
            assert!(started && ended, "round {r}: {call} started and ended");
            assert_eq!(&facts, want, "round {r}: {call}'s facts in filing order");
            seen += 1;
        }
    }
    assert_eq!(
        seen,
        (RUNS * CALLS) as usize,
        "round {r}: every call recorded"
    );
}

#[test]
fn every_calls_facts_are_recorded_in_filing_order_under_concurrency() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for r in 0..ROUNDS {
        runtime.block_on(round(r));
    }
}

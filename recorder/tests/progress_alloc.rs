//! Filing a progress report allocates nothing on the tool's thread in
//! steady state: a counting global allocator (this test binary's own)
//! counts the allocations made on the filing thread while it files
//! 100,000 reports after a warm-up, in bursts of 500 that the writer
//! catches up with (as a tool awaiting something lets it). The payloads
//! are built beforehand (numbers: no heap of their own), so every
//! allocation counted is the recorder's. On tokio's unbounded channel
//! (the queue before) this counted about one allocation per 32 reports
//! (a block of slots, freed on the writer's thread); the queue's chunks
//! now come back to the tools. The archive then holds every report, in
//! filing order.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use reel::context::{ToolContext, ToolError};
use reel::fact::{FactKind, RunStatus};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

/// Counts the allocations of the threads that ask for it.
struct Counting;

static COUNTED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        COUNTED.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const WARM_UP: u64 = 10_000;
const REPORTS: u64 = 100_000;
const BURST: u64 = 500;

/// Files reports `from..to` in bursts of [`BURST`], each followed by a
/// wait (no clock: yields) until the writer has written everything filed.
/// Returns the allocations made on this thread meanwhile.
fn file(ctx: &ToolContext, rec: &Recorder, payloads: Vec<Value>) -> u64 {
    let before = COUNTED.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    let mut payloads = payloads.into_iter();
    loop {
        let mut filed = 0;
        for p in payloads.by_ref().take(BURST as usize) {
            ctx.progress(p);
            filed += 1;
        }
        while rec.queued() > 0 {
            std::thread::yield_now();
        }
        if filed < BURST {
            break;
        }
    }
    COUNTING.with(|c| c.set(false));
    COUNTED.load(Ordering::Relaxed) - before
}

#[tokio::test(flavor = "current_thread")]
async fn filing_progress_allocates_nothing_on_the_tools_thread_in_steady_state() {
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([6; 32]),
        serve_live: false,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(dir.path(), config).await.unwrap();
    let run = recorder.start_run(RunStart::new("alloc")).await.unwrap();
    let run_id = run.id().to_owned();
    let rec = recorder.clone();
    let counted = run
        .call("steady", json!({}))
        .invoke(move |ctx: ToolContext, _: Value| async move {
            let warm: Vec<Value> = (0..WARM_UP).map(Value::from).collect();
            file(&ctx, &rec, warm);
            let payloads: Vec<Value> = (WARM_UP..WARM_UP + REPORTS).map(Value::from).collect();
            let counted = file(&ctx, &rec, payloads);
            Ok::<_, ToolError>(json!(counted))
        })
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    drop(run);
    recorder.shutdown().await.unwrap();

    let counted = counted.as_u64().unwrap();
    assert!(
        counted <= 2,
        "filing {REPORTS} reports allocated {counted} times on the tool's thread"
    );
    let archive = Archive::open(
        dir.path(),
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([6; 32]),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let mut next = 0u64;
    for f in archive.facts(&run_id, ..).unwrap() {
        if let FactKind::Progress(p) = f.unwrap().kind {
            assert_eq!(p.payload, Value::from(next), "reports in filing order");
            next += 1;
        }
    }
    assert_eq!(next, WARM_UP + REPORTS, "every report recorded");
}

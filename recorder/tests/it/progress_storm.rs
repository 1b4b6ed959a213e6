//! A progress storm: a tool that calls `progress()` 5,000,000 times
//! without an await keeps peak memory bounded (reports over the queue's
//! `progress_bound` are dropped, seed 000: "with nothing listening it is a
//! no-op that drops the report"), and the record says how many were
//! dropped. Measured in a child process (this test binary run again with
//! `REEL_STORM_CHILD` set), whose peak RSS (`VmHWM`) is read from
//! `/proc/self/status` at its end. Before the bound, 5,000,000 reports
//! peaked at 2.8 GB.

use std::process::Command;

use reel::context::{ToolContext, ToolError};
use reel::fact::{FactKind, RunStatus};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

const REPORTS: u64 = 5_000_000;
/// The stated bound on the child's peak RSS.
const BOUND_MB: u64 = 200;
/// The storm test's name in this binary (`--exact` takes the module path).
const TEST: &str = "progress_storm::five_million_reports_without_an_await_stay_bounded_and_counted";

fn config() -> RecorderConfig {
    RecorderConfig {
        fingerprint_key: FingerprintKey::Key([9; 32]),
        serve_live: false,
        ..RecorderConfig::default()
    }
}

async fn storm(ctx: ToolContext, _: Value) -> Result<Value, ToolError> {
    for i in 0..REPORTS {
        ctx.progress(Value::String(format!("step {i}")));
    }
    Ok(json!({ "reported": REPORTS }))
}

fn vm_hwm_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

fn child(dir: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let recorder = Recorder::open(dir, config()).await.unwrap();
        let run = recorder.start_run(RunStart::new("storm")).await.unwrap();
        let t = std::time::Instant::now();
        run.call("storm", json!({})).invoke(storm).await.unwrap();
        eprintln!("storm: the call took {:?}", t.elapsed());
        run.end(RunStatus::Completed).await.unwrap();
        recorder.shutdown().await.unwrap();
        eprintln!("storm: recorded in {:?}", t.elapsed());
    });
    println!("storm-hwm-kb={}", vm_hwm_kb());
}

#[test]
fn five_million_reports_without_an_await_stay_bounded_and_counted() {
    if let Some(dir) = std::env::var_os("REEL_STORM_CHILD") {
        return child(dir.to_str().unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env("REEL_STORM_CHILD", dir.path())
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hwm_kb: u64 = stdout
        .lines()
        .find_map(|l| l.split_once("storm-hwm-kb="))
        .and_then(|(_, v)| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no figure from the child: {stdout}"));
    eprintln!("peak RSS of 5,000,000 reports: {} MB", hwm_kb / 1024);
    assert!(
        hwm_kb < BOUND_MB * 1024,
        "peak RSS {} MB, over the bound of {BOUND_MB} MB",
        hwm_kb / 1024
    );

    // The record says how many were dropped, and counts every report.
    let archive = Archive::open(
        dir.path(),
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([9; 32]),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let (mut counted, mut dropped) = (0u64, 0u64);
    for f in archive.facts("storm", ..).unwrap() {
        match f.unwrap().kind {
            FactKind::Progress(p) => {
                counted += 1;
                assert_eq!(p.count, counted);
            }
            FactKind::ProgressDropped(d) => {
                counted += d.count;
                dropped += d.count;
            }
            _ => {}
        }
    }
    eprintln!("kept {} reports, dropped {dropped}", counted - dropped);
    assert_eq!(counted, REPORTS);
    assert!(dropped > 0);
}

//! The `memory` row: a tool filing 5,000,000 progress reports without an
//! await, its peak resident memory against the same process recording the
//! same call with no report, and the bound it must stay under.
//!
//! Peak RSS is a property of a whole process, so each side runs in a child
//! process: this bench's own binary run again with [`CHILD_ENV`] set (see
//! [`child_main`]), which prints its `VmHWM` (from `/proc/self/status`) when
//! the recording has shut down, before anything else is read.
//!
//! # The bound
//!
//! `progress()` never waits, so what keeps a storm's memory bounded is the
//! recorder's `progress_bound` (65,536 by default): with that many facts
//! in flight, a report is dropped and counted (`progress.dropped
//! {count}`), not queued. What the storm may add to the idle process:
//!
//! - the queue: `progress_bound` reports in flight, each a channel slot
//!   (the writer's message: call key, tick, the `serde_json::Value`, ~96 B)
//!   plus its payload's heap, and what the allocator keeps around them:
//!   [`QUEUE_BYTES_PER_REPORT`] allows 512 B (measured: a storm of 200,000
//!   reports, which fills the queue and keeps 73,000, peaks 43 MB over
//!   the idle process, 3.5 MB of it stored);
//! - the writer's drain: up to 8,192 messages taken before a write, each
//!   then a pending fact (a 376-byte `Fact` and its call id) plus its
//!   encoding ([`DRAIN_BYTES`] allows 8,192 x 1 KiB);
//! - what is stored: sled 0.34 keeps the pages a process wrote resident
//!   (as it keeps what it reads, see `cli/tests/it/stream.rs`), so the kept
//!   reports cost about their stored size, the archive directory's
//!   allocated size after the child ends ([`STORED_RESIDENT`] allows 2x;
//!   measured 1.1-1.5x: 5,000,000 reports kept 470,000-550,000, 27-31 MB
//!   stored, peak 89-93 MB; 20,000,000 kept 1,680,000, 101 MB stored,
//!   peak 162 MB).
//!   That is the storage's cost of any fact written, not the storm's: the
//!   queue's share does not grow with the number of reports.
//!
//! The bound checked is the idle side's peak plus those three terms.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use reel::context::{ToolContext, ToolError};
use reel::fact::{FactKind, RunStatus};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

/// Set (to `MODE:REPORTS:DIR`) in the child process of the memory row.
pub const CHILD_ENV: &str = "REEL_BENCH_MEMORY_CHILD";

/// What the queue may hold per report in flight: the channel slot, the
/// payload's heap (`"step N"` strings are a 32-byte allocation) and the
/// allocator's share around them.
pub const QUEUE_BYTES_PER_REPORT: u64 = 512;

/// What sled keeps resident per stored byte written, as a fraction
/// (numerator, denominator): 2/1.
pub const STORED_RESIDENT: (u64, u64) = (2, 1);

/// What the writer's drain may hold: 8,192 messages as pending facts with
/// their call ids, payloads and encoding, at 1 KiB each.
pub const DRAIN_BYTES: u64 = 8192 * 1024;

/// The fingerprint key of the memory row's archives (never the user's).
const KEY: FingerprintKey = FingerprintKey::Key([7; 32]);

fn config() -> RecorderConfig {
    RecorderConfig {
        fingerprint_key: KEY,
        serve_live: false,
        ..RecorderConfig::default()
    }
}

/// What one side of the row ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The recorder, one call filing the reports without an await.
    Storm,
    /// The recorder, the same call filing no report.
    Idle,
    /// No recorder: the same loop building the same payloads and dropping
    /// them (for information: what the process costs without reel).
    Bare,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Storm => "storm",
            Mode::Idle => "idle",
            Mode::Bare => "bare",
        }
    }
}

/// A child's figures.
#[derive(Debug, Clone, Copy)]
pub struct Peak {
    /// Peak resident memory (VmHWM), bytes.
    pub hwm: u64,
    /// Reports the record keeps as `progress` facts.
    pub kept: u64,
    /// Reports the record counts as dropped (`progress.dropped`).
    pub dropped: u64,
    /// The archive directory's allocated size after the child ended, bytes.
    pub stored: u64,
}

fn vm_hwm_bytes() -> io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| io::Error::other("no VmHWM in /proc/self/status"))
}

/// Files `n` reports, never awaiting.
async fn storm(ctx: ToolContext, n: u64) -> Result<Value, ToolError> {
    for i in 0..n {
        ctx.progress(Value::String(format!("step {i}")));
    }
    Ok(json!({ "reported": n }))
}

/// In the child process of the memory row (when [`CHILD_ENV`] is set):
/// runs its side, prints `memory-child hwm=... kept=... dropped=...` and
/// returns true. Returns false in any other process. The bench's `main`
/// calls this first.
pub fn child_main() -> bool {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return false;
    };
    if let Err(e) = child(&spec) {
        eprintln!("reel-bench memory child ({spec}): {e}");
        std::process::exit(1);
    }
    true
}

fn child(spec: &str) -> io::Result<()> {
    let mut parts = spec.splitn(3, ':');
    let (mode, n, dir) = match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(n), Some(d)) => (m, n.parse::<u64>().map_err(io::Error::other)?, d),
        _ => return Err(io::Error::other(format!("{CHILD_ENV} is MODE:REPORTS:DIR"))),
    };
    if mode == Mode::Bare.name() {
        // The same loop, the same payloads, nobody to give them to.
        for i in 0..n {
            std::hint::black_box(Value::String(format!("step {i}")));
        }
        println!("memory-child hwm={} kept=0 dropped=0", vm_hwm_bytes()?);
        return Ok(());
    }
    let reports = if mode == Mode::Idle.name() { 0 } else { n };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let recorder = Recorder::open(dir, config())
            .await
            .map_err(io::Error::other)?;
        let run = recorder
            .start_run(RunStart::new("storm"))
            .await
            .map_err(io::Error::other)?;
        run.call("storm", json!({}))
            .invoke(move |ctx, _: Value| storm(ctx, reports))
            .await
            .map_err(|e| io::Error::other(format!("{e:?}")))?;
        run.end(RunStatus::Completed)
            .await
            .map_err(io::Error::other)?;
        recorder.shutdown().await.map_err(io::Error::other)
    })?;
    // Taken before the record is read back: reading keeps pages resident.
    let hwm = vm_hwm_bytes()?;
    let archive = Archive::open(
        dir,
        ArchiveConfig {
            fingerprint_key: KEY,
            ..ArchiveConfig::default()
        },
    )
    .map_err(io::Error::other)?;
    let (mut kept, mut dropped) = (0u64, 0u64);
    for f in archive.facts("storm", ..).map_err(io::Error::other)? {
        match f.map_err(io::Error::other)?.kind {
            FactKind::Progress(_) => kept += 1,
            FactKind::ProgressDropped(d) => dropped += d.count,
            _ => {}
        }
    }
    println!("memory-child hwm={hwm} kept={kept} dropped={dropped}");
    Ok(())
}

/// The bench binary to run as the child: this executable, or, from a test
/// harness (`target/<profile>/deps/`), the `reel-bench` binary cargo built
/// beside it.
fn child_exe() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.file_name().is_some_and(|n| n == "deps") {
        let bench = dir
            .parent()
            .unwrap_or(&dir)
            .join(format!("reel-bench{}", std::env::consts::EXE_SUFFIX));
        if bench.exists() {
            return Ok(bench);
        }
        return Err(io::Error::other(format!(
            "the memory row runs the reel-bench binary as its child, and there is none at {}: \
             build it with `cargo build -p reel-bench`",
            bench.display()
        )));
    }
    Ok(exe)
}

/// Runs one side in a child process, recording into an archive in `dir`
/// (fresh).
pub fn measure(mode: Mode, reports: u64, dir: &Path) -> io::Result<Peak> {
    let archive = dir.join("archive");
    let spec = format!("{}:{reports}:{}", mode.name(), archive.display());
    let out = Command::new(child_exe()?)
        .env(CHILD_ENV, &spec)
        .env(reel_archive::CONFIG_DIR_ENV, dir.join("config"))
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "the memory child ({spec}) failed ({}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("memory-child "))
        .ok_or_else(|| {
            io::Error::other(format!("the memory child printed no figures: {stdout}"))
        })?;
    let field = |name: &str| -> io::Result<u64> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| io::Error::other(format!("no {name} in {line:?}")))
    };
    let stored = if mode == Mode::Bare {
        0
    } else {
        crate::record::disk_usage(&archive)?.0
    };
    Ok(Peak {
        hwm: field("hwm")?,
        kept: field("kept")?,
        dropped: field("dropped")?,
        stored,
    })
}

/// The stated bound on the storm side's peak RSS, bytes: the idle side's
/// peak, the queue at `progress_bound`, the writer's drain, and what sled
/// keeps resident of the `stored` bytes (see the module docs).
pub fn bound(idle_hwm: u64, progress_bound: usize, stored: u64) -> u64 {
    idle_hwm
        + progress_bound as u64 * QUEUE_BYTES_PER_REPORT
        + DRAIN_BYTES
        + stored * STORED_RESIDENT.0 / STORED_RESIDENT.1
}

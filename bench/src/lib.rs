//! # reel-bench: reel against its performance budget
//!
//! Every row of the performance budget in DESIGN.md, each measured against
//! its baseline in the same process: the two sides run back to back in each
//! round (the order alternating from round to round), over at least five
//! rounds, and the figures reported are medians. This machine's speed moves
//! by 1.5-4x from run to run, so the ratio is the median of the per-round
//! ratios (each taken between two measurements made seconds apart), not the
//! ratio of the medians.
//!
//! The binary prints each row's absolute figures as it goes, then one
//! summary table. [`run`] is the whole suite; the smoke test calls it with
//! [`Sizes::smoke`].
//!
//! # The rows
//!
//! | row | reel | baseline |
//! |---|---|---|
//! | `record` | 64 concurrent runs x 10 calls x 300 `ctx.progress()` through `reel_recorder` (call-boundary durability), facts/s from the first `start_run` until `shutdown` returns | the same facts built the same way, `encode_fact` + u32 length prefix, one `write` + `fsync` per call to a plain file |
//! | `record-fair` | the same reel recordings | the same facts and encoding as `record`'s plain file, with the same group commit: the n-th batch of every run written, then one fsync |
//! | `record-limit` | the same reel recordings | the same facts encoded and compressed per batch as reel's blocks are (zstd -1), written with no fsync at all (what the CPU and the disk allow) |
//! | `agent` | 64 concurrent runs x 20 calls of a tool with ~2 KiB args, 3 effects with 4 KiB JSON responses, 2 progress reports, 1 log and an 8 KiB result (1 call in 20: 256 KiB, spilled to an artifact) | the same facts built by hand, as JSON Lines (`serde_json`), same group commit |
//! | `latency` | p50 and p99 of one call of the agent tool, alone in its run, until its result is handed back (durable) | p50 and p99 of writing the bytes one such call encodes to and `sync_data` |
//! | `tracing` | the same reel recordings | the same workload through `tracing` (a span per call, an event per fact), `fmt().json()` + `tracing_appender::non_blocking` (lossless) to a file, timed until the guard is dropped; no fsync |
//! | `timeline` | `TimelineBuilder` over `Archive::facts` for every run of the last recording (archive reopened, untimed) | the plain file read whole, `decode_fact`, the same `TimelineBuilder` (decode alone is printed too) |
//! | `bytes` | the archive directory after `shutdown`, allocated blocks (`du`), per fact (sled's `size_on_disk` printed too) | the plain file, allocated blocks |
//! | `progress` | one `ctx.progress(payload)` inside a recorded call, payloads built beforehand | `tokio::sync::mpsc` unbounded `send` of the same payloads, a thread draining them |
//! | `list` | `list_runs` (tenant + status, limit 50) over 100,000 runs | the same over 1,000 runs |
//! | `replay` | facts matched per second by `reel_replayer::replay` over the tape's index, and end to end (`Tape::read` + `ReplayInput::from_tape` + `replay`) | `Tape::read` of the same tape, and freeing it (`replay` frees what it was given in its time) |
//! | `memory` | peak RSS (VmHWM, a child process) of a tool filing 5,000,000 progress reports without an await; target: under the bound [`memory`] derives from `progress_bound` | the same recorder and call filing none |
//! | `viewer` | the real `reel` binary: `reel show` of a 1,000,000-fact run until its first line reaches the pipe (target: under 50 ms); `reel runs` on 100,000 runs of 40 facts, until it exits | `reel show` of a 100-fact run; `reel runs` on 100,000 runs of 4 facts |
//! | `nats` (with `--nats URLS`) | the `record` workload into a JetStream cluster through `reel_nats::NatsStore`, call-boundary durability (each block's ack from the R3 stream), facts/s until `shutdown` returns | the very blocks reel published, read back untimed, published raw with `async-nats` to an R3 stream with the same headers (message id, expected last subject sequence), each ack awaited before the run's next block, runs concurrent |
//! | `mcp-record` | an rmcp client's `tools/call` round trips (p50, p99 of calls one after the other; calls/s with 8 in flight) to a plain rmcp server process through `reel mcp record` (the `reel` binary, or [`mcp::proxy_main`] in a `reel-bench` process) | the same client and server directly; a bare byte relay process is printed beside (the floor of any stdio proxy) |
//! | `mcp-serve` | `tools/call`/s (8 in flight; one after the other) of `McpHost` serving the echo tool on stdio, every call recorded (the recorder's defaults) | a plain rmcp server with the same tool body, no recording; the host with buffered durability is printed beside |
//!
//! ```no_run
//! let rows = reel_bench::run(&reel_bench::Options::new(reel_bench::Sizes::smoke()), &mut std::io::stderr()).unwrap();
//! println!("{}", reel_bench::summary_table(&rows));
//! ```
#![warn(missing_docs)]

pub mod agent;
pub mod list;
pub mod mcp;
pub mod memory;
pub mod nats;
pub mod progress;
pub mod record;
pub mod replay;
pub mod viewer;
pub mod workload;

use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use reel_recorder::RecorderConfig;
use workload::Shape;

/// The names of the rows, in the order of DESIGN.md's budget (also what
/// `--row` takes).
pub const ROWS: &[&str] = &[
    "record",
    "record-fair",
    "record-limit",
    "tripwire",
    "agent",
    "latency",
    "progress",
    "tracing",
    "timeline",
    "bytes",
    "list",
    "replay",
    "nats",
    "memory",
    "viewer",
    "mcp-record",
    "mcp-serve",
];

/// How big each workload is.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Rounds per row (each round measures reel and its baseline once).
    pub rounds: usize,
    /// The recording workload (record, tracing, bytes, timeline rows).
    pub shape: Shape,
    /// `progress()` calls timed per round.
    pub progress_calls: usize,
    /// Runs in the large archive of the list row.
    pub list_large: usize,
    /// Runs in the small archive of the list row.
    pub list_small: usize,
    /// Queries per archive per round in the list row.
    pub list_queries: usize,
    /// Calls in the replayed run.
    pub replay_calls: usize,
    /// Steps per replayed call.
    pub replay_steps: usize,
    /// The agent workload.
    pub agent: agent::AgentShape,
    /// Calls timed one by one per round in the latency row.
    pub latency_calls: usize,
    /// Progress reports the memory row's tool files without an await.
    pub memory_reports: u64,
    /// Facts of the run `reel show` shows in the viewer row.
    pub show_facts: usize,
    /// Runs in each archive `reel runs` lists in the viewer row.
    pub runs_count: usize,
    /// Progress reports per run in the viewer row's archive of many facts.
    pub runs_progress: usize,
    /// The MCP rows' workload.
    pub mcp: McpShape,
}

/// The MCP rows' workload (per side per round).
#[derive(Debug, Clone, Copy)]
pub struct McpShape {
    /// `tools/call`s one after the other (the latency figures, and the
    /// `mcp-serve` row's sequential rate).
    pub sequential: usize,
    /// `tools/call`s with [`McpShape::inflight`] in flight (the
    /// throughput figures).
    pub concurrent: usize,
    /// Calls in flight at once in the throughput figures.
    pub inflight: usize,
}

impl Sizes {
    /// The full suite (about a minute in release on the 2-core machine,
    /// most of it building the 100,000-run archive).
    pub fn full() -> Sizes {
        Sizes {
            rounds: 9,
            shape: Shape {
                runs: 64,
                calls: 10,
                progress: 300,
            },
            progress_calls: 200_000,
            list_large: 100_000,
            list_small: 1_000,
            list_queries: 500,
            replay_calls: 40,
            replay_steps: 500,
            agent: agent::AgentShape {
                runs: 64,
                calls: 20,
                big_every: 20,
            },
            latency_calls: 200,
            memory_reports: 5_000_000,
            show_facts: 1_000_000,
            runs_count: 100_000,
            runs_progress: 36,
            mcp: McpShape {
                sequential: 2_000,
                concurrent: 4_000,
                inflight: 8,
            },
        }
    }

    /// Tiny sizes, for the smoke test (seconds, even in debug).
    pub fn smoke() -> Sizes {
        Sizes {
            rounds: 2,
            shape: Shape {
                runs: 2,
                calls: 2,
                progress: 5,
            },
            progress_calls: 300,
            list_large: 200,
            list_small: 20,
            list_queries: 3,
            replay_calls: 2,
            replay_steps: 20,
            agent: agent::AgentShape {
                runs: 2,
                calls: 4,
                big_every: 4,
            },
            latency_calls: 5,
            memory_reports: 20_000,
            show_facts: 2_000,
            runs_count: 200,
            runs_progress: 36,
            mcp: McpShape {
                sequential: 10,
                concurrent: 20,
                inflight: 4,
            },
        }
    }
}

/// What the suite runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Workload sizes.
    pub sizes: Sizes,
    /// Rows to run (names from [`ROWS`]); empty means all.
    pub rows: Vec<String>,
    /// Where the temporary archives and files go (default: the system's
    /// temporary directory).
    pub dir: Option<PathBuf>,
    /// Worker threads of the tokio runtime the workloads run on.
    pub workers: usize,
    /// Keep the temporary archives and files (to look at them afterwards).
    pub keep: bool,
    /// The JetStream cluster of the `nats` row (comma-separated client
    /// URLs); without it the row is not run.
    pub nats: Option<String>,
    /// The `reel-bench` binary the MCP rows spawn as their servers
    /// (`--mcp-server`); this process's own executable when `None`.
    pub bench_exe: Option<PathBuf>,
    /// The `reel` binary whose `reel mcp record` the `mcp-record` row
    /// measures; when `None`, `reel-bench --mcp-record` (the same library
    /// entry point, [`mcp::proxy_main`]).
    pub reel_exe: Option<PathBuf>,
}

impl Options {
    /// All rows at these sizes.
    pub fn new(sizes: Sizes) -> Options {
        Options {
            sizes,
            rows: Vec::new(),
            dir: None,
            workers: 2,
            keep: false,
            nats: None,
            bench_exe: None,
            reel_exe: None,
        }
    }

    fn wants(&self, row: &str) -> bool {
        self.rows.is_empty() || self.rows.iter().any(|r| r == row)
    }
}

/// A row's target, on the ratio reel / baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// The ratio must be at least this.
    AtLeast(f64),
    /// The ratio must be at most this.
    AtMost(f64),
    /// The ratio must lie within `1/x ..= x`.
    Within(f64),
    /// Reel's own figure (in the row's unit) must be under this.
    Under(f64),
    /// Reported only.
    Reported,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::AtLeast(x) => write!(f, ">= {x}x"),
            Target::AtMost(x) => write!(f, "<= {x}x"),
            Target::Within(x) => write!(f, "within {x}x"),
            Target::Under(x) => write!(f, "reel under {x}"),
            Target::Reported => f.write_str("reported"),
        }
    }
}

/// How a figure reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Facts per second.
    FactsPerSec,
    /// Nanoseconds.
    Nanos,
    /// Bytes per fact.
    BytesPerFact,
    /// Milliseconds.
    Millis,
    /// Microseconds.
    Micros,
    /// Megabytes (10^6 bytes).
    Megabytes,
    /// Calls per second.
    CallsPerSec,
}

impl Unit {
    /// `value` with its unit, for people.
    pub fn show(self, value: f64) -> String {
        match self {
            Unit::FactsPerSec if value >= 1e6 => format!("{:.2}M facts/s", value / 1e6),
            Unit::FactsPerSec => format!("{:.1}k facts/s", value / 1e3),
            Unit::Nanos => format!("{value:.0} ns"),
            Unit::BytesPerFact => format!("{value:.1} B/fact"),
            Unit::Millis => format!("{value:.3} ms"),
            Unit::Micros => format!("{value:.0} us"),
            Unit::Megabytes => format!("{value:.1} MB"),
            Unit::CallsPerSec => format!("{value:.0} calls/s"),
        }
    }
}

/// One row of the summary.
#[derive(Debug, Clone)]
pub struct Row {
    /// The row's name (see [`ROWS`]).
    pub key: &'static str,
    /// What is measured.
    pub what: String,
    /// What the baseline is.
    pub baseline_is: String,
    /// The unit of both figures.
    pub unit: Unit,
    /// Reel's figure (median over rounds).
    pub reel: f64,
    /// The baseline's figure (median over rounds).
    pub baseline: f64,
    /// Median of the per-round ratios reel / baseline.
    pub ratio: f64,
    /// The target on the ratio.
    pub target: Target,
    /// Rounds measured.
    pub rounds: usize,
}

impl Row {
    /// Whether the target holds (`None` for a reported-only row).
    pub fn holds(&self) -> Option<bool> {
        match self.target {
            Target::AtLeast(x) => Some(self.ratio >= x),
            Target::AtMost(x) => Some(self.ratio <= x),
            Target::Within(x) => Some(self.ratio <= x && self.ratio >= 1.0 / x),
            Target::Under(x) => Some(self.reel < x),
            Target::Reported => None,
        }
    }
}

/// The median of `values` (NaN when empty).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Per-round figures of reel and its baseline.
#[derive(Debug, Default, Clone)]
struct Pairs {
    reel: Vec<f64>,
    base: Vec<f64>,
}

impl Pairs {
    fn push(&mut self, reel: f64, base: f64) {
        self.reel.push(reel);
        self.base.push(base);
    }

    fn row(
        &self,
        key: &'static str,
        what: &str,
        baseline_is: &str,
        unit: Unit,
        target: Target,
    ) -> Row {
        let ratios: Vec<f64> = self
            .reel
            .iter()
            .zip(&self.base)
            .map(|(r, b)| r / b)
            .collect();
        Row {
            key,
            what: what.into(),
            baseline_is: baseline_is.into(),
            unit,
            reel: median(&self.reel),
            baseline: median(&self.base),
            ratio: median(&ratios),
            target,
            rounds: self.reel.len(),
        }
    }
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

/// Runs the selected rows, printing progress and absolute figures to `log`.
pub fn run(opts: &Options, log: &mut dyn Write) -> io::Result<Vec<Row>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.workers.max(1))
        .enable_all()
        .build()?;
    let tmp = |prefix: &str| -> io::Result<tempfile::TempDir> {
        let mut b = tempfile::Builder::new();
        b.prefix(prefix).disable_cleanup(opts.keep);
        let dir = match &opts.dir {
            Some(d) => b.tempdir_in(d),
            None => b.tempdir(),
        }?;
        if opts.keep {
            eprintln!("reel-bench: keeping {}", dir.path().display());
        }
        Ok(dir)
    };
    let s = &opts.sizes;
    let rounds = s.rounds.max(1);
    let mut rows = Vec::new();
    writeln!(
        log,
        "reel-bench: {rounds} rounds per row; each round runs reel and its baseline back to back, \
         alternating which goes first; figures are medians over rounds, ratio = median of per-round ratios"
    )?;

    // ---- record, tracing, bytes, timeline --------------------------------
    let recording_rows = [
        "record",
        "record-fair",
        "record-limit",
        "tracing",
        "bytes",
        "timeline",
    ];
    if recording_rows.iter().any(|r| opts.wants(r)) {
        let shape = s.shape;
        let with_plain = opts.wants("record") || opts.wants("bytes") || opts.wants("timeline");
        let with_fair = opts.wants("record-fair");
        let with_limit = opts.wants("record-limit");
        let with_tracing = opts.wants("tracing");
        writeln!(
            log,
            "\n[record] {} concurrent runs x {} calls x {} progress reports = {} facts per recording \
             (tokio runtime, {} workers; call-boundary durability)",
            shape.runs,
            shape.calls,
            shape.progress,
            shape.facts(),
            opts.workers
        )?;
        let mut record = Pairs::default();
        let mut tracing = Pairs::default();
        let mut fair = Pairs::default();
        let mut limit = Pairs::default();
        let mut bytes = Pairs::default();
        let mut sled_sizes = Vec::new();
        let mut apparent = Pairs::default();
        // The last round's archive and plain file, read by the timeline row.
        let mut kept: Option<(tempfile::TempDir, tempfile::TempDir)> = None;
        for round in 0..rounds {
            let reel_dir = tmp("reel-bench-archive-")?;
            let plain_dir = tmp("reel-bench-plain-")?;
            let trace_dir = tmp("reel-bench-tracing-")?;
            let plain_path = plain_dir.path().join("facts.bin");
            let mut reel_rec = None;
            let mut plain_rec = None;
            let mut trace_rec = None;
            let mut fair_rec = None;
            let mut limit_rec = None;
            let mut archive = None;
            let order: Vec<usize> = (0..5).map(|i| (i + round) % 5).collect();
            for side in order {
                match side {
                    0 => {
                        let (r, a) = rt.block_on(record::reel(reel_dir.path(), shape))?;
                        reel_rec = Some(r);
                        archive = Some(a);
                    }
                    1 if with_plain => plain_rec = Some(record::plain(&plain_path, shape)?),
                    2 if with_tracing => {
                        let (r, lines) =
                            rt.block_on(record::tracing_json(trace_dir.path(), shape))?;
                        if lines != r.facts {
                            return Err(io::Error::other(format!(
                                "tracing wrote {lines} lines for {} facts",
                                r.facts
                            )));
                        }
                        trace_rec = Some(r);
                    }
                    3 if with_fair => {
                        let path = plain_dir.path().join("grouped.bin");
                        fair_rec = Some(record::plain_committed(
                            &path,
                            shape,
                            record::Commit::Grouped,
                        )?);
                    }
                    4 if with_limit => {
                        let path = plain_dir.path().join("nosync.bin");
                        limit_rec = Some(record::plain_committed(
                            &path,
                            shape,
                            record::Commit::NoSync,
                        )?);
                    }
                    _ => {}
                }
            }
            let reel_rec = reel_rec.expect("reel side ran");
            let archive = archive.expect("reel side ran");
            let mut line = format!(
                "  round {}: reel {}",
                round + 1,
                Unit::FactsPerSec.show(reel_rec.rate())
            );
            if let Some(p) = plain_rec {
                record.push(reel_rec.rate(), p.rate());
                let (a_du, a_len) = record::disk_usage(reel_dir.path())?;
                let (p_du, p_len) = record::disk_usage(&plain_path)?;
                let stats = archive.stats().map_err(io::Error::other)?;
                let n = reel_rec.facts as f64;
                bytes.push(a_du as f64 / n, p_du as f64 / n);
                apparent.push(a_len as f64 / n, p_len as f64 / n);
                sled_sizes.push(stats.bytes_on_disk as f64 / n);
                line += &format!(
                    ", plain file {} | on disk: archive {} (sled size_on_disk {}), plain {}",
                    Unit::FactsPerSec.show(p.rate()),
                    Unit::BytesPerFact.show(a_du as f64 / n),
                    Unit::BytesPerFact.show(stats.bytes_on_disk as f64 / n),
                    Unit::BytesPerFact.show(p_du as f64 / n),
                );
            }
            if let Some(t) = trace_rec {
                tracing.push(reel_rec.rate(), t.rate());
                line += &format!(", tracing {}", Unit::FactsPerSec.show(t.rate()));
            }
            if let Some(f) = fair_rec {
                fair.push(reel_rec.rate(), f.rate());
                line += &format!(
                    ", plain file group-committed {}",
                    Unit::FactsPerSec.show(f.rate())
                );
            }
            if let Some(l) = limit_rec {
                limit.push(reel_rec.rate(), l.rate());
                line += &format!(
                    ", encoded+zstd with no fsync {}",
                    Unit::FactsPerSec.show(l.rate())
                );
            }
            writeln!(log, "{line}")?;
            drop(archive);
            if round + 1 == rounds {
                kept = Some((reel_dir, plain_dir));
            }
        }
        if opts.wants("record") {
            rows.push(record.row(
                "record",
                "record: facts/s into the archive, call-boundary durability",
                "plain file, fsync per call",
                Unit::FactsPerSec,
                Target::AtLeast(0.75),
            ));
        }
        if with_fair {
            rows.push(fair.row(
                "record-fair",
                "record, fair: the same recordings, facts/s",
                "plain file, same group commit: one fsync per batch of the concurrent calls",
                Unit::FactsPerSec,
                Target::AtLeast(1.0),
            ));
        }
        if with_limit {
            rows.push(limit.row(
                "record-limit",
                "record, the limit: the same recordings, facts/s",
                "the same facts encoded, zstd-compressed as reel's blocks and written, no fsync",
                Unit::FactsPerSec,
                Target::AtLeast(0.5),
            ));
        }
        if opts.wants("tracing") {
            rows.push(tracing.row(
                "tracing",
                "tracing: the same recordings, facts/s",
                "tracing JSON file layer",
                Unit::FactsPerSec,
                Target::AtLeast(1.0),
            ));
        }
        if opts.wants("bytes") {
            rows.push(bytes.row(
                "bytes",
                "bytes: on disk per fact (archive dir, du)",
                "plain file",
                Unit::BytesPerFact,
                Target::AtMost(0.35),
            ));
            writeln!(
                log,
                "  bytes: allocated (du) archive {} vs plain {}; apparent (file lengths) archive {} vs plain {}; sled size_on_disk {}",
                Unit::BytesPerFact.show(median(&bytes.reel)),
                Unit::BytesPerFact.show(median(&bytes.base)),
                Unit::BytesPerFact.show(median(&apparent.reel)),
                Unit::BytesPerFact.show(median(&apparent.base)),
                Unit::BytesPerFact.show(median(&sled_sizes)),
            )?;
        }
        if opts.wants("timeline") {
            let (reel_dir, plain_dir) = kept.expect("at least one round");
            let plain_path = plain_dir.path().join("facts.bin");
            writeln!(
                log,
                "\n[timeline] TimelineBuilder over every run of the last recording: archive.facts() vs \
                 reading the plain file whole + decode_fact + the same TimelineBuilder"
            )?;
            let mut timeline = Pairs::default();
            let mut decode_only = Vec::new();
            for round in 0..rounds {
                let mut reel_rate = 0.0;
                let mut base_rate = 0.0;
                for side in [round % 2, 1 - round % 2] {
                    if side == 0 {
                        // Opened afresh (untimed), as `reel show` would.
                        let archive = reel_archive::Archive::open(
                            reel_dir.path(),
                            reel_archive::ArchiveConfig::default(),
                        )
                        .map_err(io::Error::other)?;
                        let t = std::time::Instant::now();
                        let n = record::timeline_from_archive(&archive, shape.runs)?;
                        reel_rate = rate(n, t.elapsed());
                        if n != shape.facts() {
                            return Err(io::Error::other(format!(
                                "the archive gave {n} facts of {}",
                                shape.facts()
                            )));
                        }
                    } else {
                        let t = std::time::Instant::now();
                        let n = record::timeline_from_plain(&plain_path)?;
                        base_rate = rate(n, t.elapsed());
                    }
                }
                let t = std::time::Instant::now();
                let n = record::decode_plain(&plain_path)?;
                decode_only.push(rate(n, t.elapsed()));
                timeline.push(reel_rate, base_rate);
                writeln!(
                    log,
                    "  round {}: archive {}, plain file {} (decode only, no timeline: {})",
                    round + 1,
                    Unit::FactsPerSec.show(reel_rate),
                    Unit::FactsPerSec.show(base_rate),
                    Unit::FactsPerSec.show(*decode_only.last().expect("pushed"))
                )?;
            }
            let row = timeline.row(
                "timeline",
                "timeline: facts/s decoded into a timeline from the archive",
                "plain file + decode_fact + same TimelineBuilder",
                Unit::FactsPerSec,
                Target::AtLeast(1.0),
            );
            writeln!(
                log,
                "  (for information: against decoding the plain file alone, without a timeline, {} -> ratio {:.2})",
                Unit::FactsPerSec.show(median(&decode_only)),
                row.reel / median(&decode_only)
            )?;
            rows.push(row);
        }
    }

    // ---- agent workload ------------------------------------------------------
    if opts.wants("agent") {
        let shape = s.agent;
        writeln!(
            log,
            "\n[agent] {} concurrent runs x {} calls; per call args ~2 KiB, 3 effects with 4 KiB JSON bodies, \
             2 progress reports, 1 log, a result of 8 KiB (1 call in {} returns 256 KiB, which spills to an artifact) \
             = {} facts; baseline: the same facts as JSON Lines, the same group commit",
            shape.runs,
            shape.calls,
            shape.big_every,
            shape.facts()
        )?;
        let mut pairs = Pairs::default();
        let mut sizes = Pairs::default();
        for round in 0..rounds {
            let reel_dir = tmp("reel-bench-agent-")?;
            let plain_dir = tmp("reel-bench-agent-jsonl-")?;
            let path = plain_dir.path().join("facts.jsonl");
            let mut reel_rec = None;
            let mut base_rec = None;
            for side in [round % 2, 1 - round % 2] {
                if side == 0 {
                    let (r, archive) = rt.block_on(agent::reel(reel_dir.path(), shape))?;
                    drop(archive);
                    reel_rec = Some(r);
                } else {
                    base_rec = Some(agent::jsonl(&path, shape)?);
                }
            }
            let (r, b) = (reel_rec.expect("ran"), base_rec.expect("ran"));
            pairs.push(r.rate(), b.rate());
            let (a_du, _) = record::disk_usage(reel_dir.path())?;
            let (p_du, _) = record::disk_usage(&path)?;
            let n = r.facts as f64;
            sizes.push(a_du as f64 / n, p_du as f64 / n);
            writeln!(
                log,
                "  round {}: reel {}, JSON Lines {} | on disk: archive {}, JSON Lines {}",
                round + 1,
                Unit::FactsPerSec.show(r.rate()),
                Unit::FactsPerSec.show(b.rate()),
                Unit::BytesPerFact.show(a_du as f64 / n),
                Unit::BytesPerFact.show(p_du as f64 / n),
            )?;
        }
        rows.push(pairs.row(
            "agent",
            "record, agent workload: facts/s, call-boundary durability",
            "the same facts as JSON Lines, same group commit",
            Unit::FactsPerSec,
            Target::AtLeast(1.0),
        ));
        writeln!(
            log,
            "  (for information: on disk per fact, archive {} vs JSON Lines {}, ratio {:.2})",
            Unit::BytesPerFact.show(median(&sizes.reel)),
            Unit::BytesPerFact.show(median(&sizes.base)),
            median(&sizes.reel) / median(&sizes.base)
        )?;
    }

    // ---- latency -------------------------------------------------------------
    if opts.wants("latency") {
        let n = s.latency_calls;
        writeln!(
            log,
            "\n[latency] {n} calls of the agent tool one after the other in one run, each timed from invoke \
             until its result is handed back (durable: call-boundary durability); baseline: {n} times the bytes \
             one such call encodes to, written and fsynced (sync_data) on the same disk"
        )?;
        let mut p50 = Pairs::default();
        let mut p99 = Pairs::default();
        let mut buffered = Vec::new();
        for round in 0..rounds {
            let dir = tmp("reel-bench-latency-")?;
            // For information: the same calls with buffered durability
            // (no flush waited for): what a call costs without durability.
            let b = rt.block_on(agent::latency_buffered(&dir.path().join("buffered"), n))?;
            buffered.push(agent::quantile_us(&b, 0.5));
            let mut reel_l = None;
            let mut base_l = None;
            let mut bytes = 0;
            for side in [round % 2, 1 - round % 2] {
                if side == 0 {
                    let (l, b) =
                        rt.block_on(agent::latency_reel(&dir.path().join("archive"), n))?;
                    bytes = b;
                    reel_l = Some(l);
                } else {
                    // The same size as reel's side measures; before reel
                    // has run once, its figure from a dry encoding.
                    if bytes == 0 {
                        bytes = agent::call_bytes()?;
                    }
                    base_l = Some(agent::latency_fsync(
                        &dir.path().join("fsync.bin"),
                        bytes,
                        n,
                    )?);
                }
            }
            let (r, b) = (reel_l.expect("ran"), base_l.expect("ran"));
            let (r50, r99) = (agent::quantile_us(&r, 0.5), agent::quantile_us(&r, 0.99));
            let (b50, b99) = (agent::quantile_us(&b, 0.5), agent::quantile_us(&b, 0.99));
            p50.push(r50, b50);
            p99.push(r99, b99);
            writeln!(
                log,
                "  round {}: a call p50 {r50:.0} us, p99 {r99:.0} us; write+fsync of {bytes} B p50 {b50:.0} us, p99 {b99:.0} us",
                round + 1
            )?;
        }
        writeln!(
            log,
            "  (for information: the same calls with buffered durability, no flush waited for: p50 {:.0} us)",
            median(&buffered)
        )?;
        rows.push(p50.row(
            "latency",
            "latency a call pays for call-boundary durability, p50",
            "one fsync of the same bytes",
            Unit::Micros,
            Target::AtMost(1.2),
        ));
        rows.push(p99.row(
            "latency",
            "latency a call pays for call-boundary durability, p99",
            "one fsync of the same bytes",
            Unit::Micros,
            Target::Reported,
        ));
    }

    // ---- compression: lz4 against zstd on the same blocks -------------------
    if opts.wants("bytes") {
        writeln!(
            log,
            "\n[compression] the blocks of the record and agent workloads (each call's facts encoded, \
             before compression), compressed block by block"
        )?;
        for (name, blocks) in [
            ("record", record::workload_blocks(s.shape)?),
            ("agent", agent::workload_blocks(s.agent)?),
        ] {
            let (raw, codecs) = record::compression_survey(&blocks)?;
            for c in codecs {
                writeln!(
                    log,
                    "  {name}: {}: {:.3} of {} KiB raw; compress {:.0} MB/s, decompress {:.0} MB/s",
                    c.name,
                    c.bytes as f64 / raw as f64,
                    raw / 1024,
                    raw as f64 / 1e6 / c.compress.as_secs_f64(),
                    raw as f64 / 1e6 / c.decompress.as_secs_f64(),
                )?;
            }
        }
    }

    // ---- tripwire --------------------------------------------------------
    if opts.wants("tripwire") {
        let shape = s.shape;
        writeln!(
            log,
            "\n[tripwire] the record row's workload ({} facts) with a declared secret per run: \
             the tripwire on (the default) vs off, alternating",
            shape.facts()
        )?;
        let mut wire = Pairs::default();
        for round in 0..rounds {
            let (mut on, mut off) = (0.0, 0.0);
            for side in [round % 2, 1 - round % 2] {
                let dir = tmp("reel-bench-tripwire-")?;
                let config = RecorderConfig {
                    tripwire: side == 0,
                    ..record::recorder_config()
                };
                let (r, _) = rt.block_on(record::reel_with(dir.path(), shape, config, true))?;
                if side == 0 {
                    on = r.rate();
                } else {
                    off = r.rate();
                }
            }
            wire.push(on, off);
            writeln!(
                log,
                "  round {}: tripwire on {}, off {} (ratio {:.3})",
                round + 1,
                Unit::FactsPerSec.show(on),
                Unit::FactsPerSec.show(off),
                on / off
            )?;
        }
        rows.push(wire.row(
            "tripwire",
            "tripwire: record facts/s with the tripwire on (a declared secret per run)",
            "the same, tripwire off",
            Unit::FactsPerSec,
            Target::AtLeast(0.9),
        ));
    }

    // ---- progress ----------------------------------------------------------
    if opts.wants("progress") {
        let n = s.progress_calls;
        let clock = progress::Clock::calibrate();
        writeln!(
            log,
            "\n[progress] {n} calls per round, timed with the TSC ({:.3} ns/tick, timer overhead {:.1} ns subtracted) in groups of {}: \
             median from groups timed whole, p99 from calls timed alone; \
             baseline: tokio::sync::mpsc unbounded send of the same payload",
            clock.ns_per_tick,
            clock.overhead_ns(),
            progress::GROUP
        )?;
        let mut med = Pairs::default();
        let mut p99 = Pairs::default();
        for round in 0..rounds {
            let mut reel_c = None;
            let mut base_c = None;
            for side in [round % 2, 1 - round % 2] {
                if side == 0 {
                    let dir = tmp("reel-bench-progress-")?;
                    reel_c = Some(rt.block_on(progress::reel(dir.path(), n, clock))?);
                } else {
                    base_c = Some(rt.block_on(progress::mpsc(n, clock))?);
                }
            }
            let (r, b) = (reel_c.expect("ran"), base_c.expect("ran"));
            med.push(r.median(), b.median());
            p99.push(r.p99(), b.p99());
            writeln!(
                log,
                "  round {}: progress() median {:.1} ns, p99 {:.0} ns; mpsc send median {:.1} ns, p99 {:.0} ns",
                round + 1,
                r.median(),
                r.p99(),
                b.median(),
                b.p99()
            )?;
        }
        // For information: the same sends with a receiver that works as the
        // writer does (busy 1 us per message), so that the channel grows
        // and the other core is busy.
        let mut lag_p99 = Vec::new();
        for _ in 0..rounds.min(3) {
            let c = rt.block_on(progress::mpsc_lagging(n, clock, Duration::from_micros(1)))?;
            lag_p99.push((c.median(), c.p99()));
        }
        writeln!(
            log,
            "  (for information: mpsc send with a receiver busy 1 us per message, as the writer is: median {:.1} ns, p99 {:.0} ns)",
            median(&lag_p99.iter().map(|c| c.0).collect::<Vec<_>>()),
            median(&lag_p99.iter().map(|c| c.1).collect::<Vec<_>>()),
        )?;
        let (tick, two_reads) = progress::envelope_clocks(clock, n);
        writeln!(
            log,
            "  (for information: the envelope's one clock read on the tool's thread, a quanta tick, costs {tick:.1} ns here; SystemTime::now + Instant::elapsed would cost {two_reads:.1} ns)",
        )?;
        rows.push(med.row(
            "progress",
            "progress: cost of one ctx.progress() on the tool's thread, median",
            "tokio mpsc send",
            Unit::Nanos,
            Target::AtMost(1.5),
        ));
        rows.push(p99.row(
            "progress",
            "progress: the same, p99",
            "tokio mpsc send",
            Unit::Nanos,
            Target::AtMost(1.5),
        ));
    }

    // ---- list ----------------------------------------------------------------
    if opts.wants("list") {
        let (large, small) = (s.list_large, s.list_small);
        writeln!(
            log,
            "\n[list] list_runs(tenant + status filter, limit 50) over {large} runs vs {small} runs; \
             {} queries per archive per round",
            s.list_queries
        )?;
        let large_dir = tmp("reel-bench-list-large-")?;
        let small_dir = tmp("reel-bench-list-small-")?;
        let t = std::time::Instant::now();
        let large_archive = list::build(large_dir.path(), large)?;
        let small_archive = list::build(small_dir.path(), small)?;
        writeln!(
            log,
            "  built both archives in {:.1} s (untimed)",
            t.elapsed().as_secs_f64()
        )?;
        let mut pairs = Pairs::default();
        for round in 0..rounds {
            let mut l = Duration::ZERO;
            let mut sm = Duration::ZERO;
            let (mut ln, mut sn) = (0, 0);
            for side in [round % 2, 1 - round % 2] {
                if side == 0 {
                    (l, ln) = list::time_queries(&large_archive, s.list_queries)?;
                } else {
                    (sm, sn) = list::time_queries(&small_archive, s.list_queries)?;
                }
            }
            let (lm, smm) = (l.as_secs_f64() * 1e3, sm.as_secs_f64() * 1e3);
            pairs.push(lm, smm);
            writeln!(
                log,
                "  round {}: {large} runs {lm:.3} ms/query ({ln} runs returned), {small} runs {smm:.3} ms/query ({sn} runs returned)",
                round + 1
            )?;
        }
        rows.push(pairs.row(
            "list",
            &format!("list: list_runs(tenant+status, limit 50), {large} runs"),
            &format!("{small} runs"),
            Unit::Millis,
            Target::Within(2.0),
        ));
    }

    // ---- replay --------------------------------------------------------------
    if opts.wants("replay") {
        let dir = tmp("reel-bench-replay-")?;
        let bytes = rt.block_on(replay::record_tape(
            dir.path(),
            s.replay_calls,
            s.replay_steps,
        ))?;
        let tools = replay::tools();
        writeln!(
            log,
            "\n[replay] one recorded run: {} calls x {} steps (progress, an effect every 8, a log every 16), tape {} KiB; \
             reel: facts matched per second by reel_replayer::replay over the tape's index (reading and indexing the tape untimed); \
             baseline: facts per second decoded by Tape::read of the same bytes, the tape freed \
             (replay() frees the facts it was given in its own time)",
            s.replay_calls,
            s.replay_steps,
            bytes.len() / 1024
        )?;
        let mut pairs = Pairs::default();
        let mut from_tape = Vec::new();
        for round in 0..rounds {
            let mut reel_rate = 0.0;
            let mut base_rate = 0.0;
            for side in [round % 2, 1 - round % 2] {
                if side == 0 {
                    // Replay is driven the way a test drives it: on a
                    // current-thread runtime.
                    let local = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    let r = local.block_on(replay::replay_tape(&bytes, &tools))?;
                    reel_rate = rate(r.matched as usize, r.replay);
                    from_tape.push(rate(r.matched as usize, r.load + r.replay));
                } else {
                    let (n, d) = replay::decode_tape(&bytes)?;
                    base_rate = rate(n, d);
                }
            }
            pairs.push(reel_rate, base_rate);
            writeln!(
                log,
                "  round {}: replay() {} (reading the tape + replay() {}), Tape::read {}",
                round + 1,
                Unit::FactsPerSec.show(reel_rate),
                Unit::FactsPerSec.show(*from_tape.last().expect("pushed")),
                Unit::FactsPerSec.show(base_rate)
            )?;
        }
        rows.push(pairs.row(
            "replay",
            "replay: facts matched/s by replay() (recording loaded)",
            "Tape::read of the same tape, freed",
            Unit::FactsPerSec,
            Target::AtLeast(0.8),
        ));
        let end_to_end = Pairs {
            reel: from_tape,
            base: pairs.base.clone(),
        };
        rows.push(end_to_end.row(
            "replay",
            "replay, end to end: Tape::read + from_tape + replay(), facts/s",
            "Tape::read of the same tape, freed",
            Unit::FactsPerSec,
            Target::AtLeast(0.6),
        ));
    }
    if let (Some(urls), true) = (&opts.nats, opts.wants("nats")) {
        let mut pairs = Pairs::default();
        // Run ids unique to this bench run: the cluster keeps every run.
        let nonce = workload::unix_nanos();
        for round in 0..rounds {
            let tag = format!("bench{nonce}r{round}");
            // Reel first in every round (not alternating): the raw side
            // publishes the very blocks reel has just published.
            let c0 = nats::Cpu::now();
            let published = nats::reel(urls, &tag, s.shape, opts.workers.max(1))?;
            let c1 = nats::Cpu::now();
            let (raw, raw_cpu) = nats::raw(urls, &tag, &published, opts.workers.max(1))?;
            writeln!(
                log,
                "  nats round {round}: reel {} ({} facts, {} blocks, {} sent again while the previous was in process, in {:.3} s), raw async-nats {} ({} facts)",
                Unit::FactsPerSec.show(published.recorded.rate()),
                published.recorded.facts,
                published.last + 1 - published.first,
                published.retries,
                published.recorded.elapsed.as_secs_f64(),
                Unit::FactsPerSec.show(raw.rate()),
                raw.facts,
            )?;
            if let (Some(c0), Some(c1), Some(b)) = (c0, c1, raw_cpu) {
                // CPU seconds of each side, this process's and the
                // servers': where the cores went (reel's side includes
                // its connect and setup; the raw side is its timed part).
                let r = c1.since(c0);
                writeln!(
                    log,
                    "  nats round {round} cpu: reel side {:.2} s here + {:.2} s in nats-server; raw side {:.2} s here + {:.2} s in nats-server",
                    r.bench, r.servers, b.bench, b.servers
                )?;
            }
            pairs.push(published.recorded.rate(), raw.rate());
        }
        rows.push(pairs.row(
            "nats",
            "nats: facts/s into a 3-node JetStream cluster (R3), call-boundary durability",
            "raw async-nats publishes of the same blocks, same headers, same acks",
            Unit::FactsPerSec,
            Target::AtLeast(0.75),
        ));
    }
    if opts.wants("memory") {
        rows.push(memory_row(s, rounds, &tmp, log)?);
    }
    if opts.wants("viewer") {
        rows.extend(viewer_rows(s, rounds, &tmp, log)?);
    }
    if opts.wants("mcp-record") || opts.wants("mcp-serve") {
        let programs = mcp::Programs {
            bench: match &opts.bench_exe {
                Some(p) => p.clone(),
                None => std::env::current_exe()?,
            },
            proxy: match &opts.reel_exe {
                Some(p) => mcp::ProxyBin::Reel(p.clone()),
                None => mcp::ProxyBin::InBench,
            },
            dir: tmp("reel-bench-mcp-")?.keep(),
        };
        let result = mcp_rows(opts, &rt, &programs, log, &mut rows);
        if !opts.keep {
            let _ = std::fs::remove_dir_all(&programs.dir);
        }
        result?;
    }
    Ok(rows)
}

/// The `mcp-record` and `mcp-serve` rows (see [`mcp`]).
fn mcp_rows(
    opts: &Options,
    rt: &tokio::runtime::Runtime,
    programs: &mcp::Programs,
    log: &mut dyn Write,
    rows: &mut Vec<Row>,
) -> io::Result<()> {
    use mcp::Side;
    let shape = opts.sizes.mcp;
    let rounds = opts.sizes.rounds.max(1);
    let mut n = 0;
    // One side's figures in one round: sequential call times, calls/s
    // with `inflight` in flight. A new session (process) per side per
    // round; its start (spawn, initialize, tools/list) and a warm-up of
    // a few calls are untimed.
    let mut measure = |side: Side| -> io::Result<(Vec<Duration>, f64)> {
        n += 1;
        rt.block_on(async {
            let session = programs.connect(side, n).await?;
            session.sequential(shape.sequential.min(20)).await?;
            let took = session.sequential(shape.sequential).await?;
            let rate = session.concurrent(shape.concurrent, shape.inflight).await?;
            session.close().await?;
            Ok((took, rate))
        })
    };
    if opts.wants("mcp-record") {
        let proxy = match &programs.proxy {
            mcp::ProxyBin::Reel(p) => format!("`{} mcp record` (the reel binary)", p.display()),
            mcp::ProxyBin::InBench => "`reel-bench --mcp-record` (no reel binary given or found: \
                the library entry point `reel mcp record` calls, in its own process)"
                .to_owned(),
        };
        writeln!(
            log,
            "\n[mcp-record] an rmcp client (2025-11-25, stdio) calling `{}` ({} B of text back and forth) \
             on a plain rmcp server process, through {proxy} recording into an archive, against the same \
             client and server directly; per side per round: {} calls one after the other (p50, p99), \
             then {} calls with {} in flight (calls/s)",
            mcp::TOOL,
            mcp::TEXT_BYTES,
            shape.sequential,
            shape.concurrent,
            shape.inflight
        )?;
        let mut p50 = Pairs::default();
        let mut p99 = Pairs::default();
        let mut rate = Pairs::default();
        let mut relay = Pairs::default();
        for round in 0..rounds {
            // For information, beside the pair: a bare byte relay process
            // in front of the same server (the floor of any stdio proxy).
            let (relay_took, relay_rate) = measure(Side::Relayed)?;
            relay.push(mcp::quantile_us(&relay_took, 0.5), relay_rate);
            let mut proxied = None;
            let mut direct = None;
            for side in [round % 2, 1 - round % 2] {
                if side == 0 {
                    proxied = Some(measure(Side::Proxied)?);
                } else {
                    direct = Some(measure(Side::Direct)?);
                }
            }
            let ((pt, pr), (dt, dr)) = (proxied.expect("ran"), direct.expect("ran"));
            let (p5, p9) = (mcp::quantile_us(&pt, 0.5), mcp::quantile_us(&pt, 0.99));
            let (d5, d9) = (mcp::quantile_us(&dt, 0.5), mcp::quantile_us(&dt, 0.99));
            p50.push(p5, d5);
            p99.push(p9, d9);
            rate.push(pr, dr);
            writeln!(
                log,
                "  round {}: through the proxy p50 {p5:.0} us, p99 {p9:.0} us, {pr:.0} calls/s; \
                 direct p50 {d5:.0} us, p99 {d9:.0} us, {dr:.0} calls/s",
                round + 1
            )?;
        }
        writeln!(
            log,
            "  (for information: a bare byte relay process in front of the same server, no parse, no \
             recording: p50 {:.0} us, {:.0} calls/s with {} in flight: the price of one more process in the path)",
            median(&relay.reel),
            median(&relay.base),
            shape.inflight
        )?;
        let baseline = "the same client and server, directly";
        rows.push(p50.row(
            "mcp-record",
            "MCP: tools/call round trip through `reel mcp record`, p50",
            baseline,
            Unit::Micros,
            Target::AtMost(1.1),
        ));
        rows.push(p99.row(
            "mcp-record",
            "MCP: the same round trip, p99",
            baseline,
            Unit::Micros,
            Target::Reported,
        ));
        rows.push(rate.row(
            "mcp-record",
            &format!(
                "MCP: tools/call/s through `reel mcp record`, {} in flight",
                shape.inflight
            ),
            baseline,
            Unit::CallsPerSec,
            Target::AtLeast(0.9),
        ));
    }
    if opts.wants("mcp-serve") {
        writeln!(
            log,
            "\n[mcp-serve] the same client calling `{}` on reel's McpHost (stdio, every call recorded, \
             the recorder's defaults: call-boundary durability) against a plain rmcp server with the \
             same tool body and no recording; per side per round: {} calls with {} in flight (calls/s), \
             and {} one after the other",
            mcp::TOOL,
            shape.concurrent,
            shape.inflight,
            shape.sequential
        )?;
        let mut rate = Pairs::default();
        let mut seq = Pairs::default();
        let mut buffered = Pairs::default();
        for round in 0..rounds {
            // For information, untimed against the others: the same host
            // with buffered durability (what the durable flush costs).
            let (bt, br) = measure(Side::ServedBuffered)?;
            let mut served = None;
            let mut plain = None;
            for side in [round % 2, 1 - round % 2] {
                if side == 0 {
                    served = Some(measure(Side::Served)?);
                } else {
                    plain = Some(measure(Side::Direct)?);
                }
            }
            let ((st, sr), (pt, pr)) = (served.expect("ran"), plain.expect("ran"));
            let (ss, ps) = (rate_of(&st), rate_of(&pt));
            rate.push(sr, pr);
            seq.push(ss, ps);
            buffered.push(br, rate_of(&bt));
            writeln!(
                log,
                "  round {}: reel {sr:.0} calls/s ({} in flight), {ss:.0} calls/s one after the other \
                 (p50 {:.0} us); plain {pr:.0} calls/s, {ps:.0} calls/s one after the other (p50 {:.0} us)",
                round + 1,
                shape.inflight,
                mcp::quantile_us(&st, 0.5),
                mcp::quantile_us(&pt, 0.5),
            )?;
        }
        writeln!(
            log,
            "  (for information: the same host with buffered durability, no flush per call: {:.0} calls/s \
             with {} in flight, {:.0} calls/s one after the other)",
            median(&buffered.reel),
            shape.inflight,
            median(&buffered.base)
        )?;
        let baseline = "the same tool body, plain rmcp server, no recording";
        rows.push(rate.row(
            "mcp-serve",
            &format!(
                "MCP: served reel tools, tools/call/s, {} in flight",
                shape.inflight
            ),
            baseline,
            Unit::CallsPerSec,
            Target::AtLeast(0.85),
        ));
        rows.push(seq.row(
            "mcp-serve",
            "MCP: served reel tools, tools/call/s one after the other",
            baseline,
            Unit::CallsPerSec,
            Target::Reported,
        ));
    }
    Ok(())
}

/// Calls per second of calls made one after the other.
fn rate_of(took: &[Duration]) -> f64 {
    took.len() as f64 / took.iter().sum::<Duration>().as_secs_f64()
}

/// The summary table, as Markdown: row | reel | baseline | ratio | target | holds.
pub fn summary_table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str("| row | reel | baseline | ratio | target | holds |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for r in rows {
        let holds = match r.holds() {
            Some(true) => "yes",
            Some(false) => "no",
            None => "n/a",
        };
        let target = match r.target {
            Target::Under(x) => format!("reel < {}", r.unit.show(x)),
            t => t.to_string(),
        };
        out.push_str(&format!(
            "| {} | {} | {} ({}) | {:.2}x | {} | {} |\n",
            r.what,
            r.unit.show(r.reel),
            r.unit.show(r.baseline),
            r.baseline_is,
            r.ratio,
            target,
            holds
        ));
    }
    out
}

/// A fresh temporary directory named with this prefix (see [`run`]).
type Tmp<'a> = &'a dyn Fn(&str) -> io::Result<tempfile::TempDir>;

/// The `memory` row (see [`memory`]).
fn memory_row(s: &Sizes, rounds: usize, tmp: Tmp<'_>, log: &mut dyn Write) -> io::Result<Row> {
    let n = s.memory_reports;
    let progress_bound = RecorderConfig::default().progress_bound;
    writeln!(
        log,
        "\n[memory] a tool filing {n} progress reports without an await, each side in a child process \
         (peak RSS = VmHWM, read when the recording has shut down); baseline: the same recorder and call \
         filing no report; progress_bound {progress_bound}"
    )?;
    let mb = |b: u64| b as f64 / 1e6;
    let bare = memory::measure(memory::Mode::Bare, n, tmp("reel-bench-memory-")?.path())?;
    writeln!(
        log,
        "  (for information: the same loop with no recorder peaks at {:.1} MB)",
        mb(bare.hwm)
    )?;
    let mut pairs = Pairs::default();
    let mut stored = 0;
    for round in 0..rounds {
        let (mut storm, mut idle) = (None, None);
        for side in [round % 2, 1 - round % 2] {
            let dir = tmp("reel-bench-memory-")?;
            if side == 0 {
                storm = Some(memory::measure(memory::Mode::Storm, n, dir.path())?);
            } else {
                idle = Some(memory::measure(memory::Mode::Idle, 0, dir.path())?);
            }
        }
        let (st, id) = (storm.expect("ran"), idle.expect("ran"));
        if st.kept + st.dropped != n {
            return Err(io::Error::other(format!(
                "the record counts {} kept + {} dropped reports of {n}",
                st.kept, st.dropped
            )));
        }
        stored = stored.max(st.stored);
        let bound = memory::bound(id.hwm, progress_bound, st.stored);
        writeln!(
            log,
            "  round {}: storm peak {:.1} MB ({} reports kept, {} dropped, {:.1} MB stored); idle peak {:.1} MB; \
             bound {:.1} MB ({})",
            round + 1,
            mb(st.hwm),
            st.kept,
            st.dropped,
            mb(st.stored),
            mb(id.hwm),
            mb(bound),
            if st.hwm < bound { "holds" } else { "over" }
        )?;
        pairs.push(mb(st.hwm), mb(id.hwm));
    }
    let idle = median(&pairs.base);
    let bound = mb(memory::bound((idle * 1e6) as u64, progress_bound, stored));
    writeln!(
        log,
        "  bound = idle peak {idle:.1} MB + progress_bound {progress_bound} x {} B (a queued report) \
         + the writer's drain {:.1} MB + {}/{} x the bytes stored (sled keeps what it wrote resident; at most {:.1} MB here) = {bound:.1} MB",
        memory::QUEUE_BYTES_PER_REPORT,
        mb(memory::DRAIN_BYTES),
        memory::STORED_RESIDENT.0,
        memory::STORED_RESIDENT.1,
        mb(stored),
    )?;
    Ok(pairs.row(
        "memory",
        &format!("memory: peak RSS of a tool filing {n} progress reports without an await"),
        "the same call filing none",
        Unit::Megabytes,
        Target::Under(bound),
    ))
}

/// The `viewer` rows (see [`viewer`]).
fn viewer_rows(
    s: &Sizes,
    rounds: usize,
    tmp: Tmp<'_>,
    log: &mut dyn Write,
) -> io::Result<Vec<Row>> {
    let bin = viewer::reel_binary()?;
    let config = tmp("reel-bench-viewer-config-")?;
    let big_dir = tmp("reel-bench-show-big-")?;
    let small_dir = tmp("reel-bench-show-small-")?;
    let t = std::time::Instant::now();
    let facts = viewer::build_run(big_dir.path(), "big", s.show_facts)?;
    let small = viewer::build_run(small_dir.path(), "small", viewer::FACTS_PER_CALL)?;
    let (stored, _) = record::disk_usage(big_dir.path())?;
    writeln!(
        log,
        "\n[viewer] the real reel binary ({}, {}); `reel show` of a {facts}-fact run ({:.1} MB on disk; built in {:.1} s, untimed) \
         until its first line reaches the pipe, vs the same of a {small}-fact run in an archive of its own; \
         per round each side's fastest of {} spawns (alternating), then medians over rounds",
        bin.path.display(),
        bin.how,
        stored as f64 / 1e6,
        t.elapsed().as_secs_f64(),
        viewer::SPAWNS
    )?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut show = Pairs::default();
    let mut first = String::new();
    for round in 0..rounds {
        // Each side's fastest of SPAWNS within the round: a process start
        // on this shared machine waits for a core now and then.
        let (mut b, mut sm, mut start) = (Duration::MAX, Duration::MAX, Duration::MAX);
        for spawn in 0..viewer::SPAWNS {
            for side in [(round + spawn) % 2, 1 - (round + spawn) % 2] {
                if side == 0 {
                    let (t, line) =
                        viewer::show_first_line(&bin.path, big_dir.path(), config.path(), "big")?;
                    (b, first) = (b.min(t), line);
                } else {
                    let (t, _) = viewer::show_first_line(
                        &bin.path,
                        small_dir.path(),
                        config.path(),
                        "small",
                    )?;
                    sm = sm.min(t);
                }
            }
            start = start.min(viewer::version(&bin.path, config.path())?);
        }
        writeln!(
            log,
            "  round {}: first line after {:.1} ms ({facts} facts), {:.1} ms ({small} facts); `reel --version` {:.1} ms",
            round + 1,
            ms(b),
            ms(sm),
            ms(start)
        )?;
        show.push(ms(b), ms(sm));
    }
    writeln!(log, "  the first line: {first}")?;
    let (whole, lines) = viewer::show_whole(&bin.path, big_dir.path(), config.path(), "big")?;
    writeln!(
        log,
        "  (for information: the whole run, {lines} lines, in {:.2} s)",
        whole.as_secs_f64()
    )?;
    drop(big_dir);

    let n = s.runs_count;
    let few_dir = tmp("reel-bench-runs-few-")?;
    let many_dir = tmp("reel-bench-runs-many-")?;
    let t = std::time::Instant::now();
    drop(list::build(few_dir.path(), n)?);
    drop(list::build_with(many_dir.path(), n, s.runs_progress)?);
    let (few_b, _) = record::disk_usage(few_dir.path())?;
    let (many_b, _) = record::disk_usage(many_dir.path())?;
    let many_facts = 4 + s.runs_progress;
    writeln!(
        log,
        "\n[viewer] `reel runs` (first page of 50) until it exits: {n} runs of {many_facts} facts ({:.1} MB on disk) \
         vs {n} runs of 4 facts ({:.1} MB); built in {:.1} s (untimed)",
        many_b as f64 / 1e6,
        few_b as f64 / 1e6,
        t.elapsed().as_secs_f64()
    )?;
    let mut runs = Pairs::default();
    for round in 0..rounds {
        let (mut m, mut f) = (Duration::MAX, Duration::MAX);
        let (mut ml, mut fl) = (0, 0);
        for spawn in 0..viewer::SPAWNS {
            for side in [(round + spawn) % 2, 1 - (round + spawn) % 2] {
                if side == 0 {
                    let (t, lines) = viewer::runs(&bin.path, many_dir.path(), config.path())?;
                    (m, ml) = (m.min(t), lines);
                } else {
                    let (t, lines) = viewer::runs(&bin.path, few_dir.path(), config.path())?;
                    (f, fl) = (f.min(t), lines);
                }
            }
        }
        writeln!(
            log,
            "  round {}: {many_facts} facts per run {:.1} ms ({ml} lines), 4 facts per run {:.1} ms ({fl} lines)",
            round + 1,
            ms(m),
            ms(f)
        )?;
        runs.push(ms(m), ms(f));
    }
    Ok(vec![
        show.row(
            "viewer",
            &format!("viewer: `reel show` time to first line, {facts}-fact run"),
            &format!("the same, {small}-fact run"),
            Unit::Millis,
            Target::Under(50.0),
        ),
        runs.row(
            "viewer",
            &format!("viewer: `reel runs` on {n} runs of {many_facts} facts, until exit"),
            &format!("{n} runs of 4 facts"),
            Unit::Millis,
            Target::Within(1.25),
        ),
    ])
}

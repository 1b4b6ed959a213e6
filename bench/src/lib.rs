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
//! | `timeline` | `TimelineBuilder` over `Archive::facts` read as views (`Facts::views`, as `reel runs` reads) for every run of the last recording (archive reopened, untimed) | the plain file read whole, `decode_fact`, the same `TimelineBuilder` (decode alone is printed too) |
//! | `bytes` | the archive directory after `shutdown`, allocated blocks (`du`), per fact (sled's `size_on_disk` printed too) | the plain file, allocated blocks |
//! | `progress` | one `ctx.progress(payload)` inside a recorded call, payloads built beforehand | `tokio::sync::mpsc` unbounded `send` of the same payloads, a thread draining them |
//! | `list` | `list_runs` (tenant + status, limit 50) over 100,000 runs | the same over 1,000 runs |
//! | `open` | `Archive::open` read-only (as `reel runs` opens it) of 100,000 runs of 10 facts (1,000,000) after a clean close (built untimed); target under 100 ms | the same open of 1,000 such runs |
//! | `open-after-crash` | a writer's `Archive::open` of the open row's 100,000 runs (1,000,000 facts) after a crash with all of them in the journal, none checkpointed (a child process fills it, flushes and is killed with SIGKILL): the time to apply the journal, and facts/s applied | the same open of the same archive after a clean close |
//! | `runs-after-crash` | `reel runs`' work (read-only open, first 50 runs) on the open row's 100,000 runs unsealed (copied while the writer held it: no seal, a journal) | the same after a clean close; target within 2x |
//! | `replay` | facts matched per second by `reel_replayer::replay` over the tape's index, and end to end (`Tape::read` + `ReplayInput::from_tape` + `replay`) | `Tape::read` of the same tape, and freeing it (`replay` frees what it was given in its time) |
//! | `memory` | peak RSS (VmHWM, a child process) of a tool filing 5,000,000 progress reports without an await; target: under the bound [`memory`] derives from `progress_bound` | the same recorder and call filing none |
//! | `viewer` | the real `reel` binary: `reel show` of a 1,000,000-fact run until its first line reaches the pipe (target: under 50 ms); `reel runs` on 100,000 runs of 40 facts, until it exits | `reel show` of a 100-fact run; `reel runs` on 100,000 runs of 4 facts |
//! | `console` | the real `reel serve`: the runs table's first page (`GET /`) on 100,000 runs, a fresh server's first answer; the first screen of a 1,000,000-fact run (`GET /runs/big`), a fresh server's first look; peak RSS under 50 concurrent clients | `reel runs --json` on the same archive; `reel show` of the run until its first line; the same requests from one client |
//! | `nats` (with `--nats URLS`) | the `record` workload into a JetStream cluster through `reel_nats::NatsStore`, call-boundary durability (each block's ack from the R3 stream), facts/s until `shutdown` returns | the very blocks reel published, read back untimed, published raw with `async-nats` to an R3 stream with the same headers (message id, expected last subject sequence), each ack awaited before the run's next block, runs concurrent |
//! | `mcp-record` | an rmcp client's `tools/call` round trips (p50, p99 of calls one after the other; calls/s with 8 in flight) to a plain rmcp server process through `reel mcp record` (the `reel` binary, or [`mcp::proxy_main`] in a `reel-bench` process) | the same client and server directly; a bare byte relay process is printed beside (the floor of any stdio proxy) |
//! | `mcp-http` | p50, p99 and calls/s of `tools/call`s one after the other over one kept-alive HTTP/1.1 connection through `reel mcp record --listen` (the `reel` binary) to a plain rmcp server over streamable HTTP ([`mcp_http`]) | the same client, connection and server, directly |
//! | `mcp-serve` | `tools/call`/s (8 in flight; one after the other) of `McpHost` serving the echo tool on stdio, every call recorded (the recorder's defaults) | a plain rmcp server with the same tool body, no recording; the same host with buffered durability against the same plain server is a row of its own |
//!
//! ```no_run
//! let rows = reel_bench::run(&reel_bench::Options::new(reel_bench::Sizes::smoke()), &mut std::io::stderr()).unwrap();
//! println!("{}", reel_bench::summary_table(&rows));
//! ```
#![warn(missing_docs)]

pub mod agent;
pub mod collect;
pub mod console;
pub mod list;
pub mod mcp;
pub mod mcp_http;
pub mod memory;
pub mod nats;
pub mod progress;
pub mod record;
pub mod replay;
pub mod viewer;
pub mod workload;

mod rows;

use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use reel_recorder::RecorderConfig;
use rows::Bench;
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
    "open",
    "open-after-crash",
    "runs-after-crash",
    "overview",
    "replay",
    "nats",
    "memory",
    "viewer",
    "console",
    "mcp-record",
    "mcp-serve",
    "mcp-http",
    "collect",
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
    /// The collect workload (OTLP spans taken in).
    pub collect: collect::CollectShape,
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
    /// Runs in the console rows' archive of many runs.
    pub console_runs: usize,
    /// Clients at once in the console's memory row.
    pub console_clients: usize,
    /// Requests each of those clients makes.
    pub console_requests: usize,
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
            collect: collect::CollectShape {
                traces: 400,
                calls: 25,
            },
            latency_calls: 200,
            memory_reports: 5_000_000,
            show_facts: 1_000_000,
            runs_count: 100_000,
            runs_progress: 36,
            console_runs: 100_000,
            console_clients: 50,
            console_requests: 20,
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
            collect: collect::CollectShape {
                traces: 3,
                calls: 4,
            },
            latency_calls: 5,
            memory_reports: 20_000,
            show_facts: 2_000,
            runs_count: 200,
            runs_progress: 36,
            console_runs: 200,
            console_clients: 4,
            console_requests: 4,
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
    /// Spans per second.
    SpansPerSec,
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
            Unit::SpansPerSec if value >= 1e6 => format!("{:.2}M spans/s", value / 1e6),
            Unit::SpansPerSec => format!("{:.1}k spans/s", value / 1e3),
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

    for entry in rows::TABLE {
        if entry.rows.iter().any(|r| opts.wants(r)) {
            (entry.measure)(Bench {
                opts,
                s,
                rounds,
                rt: &rt,
                tmp: &tmp,
                log: &mut *log,
                rows: &mut rows,
            })?;
        }
    }
    Ok(rows)
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

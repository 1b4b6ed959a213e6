//! The cost of one `ctx.progress(payload)` on the tool's own thread, against
//! a `tokio::sync::mpsc` send of the same payload.

use std::hint::black_box;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reel::fact::RunStatus;
use reel::lock::lock;
use reel_recorder::{Recorder, RunStart};
use serde_json::Value;

use crate::record::recorder_config;
use crate::workload;

/// Per-call costs in nanoseconds, the timer's own cost subtracted.
///
/// The clock here ticks in steps of about 10 ns, as coarse as the cheapest
/// call measured, so the two figures come from interleaved groups of
/// [`GROUP`] calls: every other group is timed as a whole (its mean per call
/// goes to `means`, which gives the median), the others call by call (to
/// `singles`, which gives the tail: p99).
#[derive(Debug, Clone)]
pub struct Costs {
    /// Mean per call of each group timed whole, sorted.
    pub means: Vec<f64>,
    /// Each call timed alone, sorted.
    pub singles: Vec<f64>,
}

/// Calls per timed group.
pub const GROUP: usize = 16;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

impl Costs {
    /// The median cost of one call.
    pub fn median(&self) -> f64 {
        percentile(&self.means, 50.0)
    }

    /// The 99th percentile of one call's cost.
    pub fn p99(&self) -> f64 {
        percentile(&self.singles, 99.0)
    }
}

/// Files `payloads` through `file`, timing as [`Costs`] says, and yielding
/// to the runtime (untimed) every [`workload::YIELD_EVERY`] calls, as a
/// tool awaiting something would.
async fn drive(payloads: Vec<Value>, clock: Clock, mut file: impl FnMut(Value)) -> Costs {
    let mut groups: Vec<Vec<Value>> = Vec::with_capacity(payloads.len() / GROUP + 1);
    let mut it = payloads.into_iter().peekable();
    while it.peek().is_some() {
        groups.push(it.by_ref().take(GROUP).collect());
    }
    let mut means = Vec::with_capacity(groups.len() / 2 + 1);
    let mut singles = Vec::with_capacity(groups.len() / 2 * GROUP + GROUP);
    // Nothing timed costs less than the clock resolves: one tick for a call
    // timed alone, one tick per group for a group (a zero would make a
    // ratio infinite).
    let to_ns = |t: f64, floor: f64| t.max(floor) * clock.ns_per_tick;
    for (g, group) in groups.into_iter().enumerate() {
        let n = group.len() as f64;
        if g % 2 == 0 {
            let t = ticks();
            for p in group {
                file(p);
            }
            let spent = (ticks() - t) as f64 - clock.overhead_ticks;
            means.push(to_ns(spent / n, 1.0 / n));
        } else {
            for p in group {
                let t = ticks();
                file(p);
                singles.push(to_ns((ticks() - t) as f64 - clock.overhead_ticks, 1.0));
            }
        }
        if (g + 1) % (workload::YIELD_EVERY / GROUP).max(1) == 0 {
            tokio::task::yield_now().await;
        }
    }
    means.sort_by(f64::total_cmp);
    singles.sort_by(f64::total_cmp);
    Costs { means, singles }
}

/// A clock fine enough to time one call of tens of nanoseconds: the CPU's
/// time-stamp counter on x86_64 (this machine's clock source is the TSC,
/// constant and non-stop), `Instant` elsewhere. Ticks convert to nanoseconds
/// with [`Clock::ns_per_tick`], calibrated against `Instant`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Nanoseconds per tick.
    pub ns_per_tick: f64,
    /// Mean ticks of an empty timed section, subtracted from every sample.
    pub overhead_ticks: f64,
}

/// The current tick.
#[inline(always)]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions on x86_64.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

impl Clock {
    /// Calibrates the clock (about 50 ms).
    pub fn calibrate() -> Clock {
        let (t0, i0) = (ticks(), Instant::now());
        while i0.elapsed().as_millis() < 50 {
            std::hint::spin_loop();
        }
        let (t1, elapsed) = (ticks(), i0.elapsed());
        let ns_per_tick = elapsed.as_nanos() as f64 / (t1 - t0).max(1) as f64;
        // The mean, not the median: the counter moves in steps coarser
        // than the timer's cost, and only the mean of quantised samples is
        // unbiased.
        let n = 100_000u64;
        let empty: u64 = (0..n)
            .map(|_| {
                let t = ticks();
                black_box(());
                ticks() - t
            })
            .sum();
        Clock {
            ns_per_tick,
            overhead_ticks: empty as f64 / n as f64,
        }
    }

    /// The timer's own cost in nanoseconds.
    pub fn overhead_ns(&self) -> f64 {
        self.overhead_ticks * self.ns_per_tick
    }
}

/// What the one clock read of a fact's envelope on the tool's thread costs
/// (a tick of the recorder's `quanta` clock; the writer turns it into `at`
/// and `offset`), next to what the two reads it replaced cost
/// (`SystemTime::now` for `at`, `Instant::elapsed` for `offset`), timed
/// like the calls: the floor under `progress()` that a bare channel send
/// does not pay. Medians over groups, in nanoseconds: (tick, two reads).
pub fn envelope_clocks(clock: Clock, n: usize) -> (f64, f64) {
    let median = |read: &dyn Fn()| {
        let mut means: Vec<f64> = (0..n / GROUP)
            .map(|_| {
                let t = ticks();
                for _ in 0..GROUP {
                    read();
                }
                let spent = (ticks() - t) as f64 - clock.overhead_ticks;
                (spent / GROUP as f64 * clock.ns_per_tick).max(0.0)
            })
            .collect();
        means.sort_by(f64::total_cmp);
        percentile(&means, 50.0)
    };
    let fact_clock = quanta::Clock::new();
    let started = Instant::now();
    (
        median(&|| {
            black_box(fact_clock.raw());
        }),
        median(&|| {
            black_box(workload::unix_nanos());
            black_box(started.elapsed());
        }),
    )
}

fn payloads(n: usize) -> Vec<Value> {
    (0..n).map(|i| workload::payload(i, n)).collect()
}

/// `n` progress reports from inside one recorded call (call-boundary
/// durability), each timed alone; the payloads are built beforehand. The
/// tool yields every [`workload::YIELD_EVERY`] reports (untimed), as a tool
/// awaiting something would. The writer thread drains the queue meanwhile.
pub async fn reel(dir: &Path, n: usize, clock: Clock) -> io::Result<Costs> {
    // The row prices a report that is queued: the burst (`n` reports,
    // yielding but never awaiting room) stays under the progress bound.
    // Over it a report is dropped instead, and the tool's thread frees its
    // payload (the storm case of `recorder/tests/it/progress_storm.rs`).
    let config = reel_recorder::RecorderConfig {
        progress_bound: n + 1,
        ..recorder_config()
    };
    let recorder = Recorder::open(dir, config)
        .await
        .map_err(io::Error::other)?;
    let run = recorder
        .start_run(RunStart::new("progress"))
        .await
        .map_err(io::Error::other)?;
    let costs = Arc::new(Mutex::new(None));
    let out = costs.clone();
    let payloads = payloads(n);
    // On a runtime worker, like the mpsc side (the future handed to
    // `block_on` runs on the main thread instead).
    let call = run.call("probe", ());
    tokio::spawn(async move {
        call.invoke(move |ctx, (): ()| async move {
            let costs = drive(payloads, clock, |p| ctx.progress(p)).await;
            *lock(&out) = Some(costs);
            Ok(())
        })
        .await
    })
    .await
    .map_err(io::Error::other)?
    .map_err(io::Error::other)?;
    run.end(RunStatus::Completed)
        .await
        .map_err(io::Error::other)?;
    recorder.shutdown().await.map_err(io::Error::other)?;
    let costs = lock(&costs).take();
    costs.ok_or_else(|| io::Error::other("the probe tool did not run"))
}

/// `n` sends of the same payloads on a `tokio::sync::mpsc` unbounded channel
/// (like `progress`, a send that never waits), from a task on the same
/// runtime; a thread receives them in batches and drops them meanwhile.
pub async fn mpsc(n: usize, clock: Clock) -> io::Result<Costs> {
    mpsc_with(n, clock, None).await
}

/// [`mpsc`] with a receiver that works as reel's writer does: after each
/// batch it stays busy for `per_message` per message received (spinning on
/// its core, as the writer encoding and storing does) before the next, so
/// the channel holds a backlog, as reel's does. Printed beside the row, for
/// information: it shows what a send costs when the channel has to grow
/// (tokio allocates a block of 32 slots on the sending thread whenever its
/// receiver has not handed one back) and the other core is busy.
pub async fn mpsc_lagging(n: usize, clock: Clock, per_message: Duration) -> io::Result<Costs> {
    mpsc_with(n, clock, Some(per_message)).await
}

async fn mpsc_with(n: usize, clock: Clock, lag: Option<Duration>) -> io::Result<Costs> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    // The receiving thread drains in batches, as reel's writer does.
    let consumer = std::thread::spawn(move || {
        let mut got = 0usize;
        let mut batch = Vec::with_capacity(8192);
        while rx.blocking_recv_many(&mut batch, 8192) > 0 {
            got += batch.len();
            if let Some(per) = lag {
                let busy = Instant::now();
                let until = per * batch.len() as u32;
                while busy.elapsed() < until {
                    std::hint::spin_loop();
                }
            }
            batch.clear();
        }
        got
    });
    let payloads = payloads(n);
    let costs = tokio::spawn(async move {
        drive(payloads, clock, |p| {
            let _ = tx.send(p);
        })
        .await
    })
    .await
    .map_err(io::Error::other)?;
    let got = tokio::task::spawn_blocking(move || consumer.join())
        .await
        .map_err(io::Error::other)?
        .map_err(|_| io::Error::other("the mpsc consumer panicked"))?;
    if got != n {
        return Err(io::Error::other(format!("mpsc consumer got {got} of {n}")));
    }
    Ok(costs)
}

//! Durability: with call-boundary durability, a host process killed with
//! SIGKILL keeps every call whose result had been handed back to it.
//!
//! A `harness = false` test; the same binary is both sides:
//!
//! - the PARENT (default) keeps one archive directory across rounds. Each
//!   round it starts itself as a child, waits until the child says `ready`,
//!   lets it record for a random moment, kills it with SIGKILL, reads the
//!   rest of the child's output, reopens the archive and checks it.
//! - the CHILD (`REEL_DURABILITY_CHILD=<dir>`) opens a recorder with
//!   [`Durability::CallBoundary`] on a multi-thread runtime and records runs
//!   from three concurrent tasks (and, from a fourth, calls outside any
//!   run, said as `served <key> <call_id>` once handed back: a light
//!   stream, appended whole at its end), each run three sequential calls of a tool
//!   that files exactly `expected_progress(run, call)` progress facts. After
//!   each `invoke(..)` returns it prints `returned <run_id> <call_id>`, after
//!   each `end(..)` returns `ended <run_id>` (stdout flushed each time).
//!
//! The parent checks: the archive opens and verifies; every call whose
//! `returned` line it saw has its call.started, exactly its progress facts
//! (counts 1..K, payloads as filed) and its call.ended, contiguous and in
//! order; every run whose `ended` line it saw is completed; every run of the
//! round without a `run.ended` reads as incomplete; runs of earlier rounds
//! are exactly as they were.
//!
//! Knobs: `REEL_DURABILITY_ROUNDS` (default 8), `REEL_DURABILITY_SEED`
//! (printed at start, to repeat a failure).
//! Run: `cargo test -p reel-recorder --test durability`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use reel::context::{ToolContext, ToolError};
use reel::fact::{CallOutcome, Fact, FactKind, RunStatus};
use reel::RunState;
use reel_archive::{Archive, ArchiveConfig};
use reel_recorder::{Durability, Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

const CHILD_ENV: &str = "REEL_DURABILITY_CHILD";
const ROUND_ENV: &str = "REEL_DURABILITY_ROUND";
/// Concurrent recording tasks in the child.
const TASKS: usize = 3;
/// Calls per run.
const CALLS: usize = 3;
/// The child stops by itself after this long, should the parent never kill it.
const CHILD_MAX: Duration = Duration::from_secs(30);
/// The whole test stays under this (rounds stop early past it).
const BUDGET: Duration = Duration::from_secs(30);

fn main() {
    match std::env::var_os(CHILD_ENV) {
        Some(dir) => child(Path::new(&dir)),
        None => parent(),
    }
}

/// FNV-1a, for a pure function of the ids.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// How many progress facts the tool files in this call.
fn expected_progress(run_id: &str, call_id: &str) -> u64 {
    1 + fnv(&format!("{run_id}/{call_id}")) % 24
}

fn payload(run_id: &str, call_id: &str, i: u64) -> Value {
    json!({ "run": run_id, "call": call_id, "i": i, "message": format!("step {i}") })
}

// ---------------------------------------------------------------------------
// Child
// ---------------------------------------------------------------------------

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe means the parent is gone: stop.
    if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
        std::process::exit(0);
    }
}

async fn stepper(ctx: ToolContext, _args: Value) -> Result<Value, ToolError> {
    let (run, call) = (
        ctx.run_id().unwrap_or_default().to_owned(),
        ctx.call_id().to_owned(),
    );
    let k = expected_progress(&run, &call);
    for i in 0..k {
        ctx.progress(payload(&run, &call, i));
        if i % 5 == 4 {
            tokio::task::yield_now().await;
        }
    }
    Ok(json!({ "steps": k }))
}

fn child(dir: &Path) {
    let round: u64 = std::env::var(ROUND_ENV)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let config = RecorderConfig {
            durability: Durability::CallBoundary,
            ..RecorderConfig::default()
        };
        let recorder = Recorder::open(dir, config).await.unwrap();
        say("ready");
        let started = Instant::now();
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let recorder = recorder.clone();
            tasks.push(tokio::spawn(async move {
                let mut j = 0;
                while started.elapsed() < CHILD_MAX {
                    let run = recorder
                        .start_run(RunStart::new(format!("r{round}-t{t}-{j}")))
                        .await
                        .unwrap();
                    for _ in 0..CALLS {
                        let call = run.call("stepper", json!({}));
                        let call_id = call.id().to_owned();
                        call.invoke(stepper).await.unwrap();
                        say(&format!("returned {} {call_id}", run.id()));
                    }
                    run.end(RunStatus::Completed).await.unwrap();
                    say(&format!("ended {}", run.id()));
                    j += 1;
                }
            }));
        }
        // Calls outside any run (served calls: light streams, appended
        // whole at their end), beside the runs.
        let served = recorder.clone();
        tasks.push(tokio::spawn(async move {
            while started.elapsed() < CHILD_MAX {
                let call = served.call("stepper", json!({}));
                let (key, call_id) = (call.key().to_owned(), call.id().to_owned());
                call.invoke(stepper).await.unwrap();
                say(&format!("served {key} {call_id}"));
            }
        }));
        for t in tasks {
            t.await.unwrap();
        }
    });
}

// ---------------------------------------------------------------------------
// Parent
// ---------------------------------------------------------------------------

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// What a round's child said before it died.
#[derive(Default)]
struct Said {
    /// The stream (a run id, or a call outside any run's key), the call,
    /// and the run id the tool saw (none outside a run).
    returned: Vec<(String, String, String)>,
    ended: BTreeSet<String>,
}

fn fail(msg: String) -> ! {
    eprintln!("durability: FAILED: {msg}");
    println!("durability: 0 passed, 1 failed");
    std::process::exit(1);
}

fn run_child(dir: &Path, round: u64, delay: Duration) -> Said {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, dir)
        .env(ROUND_ENV, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| fail(format!("cannot start the child: {e}")));
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    // Wait for `ready`, then let it record for `delay`.
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(line) if line == "ready" => {}
        other => {
            let _ = child.kill();
            fail(format!(
                "round {round}: the child did not get ready: {other:?}"
            ));
        }
    }
    std::thread::sleep(delay);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    // Everything the child printed before it died is still in the pipe.
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    {
        use std::os::unix::process::ExitStatusExt;
        if status.signal() != Some(9) {
            fail(format!(
                "round {round}: the child ended by itself ({status}) instead of being killed"
            ));
        }
    }
    let mut said = Said::default();
    for line in lines {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["returned", run, call] => {
                said.returned
                    .push((run.to_string(), call.to_string(), run.to_string()))
            }
            ["served", key, call] => {
                said.returned
                    .push((key.to_string(), call.to_string(), String::new()))
            }
            ["ended", run] => {
                said.ended.insert(run.to_string());
            }
            _ => fail(format!("round {round}: the child said {line:?}")),
        }
    }
    said
}

/// What a round checked.
struct Checked {
    calls: usize,
    interrupted: usize,
    /// Every run in the archive, with its facts.
    runs: BTreeMap<String, Vec<Fact>>,
}

/// Checks one round.
fn check_round(
    archive: &Archive,
    round: u64,
    said: &Said,
    before: &BTreeMap<String, Vec<Fact>>,
) -> Checked {
    let report = archive
        .verify()
        .unwrap_or_else(|e| fail(format!("round {round}: verify failed: {e}")));
    if !report.is_ok() {
        fail(format!("round {round}: verify found {:?}", report.problems));
    }
    let mut runs: BTreeMap<String, Vec<Fact>> = BTreeMap::new();
    for id in archive.run_ids() {
        let id = id.unwrap_or_else(|e| fail(format!("round {round}: listing runs: {e}")));
        let facts: Vec<Fact> = archive
            .facts(&id, ..)
            .and_then(|f| f.collect::<Result<_, _>>())
            .unwrap_or_else(|e| fail(format!("round {round}: reading {id}: {e}")));
        for (i, f) in facts.iter().enumerate() {
            if f.seq != i as u64 {
                fail(format!("round {round}: run {id} has seq {} at {i}", f.seq));
            }
        }
        runs.insert(id, facts);
    }
    // Earlier rounds stay exactly as they were.
    for (id, facts) in before {
        if runs.get(id) != Some(facts) {
            fail(format!(
                "round {round}: run {id} of an earlier round changed"
            ));
        }
    }
    // Every call handed back is there, whole.
    for (run_id, call_id, seen) in &said.returned {
        let Some(facts) = runs.get(run_id) else {
            fail(format!(
                "round {round}: run {run_id} is missing, but its call {call_id} had returned"
            ));
        };
        let k = expected_progress(seen, call_id);
        let Some(start) = facts.iter().position(|f| {
            f.call.as_deref() == Some(call_id.as_str()) && f.kind.name() == "call.started"
        }) else {
            fail(format!(
                "round {round}: {run_id}/{call_id} returned but its call.started is lost"
            ));
        };
        let want_len = start + k as usize + 2;
        if facts.len() < want_len {
            fail(format!(
                "round {round}: {run_id}/{call_id} returned but only {} of its facts are there",
                facts.len() - start
            ));
        }
        for i in 0..k {
            let f = &facts[start + 1 + i as usize];
            let ok = f.call.as_deref() == Some(call_id.as_str())
                && matches!(&f.kind, FactKind::Progress(p)
                    if p.count == i + 1 && p.payload == payload(seen, call_id, i));
            if !ok {
                fail(format!(
                    "round {round}: {run_id}/{call_id} progress {i} is wrong: {f:?}"
                ));
            }
        }
        let end = &facts[start + 1 + k as usize];
        let ok = end.call.as_deref() == Some(call_id.as_str())
            && matches!(&end.kind, FactKind::CallEnded(e)
                if e.outcome == CallOutcome::Ok { result: json!({ "steps": k }) });
        if !ok {
            fail(format!(
                "round {round}: {run_id}/{call_id} returned but its call.ended is not there: {end:?}"
            ));
        }
    }
    // Runs ended are completed; runs of this round cut short are incomplete.
    let mut interrupted = 0;
    let prefix = format!("r{round}-");
    for (id, facts) in runs.iter().filter(|(id, _)| id.starts_with(&prefix)) {
        let state = archive.run(id).unwrap().state;
        let has_end = facts.iter().any(|f| f.kind.name() == "run.ended");
        let want = if has_end {
            RunState::Completed
        } else {
            interrupted += 1;
            RunState::Incomplete
        };
        if state != want {
            fail(format!(
                "round {round}: run {id} reads as {state}, expected {want}"
            ));
        }
    }
    for id in &said.ended {
        if archive.run(id).map(|r| r.state).ok() != Some(RunState::Completed) {
            fail(format!(
                "round {round}: run {id} had ended but does not read as completed"
            ));
        }
    }
    Checked {
        calls: said.returned.len(),
        interrupted,
        runs,
    }
}

fn parent() {
    let seed: u64 = std::env::var("REEL_DURABILITY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let rounds: u64 = std::env::var("REEL_DURABILITY_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    println!("durability: seed {seed} (REEL_DURABILITY_SEED={seed} repeats it), {rounds} rounds");
    let mut rng = Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1);
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut before: BTreeMap<String, Vec<Fact>> = BTreeMap::new();
    let (mut passed, mut calls, mut interrupted) = (0, 0, 0);
    for round in 0..rounds {
        if started.elapsed() > BUDGET {
            println!("durability: time budget reached after {round} rounds");
            break;
        }
        let delay = Duration::from_millis(rng.range(5, 600));
        let said = run_child(dir.path(), round, delay);
        let archive = Archive::open(dir.path(), ArchiveConfig::default())
            .unwrap_or_else(|e| fail(format!("round {round}: the archive does not open: {e}")));
        let checking = Instant::now();
        let checked = check_round(&archive, round, &said, &before);
        println!(
            "durability: round {round}: killed after {delay:?}; {} returned calls kept \
             ({} of them outside any run), {} ended runs completed, {} interrupted runs \
             incomplete (checked in {:?})",
            checked.calls,
            said.returned
                .iter()
                .filter(|(.., seen)| seen.is_empty())
                .count(),
            said.ended.len(),
            checked.interrupted,
            checking.elapsed()
        );
        calls += checked.calls;
        interrupted += checked.interrupted;
        before = checked.runs;
        drop(archive);
        passed += 1;
    }
    if calls == 0 {
        fail("no call returned before a kill in any round: nothing was checked".into());
    }
    if interrupted == 0 {
        fail("no run was interrupted in any round: recovery was never checked".into());
    }
    println!(
        "durability: {calls} returned calls and {interrupted} interrupted runs checked in {:?}",
        started.elapsed()
    );
    println!("durability: {passed} passed, 0 failed");
}

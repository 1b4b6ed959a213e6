//! Crash recovery: kill -9 a process that is writing to the archive, reopen
//! the archive, and check what DESIGN.md promises ("The archive",
//! durability): every fact acknowledged durable is there and intact, nothing
//! is torn, seqs are gapless, the archive opens and verifies, and the run that
//! was interrupted reads as incomplete.
//!
//! A `harness = false` test in the style of sled's
//! `tests/test_crash_recovery.rs`. The same binary is both sides:
//!
//! - the PARENT (default) keeps ONE archive directory across rounds. Each
//!   round it spawns itself as a child, lets it write for a random time, kills
//!   it with SIGKILL, then opens the archive and checks every run in it (runs
//!   of earlier rounds included: they must stay exactly as they were).
//! - the CHILD (`REEL_CRASH_CHILD=<dir>`) opens the archive and appends runs
//!   in batches of random size. After some batches it flushes and prints
//!   `durable <run_id> <next_seq>`: every fact of that run with a smaller seq
//!   is acknowledged durable. Before some flushes it also puts an artifact
//!   (bytes a pure function of a number, up to 300 KiB: a file of its own)
//!   and after the flush prints `artifact <number>`: its bytes must read
//!   back whole in every later round.
//!
//! Every fact is a pure function of (run id, seq) (see [`expected_fact`]), so
//! the parent checks each stored fact exactly, and a run's length (and so
//! where its `run.ended` falls) is a pure function of its id.
//!
//! The write-ahead journal (see `reel_archive::journal`) is what
//! acknowledges: the child's flushes sync it, and sled is made durable by
//! checkpoints. So the rounds also kill the child:
//!
//! - during a checkpoint: the child checkpoints now and then itself
//!   (`checkpointing` is its last line when the kill lands in one), and
//!   some rounds give it a small journal (16 KiB segments, a 64 KiB bound
//!   on unapplied bytes) so that rotations, bound waits and the
//!   checkpointer's own checkpoints happen all the time;
//! - during recovery: before some rounds the parent checks the archive
//!   only through read-only opens (which leave the journal unapplied), and
//!   kills the next child within a few milliseconds of its start, while
//!   its open applies the journal (no `opened` line).
//!
//! And some rounds simulate a power cut after the kill (SIGKILL keeps the
//! page cache): the journal is cut back to the last position known synced
//! (the control record's acknowledged position, the frames' own synced
//! positions, the checkpoint), and nothing acknowledged may be lost; on a
//! copy, it is cut one byte below the acknowledged position, and every
//! open must name the damage.
//!
//! Knobs: `REEL_CRASH_ROUNDS` (default 12, or 6 when `CI` is set),
//! `REEL_CRASH_SEED` (printed at start, to repeat a failure).
//! Run: `cargo test --test crash`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use reel::fact::{
    CallEnded, CallMode, CallOutcome, CallStarted, Fact, FactKind, Identity, Level, Log, NewFact,
    Producer, Progress, RunEnded, RunStarted, RunStatus,
};
use reel::run::RunState;
use reel_archive::{Archive, ArchiveConfig, ArchiveError, RunFilter};
use serde_json::json;
use sha2::Digest as _;

const CHILD_ENV: &str = "REEL_CRASH_CHILD";
const ROUND_ENV: &str = "REEL_CRASH_CHILD_ROUND";
const CHILD_SEED_ENV: &str = "REEL_CRASH_CHILD_SEED";
const FLUSH_ENV: &str = "REEL_CRASH_CHILD_FLUSH_MS";
const SMALL_JOURNAL_ENV: &str = "REEL_CRASH_CHILD_SMALL_JOURNAL";
/// Facts per call: call.started, progress, progress, log, progress, call.ended.
const CYCLE: u64 = 6;
/// The child stops by itself after this long, should the parent never kill it.
const CHILD_MAX: Duration = Duration::from_secs(30);

fn main() {
    match std::env::var_os(CHILD_ENV) {
        Some(dir) => child(Path::new(&dir)),
        None => parent(),
    }
}

// ---------------------------------------------------------------------------
// A tiny deterministic RNG and hash
// ---------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    /// xorshift64*.
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// FNV-1a, so that plans depend on the run id alone.
fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

// ---------------------------------------------------------------------------
// The plan: what every fact of a run is, from (run id, seq)
// ---------------------------------------------------------------------------

/// Number of facts a run has once ended: run.started, whole calls, run.ended.
fn planned_len(run_id: &str) -> u64 {
    let h = fnv(run_id);
    // Some long runs, many short ones (so runs are created, and closed, often).
    let calls = match h % 7 {
        0 => 150 + (h >> 16) % 200,
        1 | 2 => (h >> 16) % 3,
        _ => 3 + (h >> 16) % 40,
    };
    1 + calls * CYCLE + 1
}

fn planned_status(run_id: &str) -> RunStatus {
    match (fnv(run_id) >> 8) % 3 {
        0 => RunStatus::Completed,
        1 => RunStatus::Failed,
        _ => RunStatus::Cancelled,
    }
}

fn base_at(run_id: &str) -> i64 {
    1_700_000_000_000_000_000 + (fnv(run_id) % 1_000_000_000_000_000) as i64
}

/// Size of the padding of a progress payload: mostly small, sometimes large
/// enough that a block becomes one of sled's blobs.
fn pad_len(run_id: &str, seq: u64) -> usize {
    let h = fnv(run_id);
    if (seq.wrapping_mul(7919) ^ h).is_multiple_of(89) {
        20_000 + (seq % 5) as usize * 30_000
    } else {
        (seq * 7 % 300) as usize
    }
}

/// The fact a run holds at `seq`, exactly as the child appends it.
fn expected_new_fact(run_id: &str, seq: u64) -> NewFact {
    let len = planned_len(run_id);
    assert!(
        seq < len,
        "seq {seq} past the plan of {run_id} ({len} facts)"
    );
    let h = fnv(run_id);
    let at = base_at(run_id) + seq as i64 * 1_000;
    let offset = seq * 1_000;
    let run_level = |kind| NewFact {
        at,
        offset,
        call: None,
        kind,
    };
    if seq == 0 {
        return run_level(FactKind::RunStarted(RunStarted {
            run_id: run_id.into(),
            session_id: (h.is_multiple_of(2)).then(|| format!("session-{}", h % 5)),
            identity: (!h.is_multiple_of(3)).then(|| Identity {
                tenant: Some(format!("tenant-{}", h % 3)),
                principal: (h.is_multiple_of(4)).then(String::new),
                conversation: None,
            }),
            producer: Producer {
                name: "reel-crash-test".into(),
                version: "1".into(),
            },
            labels: [("plan".to_string(), len.to_string())].into(),
            teardown_scopes: vec![],
        }));
    }
    if seq == len - 1 {
        return run_level(FactKind::RunEnded(RunEnded {
            status: planned_status(run_id),
        }));
    }
    let j = seq - 1;
    let (call, pos) = (j / CYCLE, j % CYCLE);
    let call_id = format!("call-{call}");
    let kind = match pos {
        0 => FactKind::CallStarted(CallStarted {
            call_id: call_id.clone(),
            tool_name: format!("tool-{}", (h + call) % 4),
            tool_id: None,
            parent_call: (call > 0 && call % 3 == 0).then(|| format!("call-{}", call - 1)),
            iteration: call as u32,
            invocation_id: None,
            mode: if call % 2 == 0 {
                CallMode::Sync
            } else {
                CallMode::Async
            },
            protocol: Some("mcp".into()),
            platform: None,
            client_info: None,
            args: json!({ "run": run_id, "seq": seq }),
            wanted: None,
            attached: None,
            spec: None,
            dispatch_tools: None,
            outside_run: None,
        }),
        1 | 2 | 4 => FactKind::Progress(Progress {
            payload: json!({
                "run": run_id,
                "seq_hint": seq,
                "pad": "x".repeat(pad_len(run_id, seq)),
            }),
            count: [0, 1, 2, 0, 3][pos as usize],
            delivered: false,
        }),
        3 => FactKind::Log(Log {
            level: Level::ALL[(seq % 8) as usize],
            logger: Some("crash".into()),
            subflow: (seq.is_multiple_of(3)).then(|| "sub".to_string()),
            data: json!({ "seq": seq, "msg": format!("log line of {run_id}") }),
            delivered: seq.is_multiple_of(2),
            in_flight: Vec::new(),
        }),
        _ => FactKind::CallEnded(CallEnded {
            outcome: if call % 5 == 4 {
                CallOutcome::Error {
                    error: format!("error in call {call}"),
                    result: None,
                }
            } else {
                CallOutcome::Ok {
                    result: json!({ "seq": seq }),
                }
            },
            duration_ns: seq * 10,
            invocation_id: None,
        }),
    };
    NewFact {
        at,
        offset,
        call: Some(call_id),
        kind,
    }
}

fn expected_fact(run_id: &str, seq: u64) -> Fact {
    expected_new_fact(run_id, seq).with_seq(seq)
}

// ---------------------------------------------------------------------------
// The child
// ---------------------------------------------------------------------------

/// Reports a broken promise seen by the child and stops it.
fn child_fail(msg: String) -> ! {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "error {}", msg.replace('\n', " "));
    let _ = out.flush();
    std::process::exit(2);
}

fn child(dir: &Path) {
    let started = Instant::now();
    let round: u64 = std::env::var(ROUND_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let seed: u64 = std::env::var(CHILD_SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut rng = Rng::new(seed);
    // Half the rounds keep sled's default background flush (500 ms, which a
    // child killed within 400 ms never reaches: only explicit flushes make
    // facts durable). Others flush in the background every few milliseconds,
    // so that what survives is cut at arbitrary points between sled inserts.
    let mut config = ArchiveConfig {
        flush_every_ms: std::env::var(FLUSH_ENV).ok().and_then(|s| s.parse().ok()),
        ..ArchiveConfig::default()
    };
    if std::env::var_os(SMALL_JOURNAL_ENV).is_some() {
        config.journal.segment_bytes = 16 << 10;
        config.journal.unapplied_bytes = 64 << 10;
    }
    let archive = Archive::open(dir, config).unwrap_or_else(|e| child_fail(format!("open: {e}")));

    // Runs of earlier rounds are closed (ended, or marked incomplete by
    // recovery): they take no more facts.
    let old: Vec<String> = archive
        .run_ids()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| child_fail(format!("run_ids: {e}")));
    for id in old.iter().rev().take(3) {
        let extra = NewFact {
            at: 1,
            offset: 0,
            call: None,
            kind: FactKind::Progress(Progress {
                payload: json!("late"),
                count: 1,
                delivered: false,
            }),
        };
        match archive.append(id, vec![extra]) {
            Err(ArchiveError::RunClosed { .. }) => {}
            other => child_fail(format!(
                "append to run {id} of an earlier round: expected RunClosed, got {other:?}"
            )),
        }
    }
    println!("opened {}", old.len());

    let mut out = std::io::stdout().lock();
    let mut made = 0u64;
    // Runs being written: (id, next seq).
    let mut active: Vec<(String, u64)> = Vec::new();
    // Runs appended to since the last flush: id -> next seq.
    let mut dirty: BTreeMap<String, u64> = BTreeMap::new();
    while started.elapsed() < CHILD_MAX {
        // One to three runs interleave.
        let want_active = 1 + (rng.next() % 3) as usize;
        if active.len() < want_active || active.is_empty() {
            let id = format!("r{round}-{made}");
            made += 1;
            let _ = writeln!(out, "started {id}");
            let _ = out.flush();
            active.push((id, 0));
        }
        let pick = (rng.next() % active.len() as u64) as usize;
        let (id, next) = active[pick].clone();
        let len = planned_len(&id);
        let n = rng.range(1, 40).min(len - next);
        let facts: Vec<NewFact> = (next..next + n)
            .map(|s| expected_new_fact(&id, s))
            .collect();
        match archive.append(&id, facts) {
            Ok(range) if range == (next..next + n) => {}
            other => child_fail(format!(
                "append to {id}: expected seqs {:?}, got {other:?}",
                next..next + n
            )),
        }
        let next = next + n;
        dirty.insert(id.clone(), next);
        if next == len {
            active.remove(pick);
        } else {
            active[pick].1 = next;
        }
        if rng.next().is_multiple_of(3) {
            let artifact = rng.next().is_multiple_of(2).then(|| {
                let n = round * 1_000_000 + made * 1_000 + rng.next() % 1_000;
                if let Err(e) = archive.put_artifact(&artifact_bytes(n)) {
                    child_fail(format!("put_artifact: {e}"));
                }
                n
            });
            if let Err(e) = archive.flush() {
                child_fail(format!("flush: {e}"));
            }
            for (id, next) in std::mem::take(&mut dirty) {
                let _ = writeln!(out, "durable {id} {next}");
            }
            if let Some(n) = artifact {
                let _ = writeln!(out, "artifact {n}");
            }
            let _ = out.flush();
        }
        if rng.next().is_multiple_of(8) {
            let _ = writeln!(out, "checkpointing");
            let _ = out.flush();
            if let Err(e) = archive.checkpoint() {
                child_fail(format!("checkpoint: {e}"));
            }
            let _ = writeln!(out, "checkpointed");
            let _ = out.flush();
        }
    }
    child_fail(format!(
        "the parent did not kill the child within {CHILD_MAX:?}"
    ));
}

// ---------------------------------------------------------------------------
// The parent
// ---------------------------------------------------------------------------

/// What the parent knows about a run after checking it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    facts: u64,
    state: RunState,
}

/// The bytes of the artifact numbered `n`: 1 to 300 KiB, a pure function
/// of `n`.
fn artifact_bytes(n: u64) -> Vec<u8> {
    let len = 1 + (n.wrapping_mul(7919) % (300 * 1024)) as usize;
    (0..len as u64)
        .map(|i| (i.wrapping_mul(31) ^ n.wrapping_mul(131)) as u8)
        .collect()
}

#[derive(Default)]
struct Knowledge {
    /// Highest `next_seq` acknowledged durable, per run, over all rounds.
    durable: BTreeMap<String, u64>,
    /// The artifacts acknowledged durable, over all rounds.
    artifacts: BTreeSet<u64>,
    /// Every run checked in an earlier round, as it was then.
    seen: BTreeMap<String, Seen>,
}

/// How a round is played besides its kill delay.
#[derive(Debug, Clone, Copy, Default)]
struct Plan {
    /// sled's background flush interval for the child.
    flush_ms: Option<u64>,
    /// A small journal for the child (rotations, bound waits, frequent
    /// checkpoints).
    small_journal: bool,
    /// After the kill, cut the journal back as a power cut would.
    power_cut: bool,
    /// Check only through read-only opens, leaving the journal for the
    /// next child's open to apply.
    leave_journal: bool,
}

/// What the rounds did, for the summary.
#[derive(Debug, Default)]
struct Tally {
    killed_opening: u64,
    killed_checkpointing: u64,
    power_cuts: u64,
    cuts_named: u64,
}

struct RoundOutcome {
    delay_ms: u64,
    flush_ms: Option<u64>,
    acked: u64,
    found: u64,
    runs: usize,
    incomplete: usize,
    started_this_round: usize,
}

fn parent() {
    let t0 = Instant::now();
    let rounds: u64 = match std::env::var("REEL_CRASH_ROUNDS") {
        Ok(s) => s.parse().unwrap_or_else(|_| {
            println!("REEL_CRASH_ROUNDS={s:?} is not a number");
            std::process::exit(1)
        }),
        Err(_) if std::env::var_os("CI").is_some() => 6,
        Err(_) => 12,
    };
    let seed: u64 = match std::env::var("REEL_CRASH_SEED") {
        Ok(s) => s.parse().unwrap_or_else(|_| {
            println!("REEL_CRASH_SEED={s:?} is not a number");
            std::process::exit(1)
        }),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(42),
    };
    println!("crash: {rounds} rounds, seed {seed} (repeat with REEL_CRASH_SEED={seed})");
    let mut rng = Rng::new(seed);
    let tmp = tempfile::tempdir().unwrap_or_else(|e| {
        println!("crash: cannot make a temporary directory: {e}");
        std::process::exit(1)
    });
    let dir = tmp.path().join("archive");
    let exe = std::env::current_exe().unwrap_or_else(|e| {
        println!("crash: cannot find the test binary: {e}");
        std::process::exit(1)
    });
    let mut know = Knowledge::default();
    let mut passed = 0u64;
    let mut failed = 0u64;
    let mut found_before = 0u64;
    let mut tally = Tally::default();
    let mut recovering = false;
    for round in 0..rounds {
        // After a check that left the journal unapplied, the child is
        // killed while its open applies it.
        let delay_ms = if recovering {
            rng.range(1, 40)
        } else {
            rng.range(20, 400)
        };
        let child_seed = rng.next();
        let flush_ms = (rng.next().is_multiple_of(2)).then(|| rng.range(1, 10));
        let plan = Plan {
            flush_ms,
            small_journal: rng.next().is_multiple_of(3),
            power_cut: rng.next().is_multiple_of(3),
            leave_journal: !recovering && rng.next().is_multiple_of(3),
        };
        recovering = plan.leave_journal;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_round(
                &exe, &dir, round, delay_ms, plan, child_seed, &mut know, &mut tally,
            )
        }))
        .unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(vec![format!("the check panicked: {msg}")])
        });
        match outcome {
            Ok(o) => {
                passed += 1;
                let new = o.found.saturating_sub(found_before);
                found_before = o.found;
                println!(
                    "round {round}: killed after {} ms (background flush {}): {} runs started, \
                     {} facts acknowledged durable, {new} new facts found ({} beyond the acknowledged); \
                     archive: {} facts in {} runs ({} incomplete)",
                    o.delay_ms,
                    o.flush_ms.map_or("default".to_string(), |ms| format!("{ms} ms")),
                    o.started_this_round,
                    o.acked,
                    new.saturating_sub(o.acked),
                    o.found,
                    o.runs,
                    o.incomplete
                );
            }
            Err(problems) => {
                failed += 1;
                println!(
                    "round {round}: FAILED (kill delay {delay_ms} ms, background flush {flush_ms:?} ms, seed {seed})"
                );
                for p in problems.iter().take(40) {
                    println!("  {p}");
                }
                if problems.len() > 40 {
                    println!("  ... and {} more", problems.len() - 40);
                }
                // The archive is shared by all rounds: later ones would only
                // repeat this failure.
                break;
            }
        }
    }
    println!(
        "crash: {} artifacts acknowledged, each read back whole after every later kill",
        know.artifacts.len()
    );
    println!(
        "crash: {} kills during an open applying the journal, {} during a checkpoint; {} power \
         cuts simulated, {} cuts below the acknowledged position named as damage",
        tally.killed_opening, tally.killed_checkpointing, tally.power_cuts, tally.cuts_named
    );
    println!("crash: took {:.1} s", t0.elapsed().as_secs_f64());
    println!("crash: {passed} passed, {failed} failed");
    if failed > 0 || passed < rounds {
        // Keep the archive for a post-mortem.
        let kept = tmp.keep();
        println!("crash: archive kept at {}", kept.join("archive").display());
        std::process::exit(1);
    }
}

#[allow(clippy::too_many_arguments)]
fn run_round(
    exe: &PathBuf,
    dir: &Path,
    round: u64,
    delay_ms: u64,
    plan: Plan,
    child_seed: u64,
    know: &mut Knowledge,
    tally: &mut Tally,
) -> Result<RoundOutcome, Vec<String>> {
    let flush_ms = plan.flush_ms;
    let mut problems = Vec::new();
    let mut cmd = Command::new(exe);
    if let Some(ms) = flush_ms {
        cmd.env(FLUSH_ENV, ms.to_string());
    }
    if plan.small_journal {
        cmd.env(SMALL_JOURNAL_ENV, "1");
    }
    let mut child = cmd
        .env(CHILD_ENV, dir)
        .env(ROUND_ENV, round.to_string())
        .env(CHILD_SEED_ENV, child_seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| vec![format!("cannot spawn the child: {e}")])?;
    let stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut r = BufReader::new(stdout);
        loop {
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                // A line cut by the kill has no newline: it was never said.
                Ok(_) if line.ends_with('\n') => lines.push(line.trim_end().to_string()),
                Ok(_) => break,
            }
        }
        lines
    });
    std::thread::sleep(Duration::from_millis(delay_ms));
    let _ = child.kill(); // SIGKILL on Unix
    let status: ExitStatus = child
        .wait()
        .map_err(|e| vec![format!("waiting for the child: {e}")])?;
    let lines = reader
        .join()
        .map_err(|_| vec!["the stdout reader thread panicked".to_string()])?;

    let mut acked_now: BTreeMap<String, u64> = BTreeMap::new();
    let mut started_now: BTreeSet<String> = BTreeSet::new();
    for line in &lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["durable", id, next] => match next.parse::<u64>() {
                Ok(n) => {
                    let e = acked_now.entry(id.to_string()).or_default();
                    *e = (*e).max(n);
                }
                Err(_) => problems.push(format!("child printed a bad line: {line:?}")),
            },
            ["started", id] => {
                started_now.insert(id.to_string());
            }
            ["artifact", n] => match n.parse::<u64>() {
                Ok(n) => {
                    know.artifacts.insert(n);
                }
                Err(_) => problems.push(format!("child printed a bad line: {line:?}")),
            },
            ["opened", _] | ["checkpointing"] | ["checkpointed"] => {}
            ["error", ..] => problems.push(format!("child: {line}")),
            _ => problems.push(format!("child printed an unexpected line: {line:?}")),
        }
    }
    if status.signal() != Some(9) {
        problems.push(format!(
            "the child was to be killed by SIGKILL but ended with {status}"
        ));
    }
    let acked: u64 = acked_now.values().sum();
    for (id, n) in acked_now {
        let e = know.durable.entry(id).or_default();
        *e = (*e).max(n);
    }

    if !lines.iter().any(|l| l.starts_with("opened")) {
        tally.killed_opening += 1;
    }
    if lines.last().is_some_and(|l| l == "checkpointing") {
        tally.killed_checkpointing += 1;
    }
    if plan.power_cut {
        tally.power_cuts += 1;
        match power_cut(dir) {
            Ok(named) => tally.cuts_named += u64::from(named),
            Err(p) => problems.push(p),
        }
    }
    let checked = check_archive(
        dir,
        know,
        &mut problems,
        !plan.leave_journal,
        plan.power_cut,
    );
    if !problems.is_empty() {
        return Err(problems);
    }
    let (found, runs, incomplete) = checked;
    Ok(RoundOutcome {
        delay_ms,
        flush_ms,
        acked,
        found,
        runs,
        incomplete,
        started_this_round: started_now.len(),
    })
}

/// Opens the archive the child left and checks every run in it. Returns
/// (facts found, runs, incomplete runs).
fn check_archive(
    dir: &Path,
    know: &mut Knowledge,
    problems: &mut Vec<String>,
    writer: bool,
    power_cut: bool,
) -> (u64, usize, usize) {
    // A crash is not damage: a reader's open (which checks the control
    // record on a scratch copy, leaving the store as the crash left it)
    // and then a writer's both find the store whole.
    let read_only = ArchiveConfig {
        read_only: true,
        ..ArchiveConfig::default()
    };
    if let Err(e) = Archive::open(dir, read_only).and_then(|a| a.verify()) {
        problems.push(format!("a reader calls the crashed archive damaged: {e}"));
    }
    let config = ArchiveConfig {
        read_only: !writer,
        ..ArchiveConfig::default()
    };
    let archive = match Archive::open(dir, config) {
        Ok(a) => a,
        Err(e) => {
            problems.push(format!("the archive does not open after the crash: {e}"));
            return (0, 0, 0);
        }
    };
    let mut found_total = 0u64;
    let mut incomplete = 0usize;

    let ids: Vec<String> = match archive.run_ids().collect::<Result<_, _>>() {
        Ok(ids) => ids,
        Err(e) => {
            problems.push(format!("listing run ids: {e}"));
            Vec::new()
        }
    };
    let id_set: BTreeSet<&String> = ids.iter().collect();
    if id_set.len() != ids.len() {
        problems.push("the start-time index lists a run twice".into());
    }

    // Every run acknowledged durable, and every run seen before, is there.
    for id in know.durable.keys().chain(know.seen.keys()) {
        if !id_set.contains(id) {
            problems.push(format!(
                "run {id} is gone (acknowledged durable up to seq {:?}, seen before as {:?})",
                know.durable.get(id),
                know.seen.get(id)
            ));
        }
    }

    let mut now_seen = BTreeMap::new();
    for id in &ids {
        let record = match archive.run(id) {
            Ok(r) => r,
            Err(e) => {
                problems.push(format!("run {id}: its record does not read: {e}"));
                continue;
            }
        };
        let facts = match archive.facts(id, ..) {
            Ok(f) => f,
            Err(e) => {
                problems.push(format!("run {id}: its facts do not read: {e}"));
                continue;
            }
        };
        let len = planned_len(id);
        let mut n = 0u64;
        let mut calls = 0u64;
        let mut tools = BTreeSet::new();
        let mut bad = false;
        for item in facts {
            let fact = match item {
                Ok(f) => f,
                Err(e) => {
                    problems.push(format!("run {id}: a fact does not read: {e}"));
                    bad = true;
                    break;
                }
            };
            if fact.seq != n {
                problems.push(format!(
                    "run {id}: seq {} where {n} was expected (seqs must be gapless from 0)",
                    fact.seq
                ));
                bad = true;
                break;
            }
            if n >= len {
                problems.push(format!(
                    "run {id}: fact seq {n} is past its plan of {len} facts"
                ));
                bad = true;
                break;
            }
            let want = expected_fact(id, n);
            if fact != want {
                problems.push(format!(
                    "run {id}: fact seq {n} is not what was written: {:?} stored, {:?} written",
                    short(&fact),
                    short(&want)
                ));
                bad = true;
                break;
            }
            if let FactKind::CallStarted(c) = &fact.kind {
                calls += 1;
                tools.insert(c.tool_name.clone());
            }
            n += 1;
        }
        if bad {
            continue;
        }
        found_total += n;

        if let Some(&acked) = know.durable.get(id) {
            if n < acked {
                problems.push(format!(
                    "run {id}: facts up to seq {} were acknowledged durable but only {n} are there \
                     (lost: seq {n}..{acked})",
                    acked - 1
                ));
            }
        }
        let ended = n == len;
        let want_state = if ended {
            RunState::from(planned_status(id))
        } else {
            RunState::Incomplete
        };
        if record.state != want_state {
            problems.push(format!(
                "run {id}: reads as {} but holds {n} of {len} facts ({}): it should read as {want_state}",
                record.state,
                if ended { "its run.ended is there" } else { "no run.ended" },
            ));
        }
        if !ended {
            incomplete += 1;
        }
        if record.facts != n {
            problems.push(format!(
                "run {id}: its record counts {} facts but {n} are stored",
                record.facts
            ));
        }
        if record.calls != calls || record.tools != tools {
            problems.push(format!(
                "run {id}: its record counts {} calls of {:?}, the facts {calls} calls of {tools:?}",
                record.calls, record.tools
            ));
        }
        if record.run_id != *id || record.started_at != base_at(id) {
            problems.push(format!(
                "run {id}: its record names run {:?} started at {}",
                record.run_id, record.started_at
            ));
        }
        let seen = Seen {
            facts: n,
            state: record.state,
        };
        // A power cut may take what a reader saw after an earlier kill but
        // was never synced (the acknowledged facts are checked above).
        if let Some(before) = know.seen.get(id).filter(|_| !power_cut) {
            if *before != seen {
                problems.push(format!(
                    "run {id}: changed since an earlier round: it was {before:?}, it is {seen:?}"
                ));
            }
        }
        now_seen.insert(id.clone(), seen);
    }

    // Nothing reads as running once the writer is gone.
    match archive.list_runs(&RunFilter {
        status: Some(RunState::Running),
        ..RunFilter::default()
    }) {
        Ok(page) if page.runs.is_empty() => {}
        Ok(page) => problems.push(format!(
            "runs still listed as running after recovery: {:?}",
            page.runs.iter().map(|r| &r.run_id).collect::<Vec<_>>()
        )),
        Err(e) => problems.push(format!("listing running runs: {e}")),
    }

    // Every artifact acknowledged, in any round, reads back whole.
    for n in &know.artifacts {
        let bytes = artifact_bytes(*n);
        let digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes)));
        match archive.artifact(&digest) {
            Ok(Some(read)) if read == bytes => {}
            Ok(Some(read)) => problems.push(format!(
                "artifact {n} reads back as {} other bytes",
                read.len()
            )),
            Ok(None) => problems.push(format!("artifact {n} was acknowledged but is gone")),
            Err(e) => problems.push(format!("artifact {n}: {e}")),
        }
    }

    match archive.verify() {
        Ok(report) if report.is_ok() => {
            if report.facts != found_total {
                problems.push(format!(
                    "verify decoded {} facts, the runs hold {found_total}",
                    report.facts
                ));
            }
        }
        Ok(report) => {
            for p in &report.problems {
                problems.push(format!("verify: {p}"));
            }
        }
        Err(e) => problems.push(format!("verify failed: {e}")),
    }
    drop(archive);
    let runs = now_seen.len();
    know.seen.extend(now_seen);
    (found_total, runs, incomplete)
}

// ---------------------------------------------------------------------------
// A simulated power cut
// ---------------------------------------------------------------------------

/// The journal's segment header: 32 bytes, the sequence number at 12 and
/// the first frame's position at 20 (little-endian).
const SEGMENT_HEADER: u64 = 32;

/// Cuts the journal of the archive at `dir` back to the last position
/// known synced, as a power cut after that sync would (every byte before
/// it kept, every byte after it lost): the control record's acknowledged
/// position, the frames' own synced positions, the checkpoint. Then, on a
/// copy, cuts it one byte below the acknowledged position (when that lies
/// past the checkpoint) and checks that a reader's and a writer's open
/// both name damage. Returns whether that second cut was made.
fn power_cut(dir: &Path) -> Result<bool, String> {
    let jdir = dir.join("journal").join("main");
    let Some((checkpoint, acknowledged)) = reel_archive::journal_positions(dir) else {
        return Ok(false);
    };
    let synced = reel_archive::journal::scan(&jdir, checkpoint, 0)
        .map(|r| r.acknowledged)
        .map_err(|e| format!("power cut: the journal does not scan after the kill: {e}"))?;
    let at = acknowledged.max(synced).max(checkpoint);
    cut_journal(&jdir, at).map_err(|e| format!("power cut: cutting the journal: {e}"))?;
    if acknowledged <= checkpoint {
        return Ok(false);
    }
    let copy = tempfile::tempdir().map_err(|e| format!("power cut: a temporary directory: {e}"))?;
    let copied = copy.path().join("archive");
    copy_dir(dir, &copied).map_err(|e| format!("power cut: copying the archive: {e}"))?;
    let cjdir = copied.join("journal").join("main");
    cut_journal(&cjdir, acknowledged - 1)
        .map_err(|e| format!("power cut: cutting the copy's journal: {e}"))?;
    for read_only in [true, false] {
        let config = ArchiveConfig {
            read_only,
            ..ArchiveConfig::default()
        };
        match Archive::open(&copied, config) {
            Err(e) if e.is_damage() && e.to_string().contains("journal") => {}
            Err(e) => {
                return Err(format!(
                    "a journal cut below its acknowledged position {acknowledged} (checkpoint \
                     {checkpoint}) is not named as journal damage (read_only {read_only}): {e}"
                ))
            }
            Ok(_) => {
                return Err(format!(
                    "a journal cut below its acknowledged position {acknowledged} (checkpoint \
                     {checkpoint}) opens (read_only {read_only}): a silent loss"
                ))
            }
        }
    }
    Ok(true)
}

/// Cuts the journal in `jdir` at position `at`: the segment holding it is
/// cut there, the later ones removed.
fn cut_journal(jdir: &Path, at: u64) -> std::io::Result<()> {
    let mut segments = Vec::new();
    for entry in std::fs::read_dir(jdir)? {
        let path = entry?.path();
        let Some(seq) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".wal"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let bytes = std::fs::read(&path)?;
        // A segment cut while it was being created holds nothing.
        let base = bytes
            .get(20..28)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        segments.push((seq, base, path));
    }
    segments.sort();
    let holding = segments
        .iter()
        .rposition(|(_, base, _)| base.is_some_and(|b| b <= at));
    for (i, (_, base, path)) in segments.iter().enumerate() {
        match holding {
            Some(h) if i == h => {
                let keep = SEGMENT_HEADER + (at - base.expect("a base"));
                let file = std::fs::OpenOptions::new().write(true).open(path)?;
                if file.metadata()?.len() > keep {
                    file.set_len(keep)?;
                }
            }
            Some(h) if i > h => std::fs::remove_file(path)?,
            _ => {}
        }
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// A fact, shortened for a failure message.
fn short(fact: &Fact) -> String {
    let s = format!("{fact:?}");
    if s.chars().count() > 300 {
        let cut: String = s.chars().take(300).collect();
        format!("{cut}… (+{} more)", s.chars().count() - 300)
    } else {
        s
    }
}

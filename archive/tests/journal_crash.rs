//! The journal under SIGKILL: a child process appends batches from three
//! threads with group commit (rotating files every few KiB), and is killed
//! at a random point; every batch it acknowledged must read back, exactly,
//! with no false alarm, round after round (each round's child reopens the
//! journal the last one left, as a restarted writer would). Then a power
//! cut is simulated on a copy: the journal cut back to the last
//! acknowledged position loses nothing acknowledged, and cut one byte
//! shorter is named damage.
//!
//! A `harness = false` test in the style of `tests/crash.rs`: the same
//! binary is the parent (default) and the child
//! (`REEL_JOURNAL_CRASH_CHILD=<dir>`). The child prints `ack ROUND THREAD N
//! END` once batch (ROUND, THREAD, N) is acknowledged durable at journal
//! position END. The parent kills it after a random number of those lines
//! (no timing: the kill lands wherever the child is, often inside a group
//! commit or a rotation), or at once, one round in four (inside its open:
//! the recovery scan, the sync, the new file's creation).
//!
//! Knobs: `REEL_JOURNAL_CRASH_ROUNDS` (default 10, or 6 when `CI` is set),
//! `REEL_JOURNAL_CRASH_SEED` (printed at start, to repeat a failure).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reel_archive::journal::{scan, Journal, JournalConfig, Position, Wait};

const CHILD_ENV: &str = "REEL_JOURNAL_CRASH_CHILD";
const ROUND_ENV: &str = "REEL_JOURNAL_CRASH_ROUND";
const ACK_ENV: &str = "REEL_JOURNAL_CRASH_ACK";
const THREADS: u64 = 3;
/// The child stops by itself after this long, should the parent never kill it.
const CHILD_MAX: Duration = Duration::from_secs(60);

fn main() {
    match std::env::var_os(CHILD_ENV) {
        Some(dir) => child(Path::new(&dir)),
        None => parent(),
    }
}

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

/// The batch (round, thread, n): its name, then padding that is a pure
/// function of the name (0 to 900 bytes).
fn batch(round: u64, thread: u64, n: u64) -> Vec<Vec<u8>> {
    let name = format!("{round} {thread} {n}");
    let mut rng = Rng((round << 40 ^ thread << 32 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let len = rng.range(0, 900) as usize;
    let pad: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    vec![name.into_bytes(), pad]
}

fn config() -> JournalConfig {
    JournalConfig {
        segment_bytes: 8 << 10,
        sync_within: Some(Duration::from_millis(2)),
        ..JournalConfig::default()
    }
}

fn child(dir: &Path) {
    let num = |name: &str| -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{name} is not set to a number"))
    };
    let round = num(ROUND_ENV);
    let ack = num(ACK_ENV);
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "opening");
        let _ = out.flush();
    }
    let (journal, found) = match Journal::open(dir, config(), 0, ack) {
        Ok(opened) => opened,
        Err(e) => {
            println!("error {e}");
            std::process::exit(3);
        }
    };
    println!("opened {}", found.end);
    let began = Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let journal = &journal;
            s.spawn(move || {
                for n in 0.. {
                    if began.elapsed() > CHILD_MAX {
                        return;
                    }
                    let records = batch(round, t, n);
                    let refs: Vec<&[u8]> = records.iter().map(|r| r.as_slice()).collect();
                    // Every fact, call boundary, buffered (never acknowledged).
                    let acked = match n % 3 {
                        0 => journal.append(&refs, Wait::Synced).map(Some),
                        1 => journal
                            .append(&refs, Wait::Written)
                            .and_then(|end| journal.sync_to(end).map(|()| Some(end))),
                        _ => journal.append(&refs, Wait::Written).map(|_| None),
                    };
                    match acked {
                        Ok(Some(end)) => {
                            let mut out = std::io::stdout().lock();
                            let _ = writeln!(out, "ack {round} {t} {n} {end}");
                            let _ = out.flush();
                        }
                        Ok(None) => {}
                        Err(e) => {
                            println!("error {e}");
                            std::process::exit(3);
                        }
                    }
                }
            });
        }
    });
    println!("error the parent did not kill the child within {CHILD_MAX:?}");
}

fn parent() {
    let t0 = Instant::now();
    let env_num = |name: &str| {
        std::env::var(name).ok().map(|s| {
            s.parse::<u64>().unwrap_or_else(|_| {
                println!("{name}={s:?} is not a number");
                std::process::exit(1)
            })
        })
    };
    let rounds =
        env_num("REEL_JOURNAL_CRASH_ROUNDS").unwrap_or(if std::env::var_os("CI").is_some() {
            6
        } else {
            10
        });
    let seed = env_num("REEL_JOURNAL_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(42, |d| d.as_nanos() as u64)
    });
    println!(
        "journal_crash: {rounds} rounds, seed {seed} (repeat with REEL_JOURNAL_CRASH_SEED={seed})"
    );
    let mut rng = Rng(seed | 1);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("journal");
    let exe = std::env::current_exe().expect("the test binary");
    // Every acknowledged batch so far: (round, thread, n) -> end position.
    let mut acked: BTreeMap<(u64, u64, u64), Position> = BTreeMap::new();
    let mut passed = 0;
    for round in 0..rounds {
        // One round in four kills the child at once: inside its open
        // (the scan, the sync of the last file, a new file's creation).
        let kill_after = if rng.next().is_multiple_of(4) {
            0
        } else {
            rng.range(1, 400)
        };
        match run_round(&exe, &dir, tmp.path(), round, kill_after, &mut acked) {
            Ok(said) => {
                passed += 1;
                println!("round {round}: {said}");
            }
            Err(problems) => {
                println!("round {round}: FAILED (killed after {kill_after} acks, seed {seed})");
                for p in problems.iter().take(20) {
                    println!("  {p}");
                }
                let kept = tmp.keep();
                println!("journal_crash: kept at {}", kept.display());
                println!("journal_crash: {passed} passed, 1 failed");
                std::process::exit(1);
            }
        }
    }
    println!("journal_crash: took {:.1} s", t0.elapsed().as_secs_f64());
    println!("journal_crash: {passed} passed, 0 failed");
}

fn run_round(
    exe: &PathBuf,
    dir: &Path,
    scratch: &Path,
    round: u64,
    kill_after: u64,
    acked: &mut BTreeMap<(u64, u64, u64), Position>,
) -> Result<String, Vec<String>> {
    let ack_before = acked.values().copied().max().unwrap_or(0);
    let mut child = Command::new(exe)
        .env(CHILD_ENV, dir)
        .env(ROUND_ENV, round.to_string())
        .env(ACK_ENV, ack_before.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| vec![format!("cannot spawn the child: {e}")])?;
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut lines = Vec::new();
    let mut acks = 0;
    let mut killed = false;
    loop {
        let mut line = String::new();
        match out.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            // A line cut by the kill has no newline: it was never said.
            Ok(_) if !line.ends_with('\n') => break,
            Ok(_) => {}
        }
        acks += u64::from(line.starts_with("ack "));
        lines.push(line.trim_end().to_owned());
        // `opening` comes first: a kill then lands in the open or soon after.
        if acks >= kill_after && !killed && (kill_after > 0 || line.starts_with("opening")) {
            // SIGKILL; the lines already in the pipe are read on.
            let _ = child.kill();
            killed = true;
        }
        if line.starts_with("error") {
            let _ = child.kill();
        }
    }
    let status = child
        .wait()
        .map_err(|e| vec![format!("waiting for the child: {e}")])?;
    let mut problems = Vec::new();
    if status.signal() != Some(9) {
        problems.push(format!(
            "the child was to be killed by SIGKILL; it ended with {status}"
        ));
    }
    let mut new = 0;
    for line in &lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["ack", r, t, n, end] => {
                let parsed: Option<Vec<u64>> =
                    [r, t, n, end].iter().map(|w| w.parse().ok()).collect();
                match parsed.as_deref() {
                    Some(&[r, t, n, end]) => {
                        acked.insert((r, t, n), end);
                        new += 1;
                    }
                    _ => problems.push(format!("a bad line: {line:?}")),
                }
            }
            ["opening"] | ["opened", _] => {}
            _ => problems.push(format!("child: {line}")),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let ack = acked.values().copied().max().unwrap_or(0);

    // SIGKILL keeps the page cache: everything acknowledged reads back.
    let found = scan(dir, 0, ack).map_err(|e| vec![format!("a false alarm: {e}")])?;
    check(&found.batches, acked, &mut problems);
    let tail = found.tail().unwrap_or_else(|| "no tail".into());

    // A power cut: the journal back to the acknowledged position.
    let copy = scratch.join(format!("power-cut-{round}"));
    copy_dir(dir, &copy);
    let cut_to = |cut: &Path, short: u64| {
        let mut files: Vec<PathBuf> = std::fs::read_dir(cut)
            .expect("copy")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "wal"))
            .collect();
        files.sort();
        // The file holding the batch that ends at `ack`: the last one
        // starting before it.
        let bases: Vec<u64> = files
            .iter()
            .map(|f| {
                let b = std::fs::read(f).expect("file");
                b.get(20..28)
                    .map_or(u64::MAX, |b| u64::from_le_bytes(b.try_into().expect("8")))
            })
            .collect();
        let holder = bases.iter().rposition(|&b| b < ack);
        for (i, f) in files.iter().enumerate() {
            match holder {
                Some(h) if i < h => {}
                Some(h) if i == h => {
                    let len = 32 + ack - bases[h] - short;
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(f)
                        .and_then(|f| f.set_len(len))
                        .expect("truncate");
                }
                _ => std::fs::remove_file(f).expect("remove"),
            }
        }
    };
    if ack > 0 {
        cut_to(&copy, 0);
        match scan(&copy, 0, ack) {
            Ok(after) => check(&after.batches, acked, &mut problems),
            Err(e) => problems.push(format!("cut back to the acknowledged position: {e}")),
        }
        copy_dir(dir, &copy.with_extension("short"));
        cut_to(&copy.with_extension("short"), 1);
        match scan(&copy.with_extension("short"), 0, ack) {
            Err(e) if e.is_damage() => {}
            other => problems.push(format!(
                "cut one byte short of the acknowledged position, and no damage: {other:?}"
            )),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(format!(
        "{new} batches acknowledged this round, {} in all; the journal holds {} batches, its \
         newest file is number {}; {tail}",
        acked.len(),
        found.batches.len(),
        found.last_seq,
    ))
}

/// Every acknowledged batch is there once, at its position, with its
/// bytes; every batch read is one a child wrote.
fn check(
    batches: &[reel_archive::journal::Batch],
    acked: &BTreeMap<(u64, u64, u64), Position>,
    problems: &mut Vec<String>,
) {
    let mut seen = BTreeMap::new();
    for b in batches {
        let key: Option<Vec<u64>> = b
            .records
            .first()
            .and_then(|n| std::str::from_utf8(n).ok())
            .map(|n| n.split(' ').filter_map(|w| w.parse().ok()).collect());
        let Some(&[r, t, n]) = key.as_deref() else {
            problems.push(format!("a batch no child wrote at {}", b.position));
            continue;
        };
        if b.records != batch(r, t, n) {
            problems.push(format!(
                "batch {r} {t} {n} at {} has other bytes",
                b.position
            ));
        }
        if seen.insert((r, t, n), b.end).is_some() {
            problems.push(format!("batch {r} {t} {n} twice"));
        }
    }
    for (key, end) in acked {
        match seen.get(key) {
            Some(e) if e == end => {}
            Some(e) => problems.push(format!("acknowledged batch {key:?} at {e}, not {end}")),
            None => problems.push(format!("acknowledged batch {key:?} (end {end}) lost")),
        }
    }
}

/// Copies the journal directory `from` to `to`. A child killed before it
/// created the directory leaves none: the copy is then empty, as the
/// journal is.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("copy");
    if !from.exists() {
        return;
    }
    for entry in std::fs::read_dir(from).expect("dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

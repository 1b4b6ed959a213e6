//! The `open-after-crash` row (issue 42): a writer's open of an archive
//! whose journal holds every fact (none checkpointed) after its writer was
//! killed, i.e. the time to apply a full journal, against the same open of
//! the same archive after a clean close.
//!
//! The crash is real: a child process (`reel-bench --crash-writer`) fills
//! a new archive with the open row's runs, its checkpointer held back
//! (`JournalConfig::checkpoint_when_half_full`), flushes (every run
//! acknowledged), says so, and is killed with SIGKILL. Each round opens a
//! fresh copy of what it left (the copy untimed): the open scans the
//! journal, applies every batch to sled and checkpoints.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};

use super::crash_runs::copy_dir;
use crate::*;

/// Progress reports per run's call: with its 4 other facts, 10 facts a run.
const PROGRESS: usize = 6;

/// A writer's open (as a recorder opens the archive), dropped untimed; ms.
fn open(dir: &Path) -> io::Result<f64> {
    let t = std::time::Instant::now();
    let archive = reel_archive::Archive::open(dir, reel_archive::ArchiveConfig::default())
        .map_err(io::Error::other)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    drop(archive);
    Ok(ms)
}

/// Runs the crash writer into `dir` and kills it once it says every run
/// is acknowledged; returns the bytes its journal held past the last
/// checkpoint and the checkpoints it made.
fn crash(exe: &Path, dir: &Path, runs: usize) -> io::Result<(u64, u64)> {
    let mut child = Command::new(exe)
        .arg("--crash-writer")
        .arg(dir)
        .arg(runs.to_string())
        .arg(PROGRESS.to_string())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    let read = match child.stdout.take() {
        Some(out) => io::BufReader::new(out).read_line(&mut line),
        None => Ok(0),
    };
    // `Child::kill` is SIGKILL: no close, no checkpoint, no seal.
    child.kill()?;
    child.wait()?;
    read?;
    let mut figures = line.split_whitespace().map(str::parse::<u64>);
    match (figures.next(), figures.next()) {
        (Some(Ok(bytes)), Some(Ok(checkpoints))) => Ok((bytes, checkpoints)),
        _ => Err(io::Error::other(format!(
            "{} --crash-writer ended without saying what it journaled (said {line:?})",
            exe.display()
        ))),
    }
}

/// Measures the rows of this module that `opts` asks for.
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        opts,
        s,
        rounds,
        tmp,
        log,
        rows,
        ..
    } = b;
    let exe = match &opts.bench_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    let runs = s.list_large;
    let facts = runs * (PROGRESS + 4);
    let root = tmp("reel-bench-open-crash-")?;
    let (crashed, work, clean) = (
        root.path().join("crashed"),
        root.path().join("work"),
        root.path().join("clean"),
    );
    let t = std::time::Instant::now();
    let (journaled, checkpoints) = crash(&exe, &crashed, runs)?;
    // The clean side: the same archive, once opened (the journal applied)
    // and closed.
    copy_dir(&crashed, &clean)?;
    open(&clean)?;
    writeln!(
        log,
        "\n[open-after-crash] a writer's open of {runs} runs ({facts} facts, {:.0} MB of journal \
         past the last checkpoint; the writer made {checkpoints} checkpoint(s), then was killed \
         with SIGKILL) vs the same open after a clean close; built in {:.1} s (untimed)",
        journaled as f64 / 1e6,
        t.elapsed().as_secs_f64()
    )?;
    let mut pairs = Pairs::default();
    let mut applied = Vec::new();
    for round in 0..rounds {
        if work.exists() {
            std::fs::remove_dir_all(&work)?;
        }
        copy_dir(&crashed, &work)?;
        let (mut c, mut k) = (0.0, 0.0);
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                c = open(&work)?;
            } else {
                k = open(&clean)?;
            }
        }
        pairs.push(c, k);
        let rate = facts as f64 / (c / 1e3);
        applied.push(rate);
        writeln!(
            log,
            "  round {}: after a crash {c:.1} ms ({}), after a clean close {k:.1} ms",
            round + 1,
            Unit::FactsPerSec.show(rate)
        )?;
    }
    rows.push(pairs.row(
        "open-after-crash",
        &format!(
            "open after a crash with a full journal, {runs} runs ({facts} facts applied, \
             {:.0} MB): {} applied",
            journaled as f64 / 1e6,
            Unit::FactsPerSec.show(median(&applied))
        ),
        "after a clean close",
        Unit::Millis,
        Target::Reported,
    ));
    Ok(())
}

//! The `runs-after-crash` row (issue 42): what `reel runs` does (a
//! read-only open, then the first page of runs) on a store its last
//! writer did not seal, against the same on the store after a clean close.
//! The unsealed store is a copy taken while the writer held it open (what
//! a crash leaves, as far as a reader can tell: no seal, a journal).

use std::path::Path;

use crate::*;

/// Progress reports per run's call: with its 4 other facts, 10 facts a run.
const PROGRESS: usize = 6;

/// Copies the directory `from` to `to`, recursively (files and
/// directories only).
pub(super) fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            copy_dir(&src, &dst)?;
        } else if entry.file_type()?.is_file() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// A read-only open and the first page of runs, as `reel runs`; ms.
fn runs(dir: &Path) -> io::Result<f64> {
    let t = std::time::Instant::now();
    let archive = list::open_read_only(dir)?;
    let page = archive
        .list_runs(&reel_archive::RunFilter {
            limit: Some(50),
            ..reel_archive::RunFilter::default()
        })
        .map_err(io::Error::other)?;
    std::hint::black_box(page);
    drop(archive);
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// Measures the rows of this module that `opts` asks for.
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        s,
        rounds,
        tmp,
        log,
        rows,
        ..
    } = b;
    let large = s.list_large;
    let facts = large * (PROGRESS + 4);
    let clean = tmp("reel-bench-crash-clean-")?;
    let crashed = tmp("reel-bench-crash-unsealed-")?;
    let t = std::time::Instant::now();
    let writer = list::build_with(clean.path(), large, PROGRESS)?;
    let unsealed = crashed.path().join("archive");
    copy_dir(clean.path(), &unsealed)?;
    drop(writer);
    let (allocated, _) = record::disk_usage(clean.path())?;
    writeln!(
        log,
        "\n[runs-after-crash] read-only open + first 50 runs of {large} runs ({facts} facts, \
         {:.0} MB) unsealed (copied while its writer held it) vs after a clean close; built in \
         {:.1} s (untimed)",
        allocated as f64 / 1e6,
        t.elapsed().as_secs_f64()
    )?;
    let mut pairs = Pairs::default();
    for round in 0..rounds {
        let (mut c, mut k) = (0.0, 0.0);
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                c = runs(&unsealed)?;
            } else {
                k = runs(clean.path())?;
            }
        }
        pairs.push(c, k);
        writeln!(
            log,
            "  round {}: after a crash {c:.1} ms, after a clean close {k:.1} ms",
            round + 1
        )?;
    }
    rows.push(pairs.row(
        "runs-after-crash",
        &format!("`reel runs` after a crash, {large} runs ({facts} facts)"),
        "after a clean close",
        Unit::Millis,
        Target::Within(2.0),
    ));
    Ok(())
}

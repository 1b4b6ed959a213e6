//! The `open` row (issue 42): opening an archive of 1,000,000 facts in
//! 100,000 runs after a clean close, as a read verb opens it, against the
//! same open of an archive of 1,000 runs of the same make-up.

use crate::*;

/// Progress reports per run's call: with its 4 other facts, 10 facts a run.
const PROGRESS: usize = 6;

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
    let (large, small) = (s.list_large, s.list_small);
    let facts = large * (PROGRESS + 4);
    writeln!(
        log,
        "\n[open] Archive::open (read-only, as `reel runs` opens it) of {large} runs \
         ({facts} facts) after a clean close vs {small} runs"
    )?;
    let large_dir = tmp("reel-bench-open-large-")?;
    let small_dir = tmp("reel-bench-open-small-")?;
    let t = std::time::Instant::now();
    // Built, then dropped: the last handle's drop is the clean close.
    drop(list::build_with(large_dir.path(), large, PROGRESS)?);
    drop(list::build_with(small_dir.path(), small, PROGRESS)?);
    writeln!(
        log,
        "  built both archives in {:.1} s (untimed)",
        t.elapsed().as_secs_f64()
    )?;
    let open = |dir: &std::path::Path| -> io::Result<f64> {
        let t = std::time::Instant::now();
        let archive = list::open_read_only(dir)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        drop(archive);
        Ok(ms)
    };
    let mut pairs = Pairs::default();
    for round in 0..rounds {
        let (mut l, mut sm) = (0.0, 0.0);
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                l = open(large_dir.path())?;
            } else {
                sm = open(small_dir.path())?;
            }
        }
        pairs.push(l, sm);
        writeln!(
            log,
            "  round {}: {large} runs {l:.2} ms, {small} runs {sm:.2} ms",
            round + 1
        )?;
    }
    rows.push(pairs.row(
        "open",
        &format!("open after a clean close, {large} runs ({facts} facts)"),
        &format!("{small} runs"),
        Unit::Millis,
        Target::Under(100.0),
    ));
    Ok(())
}

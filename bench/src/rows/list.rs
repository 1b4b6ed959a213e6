//! The `list` row: listing runs of a large archive against a small one.

use crate::*;

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
    Ok(())
}

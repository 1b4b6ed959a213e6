//! The `overview` row: the tools overview of a large archive (every run,
//! 30 time buckets) from the runs' stored summaries, against the same
//! overview from every run's facts (what it would cost without them).

use std::hint::black_box;

use reel::summary::{Overview, OverviewQuery, SummaryBuilder};
use reel_archive::{Archive, RunFilter};

use crate::*;

/// Buckets, as the console's charts.
const BUCKETS: u32 = 30;

/// The overview from every run's facts.
fn from_facts(archive: &Archive) -> io::Result<Overview> {
    let mut summaries = Vec::new();
    let ids: Vec<String> = archive
        .run_ids()
        .collect::<Result<_, _>>()
        .map_err(io::Error::other)?;
    for id in ids {
        let record = archive.run(&id).map_err(io::Error::other)?;
        let mut b = SummaryBuilder::default();
        for fact in archive.facts(&id, ..).map_err(io::Error::other)? {
            b.observe(&fact.map_err(io::Error::other)?);
        }
        summaries.push(b.finish(&record));
    }
    let query = OverviewQuery {
        buckets: BUCKETS,
        ..OverviewQuery::default()
    };
    Ok(Overview::build(&query, &summaries))
}

/// Measures the `overview` row.
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        s,
        rounds,
        tmp,
        log,
        rows,
        ..
    } = b;
    let n = s.list_large;
    let dir = tmp("reel-bench-overview-")?;
    let t = std::time::Instant::now();
    let archive = list::build(dir.path(), n)?;
    writeln!(
        log,
        "\n[overview] Archive::overview (every run, {BUCKETS} buckets) over {n} runs from their \
         summaries, vs from their facts; archive built in {:.1} s (untimed)",
        t.elapsed().as_secs_f64()
    )?;
    let mut pairs = Pairs::default();
    for round in 0..rounds {
        let (mut summed, mut read) = (0.0, 0.0);
        for side in [round % 2, 1 - round % 2] {
            let t = std::time::Instant::now();
            let o = if side == 0 {
                archive
                    .overview(&RunFilter::default(), BUCKETS)
                    .map_err(io::Error::other)?
            } else {
                from_facts(&archive)?
            };
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if o.runs != n as u64 {
                return Err(io::Error::other(format!(
                    "the overview counted {} runs of {n}",
                    o.runs
                )));
            }
            black_box(o);
            if side == 0 {
                summed = ms;
            } else {
                read = ms;
            }
        }
        writeln!(
            log,
            "  round {}: from summaries {summed:.1} ms, from facts {read:.1} ms",
            round + 1
        )?;
        pairs.push(summed, read);
    }
    rows.push(pairs.row(
        "overview",
        &format!("overview: tools overview of {n} runs (Archive::overview, {BUCKETS} buckets)"),
        "the same from every run's facts",
        Unit::Millis,
        Target::Under(200.0),
    ));
    Ok(())
}

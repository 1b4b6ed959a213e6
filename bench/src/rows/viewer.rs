//! The `viewer` rows.

use crate::*;

/// The `viewer` rows (see [`viewer`]).
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        s,
        rounds,
        tmp,
        log,
        rows,
        ..
    } = b;
    let bin = viewer::reel_binary()?;
    let config = tmp("reel-bench-viewer-config-")?;
    let big_dir = tmp("reel-bench-show-big-")?;
    let small_dir = tmp("reel-bench-show-small-")?;
    let t = std::time::Instant::now();
    let facts = viewer::build_run(big_dir.path(), "big", s.show_facts)?;
    let small = viewer::build_run(small_dir.path(), "small", viewer::FACTS_PER_CALL)?;
    let (stored, _) = record::disk_usage(big_dir.path())?;
    writeln!(
        log,
        "\n[viewer] the real reel binary ({}, {}); `reel show` of a {facts}-fact run ({:.1} MB on disk; built in {:.1} s, untimed) \
         until its first line reaches the pipe, vs the same of a {small}-fact run in an archive of its own; \
         per round each side's fastest of {} spawns (alternating), then medians over rounds",
        bin.path.display(),
        bin.how,
        stored as f64 / 1e6,
        t.elapsed().as_secs_f64(),
        viewer::SPAWNS
    )?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut show = Pairs::default();
    let mut first = String::new();
    for round in 0..rounds {
        // Each side's fastest of SPAWNS within the round: a process start
        // on this shared machine waits for a core now and then.
        let (mut b, mut sm, mut start) = (Duration::MAX, Duration::MAX, Duration::MAX);
        for spawn in 0..viewer::SPAWNS {
            for side in [(round + spawn) % 2, 1 - (round + spawn) % 2] {
                if side == 0 {
                    let (t, line) =
                        viewer::show_first_line(&bin.path, big_dir.path(), config.path(), "big")?;
                    (b, first) = (b.min(t), line);
                } else {
                    let (t, _) = viewer::show_first_line(
                        &bin.path,
                        small_dir.path(),
                        config.path(),
                        "small",
                    )?;
                    sm = sm.min(t);
                }
            }
            start = start.min(viewer::version(&bin.path, config.path())?);
        }
        writeln!(
            log,
            "  round {}: first line after {:.1} ms ({facts} facts), {:.1} ms ({small} facts); `reel --version` {:.1} ms",
            round + 1,
            ms(b),
            ms(sm),
            ms(start)
        )?;
        show.push(ms(b), ms(sm));
    }
    writeln!(log, "  the first line: {first}")?;
    let (whole, lines) = viewer::show_whole(&bin.path, big_dir.path(), config.path(), "big")?;
    writeln!(
        log,
        "  (for information: the whole run, {lines} lines, in {:.2} s)",
        whole.as_secs_f64()
    )?;
    drop(big_dir);

    let n = s.runs_count;
    let few_dir = tmp("reel-bench-runs-few-")?;
    let many_dir = tmp("reel-bench-runs-many-")?;
    let t = std::time::Instant::now();
    drop(list::build(few_dir.path(), n)?);
    drop(list::build_with(many_dir.path(), n, s.runs_progress)?);
    let (few_b, _) = record::disk_usage(few_dir.path())?;
    let (many_b, _) = record::disk_usage(many_dir.path())?;
    let many_facts = 4 + s.runs_progress;
    writeln!(
        log,
        "\n[viewer] `reel runs` (first page of 50) until it exits: {n} runs of {many_facts} facts ({:.1} MB on disk) \
         vs {n} runs of 4 facts ({:.1} MB); built in {:.1} s (untimed)",
        many_b as f64 / 1e6,
        few_b as f64 / 1e6,
        t.elapsed().as_secs_f64()
    )?;
    let mut runs = Pairs::default();
    for round in 0..rounds {
        let (mut m, mut f) = (Duration::MAX, Duration::MAX);
        let (mut ml, mut fl) = (0, 0);
        for spawn in 0..viewer::SPAWNS {
            for side in [(round + spawn) % 2, 1 - (round + spawn) % 2] {
                if side == 0 {
                    let (t, lines) = viewer::runs(&bin.path, many_dir.path(), config.path())?;
                    (m, ml) = (m.min(t), lines);
                } else {
                    let (t, lines) = viewer::runs(&bin.path, few_dir.path(), config.path())?;
                    (f, fl) = (f.min(t), lines);
                }
            }
        }
        writeln!(
            log,
            "  round {}: {many_facts} facts per run {:.1} ms ({ml} lines), 4 facts per run {:.1} ms ({fl} lines)",
            round + 1,
            ms(m),
            ms(f)
        )?;
        runs.push(ms(m), ms(f));
    }
    rows.extend([
        show.row(
            "viewer",
            &format!("viewer: `reel show` time to first line, {facts}-fact run"),
            &format!("the same, {small}-fact run"),
            Unit::Millis,
            Target::Under(50.0),
        ),
        runs.row(
            "viewer",
            &format!("viewer: `reel runs` on {n} runs of {many_facts} facts, until exit"),
            &format!("{n} runs of 4 facts"),
            Unit::Millis,
            Target::Within(1.25),
        ),
    ]);
    Ok(())
}

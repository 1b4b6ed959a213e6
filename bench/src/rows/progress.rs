//! The `progress` row: `ctx.progress()` against a bare channel send.

use crate::*;

/// Measures the rows of this module that `opts` asks for.
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        s,
        rounds,
        rt,
        tmp,
        log,
        rows,
        ..
    } = b;
    let n = s.progress_calls;
    let clock = progress::Clock::calibrate();
    writeln!(
        log,
        "\n[progress] {n} calls per round, timed with the TSC ({:.3} ns/tick, timer overhead {:.1} ns subtracted) in groups of {}: \
         median from groups timed whole, p99 from calls timed alone; \
         baseline: tokio::sync::mpsc unbounded send of the same payload",
        clock.ns_per_tick,
        clock.overhead_ns(),
        progress::GROUP
    )?;
    let mut med = Pairs::default();
    let mut p99 = Pairs::default();
    for round in 0..rounds {
        let mut reel_c = None;
        let mut base_c = None;
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let dir = tmp("reel-bench-progress-")?;
                reel_c = Some(rt.block_on(progress::reel(dir.path(), n, clock))?);
            } else {
                base_c = Some(rt.block_on(progress::mpsc(n, clock))?);
            }
        }
        let (r, b) = (reel_c.expect("ran"), base_c.expect("ran"));
        med.push(r.median(), b.median());
        p99.push(r.p99(), b.p99());
        writeln!(
            log,
            "  round {}: progress() median {:.1} ns, p99 {:.0} ns; mpsc send median {:.1} ns, p99 {:.0} ns",
            round + 1,
            r.median(),
            r.p99(),
            b.median(),
            b.p99()
        )?;
    }
    // For information: the same sends with a receiver that works as the
    // writer does (busy 1 us per message), so that the channel grows
    // and the other core is busy.
    let mut lag_p99 = Vec::new();
    for _ in 0..rounds.min(3) {
        let c = rt.block_on(progress::mpsc_lagging(n, clock, Duration::from_micros(1)))?;
        lag_p99.push((c.median(), c.p99()));
    }
    writeln!(
        log,
        "  (for information: mpsc send with a receiver busy 1 us per message, as the writer is: median {:.1} ns, p99 {:.0} ns)",
        median(&lag_p99.iter().map(|c| c.0).collect::<Vec<_>>()),
        median(&lag_p99.iter().map(|c| c.1).collect::<Vec<_>>()),
    )?;
    let (tick, two_reads) = progress::envelope_clocks(clock, n);
    writeln!(
        log,
        "  (for information: the envelope's one clock read on the tool's thread, a quanta tick, costs {tick:.1} ns here; SystemTime::now + Instant::elapsed would cost {two_reads:.1} ns)",
    )?;
    rows.push(med.row(
        "progress",
        "progress: cost of one ctx.progress() on the tool's thread, median",
        "tokio mpsc send",
        Unit::Nanos,
        Target::AtMost(1.5),
    ));
    rows.push(p99.row(
        "progress",
        "progress: the same, p99",
        "tokio mpsc send",
        Unit::Nanos,
        Target::AtMost(1.5),
    ));
    Ok(())
}

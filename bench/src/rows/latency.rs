//! The `latency` row: one durable call against writing its bytes and
//! `sync_data`.

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
    let n = s.latency_calls;
    writeln!(
        log,
        "\n[latency] {n} calls of the agent tool one after the other in one run, each timed from invoke \
         until its result is handed back (durable: call-boundary durability); baseline: {n} times the bytes \
         one such call encodes to, written and fsynced (sync_data) on the same disk"
    )?;
    let mut p50 = Pairs::default();
    let mut p99 = Pairs::default();
    let mut buffered = Vec::new();
    for round in 0..rounds {
        let dir = tmp("reel-bench-latency-")?;
        // For information: the same calls with buffered durability
        // (no flush waited for): what a call costs without durability.
        let b = rt.block_on(agent::latency_buffered(&dir.path().join("buffered"), n))?;
        buffered.push(agent::quantile_us(&b, 0.5));
        let mut reel_l = None;
        let mut base_l = None;
        let mut bytes = 0;
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let (l, b) = rt.block_on(agent::latency_reel(&dir.path().join("archive"), n))?;
                bytes = b;
                reel_l = Some(l);
            } else {
                // The same size as reel's side measures; before reel
                // has run once, its figure from a dry encoding.
                if bytes == 0 {
                    bytes = agent::call_bytes()?;
                }
                base_l = Some(agent::latency_fsync(
                    &dir.path().join("fsync.bin"),
                    bytes,
                    n,
                )?);
            }
        }
        let (r, b) = (reel_l.expect("ran"), base_l.expect("ran"));
        let (r50, r99) = (agent::quantile_us(&r, 0.5), agent::quantile_us(&r, 0.99));
        let (b50, b99) = (agent::quantile_us(&b, 0.5), agent::quantile_us(&b, 0.99));
        p50.push(r50, b50);
        p99.push(r99, b99);
        writeln!(
            log,
            "  round {}: a call p50 {r50:.0} us, p99 {r99:.0} us; write+fsync of {bytes} B p50 {b50:.0} us, p99 {b99:.0} us",
            round + 1
        )?;
    }
    writeln!(
        log,
        "  (for information: the same calls with buffered durability, no flush waited for: p50 {:.0} us)",
        median(&buffered)
    )?;
    rows.push(p50.row(
        "latency",
        "latency a call pays for call-boundary durability, p50",
        "one fsync of the same bytes",
        Unit::Micros,
        Target::AtMost(1.5),
    ));
    rows.push(p99.row(
        "latency",
        "latency a call pays for call-boundary durability, p99",
        "one fsync of the same bytes",
        Unit::Micros,
        Target::Reported,
    ));
    Ok(())
}

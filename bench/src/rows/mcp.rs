//! The `mcp-record` and `mcp-serve` rows.

use crate::*;

/// The `mcp-record` and `mcp-serve` rows (see [`mcp`]), each when `opts`
/// asks for it.
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        opts,
        rt,
        tmp,
        log,
        rows,
        ..
    } = b;
    let programs = mcp::Programs {
        bench: match &opts.bench_exe {
            Some(p) => p.clone(),
            None => std::env::current_exe()?,
        },
        proxy: match &opts.reel_exe {
            Some(p) => mcp::ProxyBin::Reel(p.clone()),
            None => mcp::ProxyBin::InBench,
        },
        dir: tmp("reel-bench-mcp-")?.keep(),
    };
    let result = measure_with(opts, rt, &programs, log, rows);
    if !opts.keep {
        let _ = std::fs::remove_dir_all(&programs.dir);
    }
    result
}

/// The MCP rows, with their programs and a directory for them.
fn measure_with(
    opts: &Options,
    rt: &tokio::runtime::Runtime,
    programs: &mcp::Programs,
    log: &mut dyn Write,
    rows: &mut Vec<Row>,
) -> io::Result<()> {
    use mcp::Side;
    let shape = opts.sizes.mcp;
    let mut n = 0;
    // One side's figures in one round: sequential call times, calls/s
    // with `inflight` in flight. A new session (process) per side per
    // round; its start (spawn, initialize, tools/list) and a warm-up of
    // a few calls are untimed.
    let mut measure = |side: Side| -> io::Result<(Vec<Duration>, f64)> {
        n += 1;
        rt.block_on(async {
            let session = programs.connect(side, n).await?;
            session.sequential(shape.sequential.min(20)).await?;
            let took = session.sequential(shape.sequential).await?;
            let rate = session.concurrent(shape.concurrent, shape.inflight).await?;
            session.close().await?;
            Ok((took, rate))
        })
    };
    if opts.wants("mcp-record") {
        record_row(opts, programs, log, rows, &mut measure)?;
    }
    if opts.wants("mcp-serve") {
        serve_row(opts, log, rows, &mut measure)?;
    }
    Ok(())
}

/// One side's figures in one round (see [`measure_with`]).
type Measure<'a> = dyn FnMut(mcp::Side) -> io::Result<(Vec<Duration>, f64)> + 'a;

/// The `mcp-record` row.
fn record_row(
    opts: &Options,
    programs: &mcp::Programs,
    log: &mut dyn Write,
    rows: &mut Vec<Row>,
    measure: &mut Measure<'_>,
) -> io::Result<()> {
    use mcp::Side;
    let shape = opts.sizes.mcp;
    let rounds = opts.sizes.rounds.max(1);
    let proxy = match &programs.proxy {
        mcp::ProxyBin::Reel(p) => format!("`{} mcp record` (the reel binary)", p.display()),
        mcp::ProxyBin::InBench => "`reel-bench --mcp-record` (no reel binary given or found: \
            the library entry point `reel mcp record` calls, in its own process)"
            .to_owned(),
    };
    writeln!(
        log,
        "\n[mcp-record] an rmcp client (2025-11-25, stdio) calling `{}` ({} B of text back and forth) \
         on a plain rmcp server process, through {proxy} recording into an archive, against the same \
         client and server directly; per side per round: {} calls one after the other (p50, p99), \
         then {} calls with {} in flight (calls/s)",
        mcp::TOOL,
        mcp::TEXT_BYTES,
        shape.sequential,
        shape.concurrent,
        shape.inflight
    )?;
    let mut p50 = Pairs::default();
    let mut p99 = Pairs::default();
    let mut rate = Pairs::default();
    let mut relay = Pairs::default();
    for round in 0..rounds {
        // For information, beside the pair: a bare byte relay process
        // in front of the same server (the floor of any stdio proxy).
        let (relay_took, relay_rate) = measure(Side::Relayed)?;
        relay.push(mcp::quantile_us(&relay_took, 0.5), relay_rate);
        let mut proxied = None;
        let mut direct = None;
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                proxied = Some(measure(Side::Proxied)?);
            } else {
                direct = Some(measure(Side::Direct)?);
            }
        }
        let ((pt, pr), (dt, dr)) = (proxied.expect("ran"), direct.expect("ran"));
        let (p5, p9) = (mcp::quantile_us(&pt, 0.5), mcp::quantile_us(&pt, 0.99));
        let (d5, d9) = (mcp::quantile_us(&dt, 0.5), mcp::quantile_us(&dt, 0.99));
        p50.push(p5, d5);
        p99.push(p9, d9);
        rate.push(pr, dr);
        writeln!(
            log,
            "  round {}: through the proxy p50 {p5:.0} us, p99 {p9:.0} us, {pr:.0} calls/s; \
             direct p50 {d5:.0} us, p99 {d9:.0} us, {dr:.0} calls/s",
            round + 1
        )?;
    }
    writeln!(
        log,
        "  (for information: a bare byte relay process in front of the same server, no parse, no \
         recording: p50 {:.0} us, {:.0} calls/s with {} in flight: the price of one more process in the path)",
        median(&relay.reel),
        median(&relay.base),
        shape.inflight
    )?;
    let baseline = "the same client and server, directly";
    rows.push(p50.row(
        "mcp-record",
        "MCP: tools/call round trip through `reel mcp record`, p50",
        baseline,
        Unit::Micros,
        Target::AtMost(1.2),
    ));
    rows.push(p99.row(
        "mcp-record",
        "MCP: the same round trip, p99",
        baseline,
        Unit::Micros,
        Target::Reported,
    ));
    rows.push(rate.row(
        "mcp-record",
        &format!(
            "MCP: tools/call/s through `reel mcp record`, {} in flight",
            shape.inflight
        ),
        baseline,
        Unit::CallsPerSec,
        Target::AtLeast(0.8),
    ));
    Ok(())
}

/// The `mcp-serve` row.
fn serve_row(
    opts: &Options,
    log: &mut dyn Write,
    rows: &mut Vec<Row>,
    measure: &mut Measure<'_>,
) -> io::Result<()> {
    use mcp::Side;
    let shape = opts.sizes.mcp;
    let rounds = opts.sizes.rounds.max(1);
    writeln!(
        log,
        "\n[mcp-serve] the same client calling `{}` on reel's McpHost (stdio, every call recorded, \
         the recorder's defaults: call-boundary durability) against a plain rmcp server with the \
         same tool body and no recording; per side per round: {} calls with {} in flight (calls/s), \
         and {} one after the other",
        mcp::TOOL,
        shape.concurrent,
        shape.inflight,
        shape.sequential
    )?;
    let mut rate = Pairs::default();
    let mut seq = Pairs::default();
    let mut buffered = Pairs::default();
    let mut buffered_rate = Pairs::default();
    for round in 0..rounds {
        // The same host with buffered durability (what the durable flush
        // costs), against the round's plain server.
        let (bt, br) = measure(Side::ServedBuffered)?;
        let mut served = None;
        let mut plain = None;
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                served = Some(measure(Side::Served)?);
            } else {
                plain = Some(measure(Side::Direct)?);
            }
        }
        let ((st, sr), (pt, pr)) = (served.expect("ran"), plain.expect("ran"));
        let (ss, ps) = (rate_of(&st), rate_of(&pt));
        rate.push(sr, pr);
        seq.push(ss, ps);
        buffered.push(br, rate_of(&bt));
        buffered_rate.push(br, pr);
        writeln!(
            log,
            "  round {}: reel {sr:.0} calls/s ({} in flight), {ss:.0} calls/s one after the other \
             (p50 {:.0} us); plain {pr:.0} calls/s, {ps:.0} calls/s one after the other (p50 {:.0} us)",
            round + 1,
            shape.inflight,
            mcp::quantile_us(&st, 0.5),
            mcp::quantile_us(&pt, 0.5),
        )?;
    }
    writeln!(
        log,
        "  (for information: the same host with buffered durability, no flush per call: {:.0} calls/s \
         with {} in flight, {:.0} calls/s one after the other)",
        median(&buffered.reel),
        shape.inflight,
        median(&buffered.base)
    )?;
    let baseline = "the same tool body, plain rmcp server, no recording";
    rows.push(rate.row(
        "mcp-serve",
        &format!(
            "MCP: served reel tools, tools/call/s, {} in flight",
            shape.inflight
        ),
        baseline,
        Unit::CallsPerSec,
        Target::AtLeast(0.5),
    ));
    rows.push(buffered_rate.row(
        "mcp-serve",
        &format!(
            "MCP: served reel tools, buffered durability, tools/call/s, {} in flight",
            shape.inflight
        ),
        baseline,
        Unit::CallsPerSec,
        Target::AtLeast(0.8),
    ));
    rows.push(seq.row(
        "mcp-serve",
        "MCP: served reel tools, tools/call/s one after the other",
        baseline,
        Unit::CallsPerSec,
        Target::Reported,
    ));
    Ok(())
}

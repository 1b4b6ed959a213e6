//! The `mcp-http` row (see [`mcp_http`]).

use crate::*;

/// The `mcp-http` row: `tools/call` over one kept-alive HTTP connection
/// through `reel mcp record --listen`, against the same server directly.
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        opts,
        rounds,
        tmp,
        log,
        rows,
        ..
    } = b;
    let bin = viewer::reel_binary()?;
    let bench = match &opts.bench_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    let n = opts.sizes.mcp.sequential;
    writeln!(
        log,
        "\n[mcp-http] one kept-alive HTTP/1.1 connection (TCP_NODELAY) calling `{}` ({} B of text back \
         and forth) on a plain rmcp server over streamable HTTP (stateless, JSON answers), through \
         `{} mcp record --listen` ({}) recording into an archive, against the same client and server \
         directly; per side per round: a new connection, initialize and 20 calls untimed, then {n} \
         calls one after the other (p50, p99, calls/s)",
        mcp::TOOL,
        mcp::TEXT_BYTES,
        bin.path.display(),
        bin.how
    )?;
    let upstream = mcp_http::upstream(&bench)?;
    let relay = mcp_http::relay(&bench, &upstream.url)?;
    let (mut p50, mut p99, mut rate) = (Pairs::default(), Pairs::default(), Pairs::default());
    let mut over_relay = Pairs::default();
    // One side's calls on a fresh connection to `url`.
    let side = |url: &str| -> io::Result<Vec<Duration>> {
        let mut client = mcp_http::KeptAlive::open(url)?;
        for _ in 0..20 {
            client.call()?;
        }
        (0..n).map(|_| client.call()).collect()
    };
    for round in 0..rounds {
        let dir = tmp("reel-bench-mcp-http-")?;
        let proxy = mcp_http::proxy(&bin.path, &dir.path().join("archive"), &upstream.url)?;
        let (mut proxied, mut direct, mut relayed) = (Vec::new(), Vec::new(), Vec::new());
        for which in [round % 3, (round + 1) % 3, (round + 2) % 3] {
            match which {
                0 => proxied = side(&proxy.url)?,
                1 => direct = side(&upstream.url)?,
                _ => relayed = side(&relay.url)?,
            }
        }
        drop(proxy);
        let (p5, p9) = (
            mcp::quantile_us(&proxied, 0.5),
            mcp::quantile_us(&proxied, 0.99),
        );
        let (d5, d9) = (
            mcp::quantile_us(&direct, 0.5),
            mcp::quantile_us(&direct, 0.99),
        );
        let (pr, dr) = (rate_of(&proxied), rate_of(&direct));
        let r5 = mcp::quantile_us(&relayed, 0.5);
        p50.push(p5, d5);
        over_relay.push(p5, r5);
        p99.push(p9, d9);
        rate.push(pr, dr);
        writeln!(
            log,
            "  round {}: through the proxy p50 {p5:.0} us, p99 {p9:.0} us, {pr:.0} calls/s; \
             direct p50 {d5:.0} us, p99 {d9:.0} us, {dr:.0} calls/s; through a bare relay \
             p50 {r5:.0} us",
            round + 1
        )?;
    }
    let baseline = "the same client, connection shape and server, directly";
    rows.push(p50.row(
        "mcp-http",
        "MCP over HTTP: tools/call round trip through `reel mcp record --listen`, one kept-alive connection, p50",
        baseline,
        Unit::Micros,
        Target::AtMost(1.2),
    ));
    rows.push(over_relay.row(
        "mcp-http",
        "MCP over HTTP: the same round trip, against the floor of any HTTP proxy (a bare hyper relay, \
         one upstream connection per client connection, nothing parsed or recorded)",
        "the same client and server through the bare relay",
        Unit::Micros,
        Target::Reported,
    ));
    rows.push(p99.row(
        "mcp-http",
        "MCP over HTTP: the same round trip, p99",
        baseline,
        Unit::Micros,
        Target::Reported,
    ));
    rows.push(rate.row(
        "mcp-http",
        "MCP over HTTP: tools/call/s through `reel mcp record --listen`, one kept-alive connection",
        baseline,
        Unit::CallsPerSec,
        Target::AtLeast(0.8),
    ));
    Ok(())
}

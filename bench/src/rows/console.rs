//! The `console` rows (see [`console`]).

use crate::*;

/// The `console` rows: runs table, first screen, memory under clients.
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
    let config = tmp("reel-bench-console-config-")?;
    let runs_dir = tmp("reel-bench-console-runs-")?;
    let big_dir = tmp("reel-bench-console-big-")?;
    let n = s.console_runs;
    let t = std::time::Instant::now();
    drop(list::build_with(runs_dir.path(), n, s.runs_progress)?);
    let facts = viewer::build_run(big_dir.path(), "big", s.show_facts)?;
    writeln!(
        log,
        "\n[console] the real reel binary ({}, {}); {n} runs of {} facts, and a {facts}-fact run, \
         built in {:.1} s (untimed); each round starts a fresh `reel serve` per side (untimed)",
        bin.path.display(),
        bin.how,
        4 + s.runs_progress,
        t.elapsed().as_secs_f64()
    )?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (cfg, runs_path, big_path) = (config.path(), runs_dir.path(), big_dir.path());

    // The runs table's first page, a fresh server's first answer.
    let mut table = Pairs::default();
    for round in 0..rounds {
        let (mut page, mut cli, mut warm, mut filtered, mut tools) = (0.0, 0.0, 0.0, 0.0, 0.0);
        let mut bytes = 0;
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let served = console::serve(&bin.path, runs_path, cfg)?;
                let (t, b) = console::get(&served.addr, "/")?;
                (page, bytes) = (ms(t), b);
                warm = ms(console::get(&served.addr, "/")?.0);
                filtered = ms(console::get(&served.addr, "/?principal=user-5&anomaly=1")?.0);
                tools = ms(console::get(&served.addr, "/tools")?.0);
            } else {
                cli = ms(console::runs_json(&bin.path, runs_path, cfg)?);
            }
        }
        writeln!(
            log,
            "  round {}: GET / {page:.1} ms ({bytes} bytes; again {warm:.1} ms; \
             principal + has-anomaly {filtered:.1} ms; GET /tools {tools:.1} ms), \
             `reel runs --json` {cli:.1} ms",
            round + 1
        )?;
        table.push(page, cli);
    }

    // A huge run's first screen, a fresh server's first look.
    let mut screen = Pairs::default();
    for round in 0..rounds {
        let (mut page, mut show) = (0.0, 0.0);
        let mut bytes = 0;
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let served = console::serve(&bin.path, big_path, cfg)?;
                let (t, b) = console::get(&served.addr, "/runs/big")?;
                (page, bytes) = (ms(t), b);
            } else {
                show = ms(viewer::show_first_line(&bin.path, big_path, cfg, "big")?.0);
            }
        }
        writeln!(
            log,
            "  round {}: GET /runs/big {page:.1} ms ({bytes} bytes), `reel show big` first line {show:.1} ms",
            round + 1
        )?;
        screen.push(page, show);
    }

    // Peak RSS under many clients at once, against one.
    let (clients, requests) = (s.console_clients, s.console_requests);
    let mut memory = Pairs::default();
    for round in 0..rounds {
        let (mut many, mut one) = (0.0, 0.0);
        for side in [round % 2, 1 - round % 2] {
            let c = if side == 0 { clients } else { 1 };
            let (peak, answered) = console::weigh(&bin.path, runs_path, cfg, n, c, requests)?;
            let mb = peak as f64 / 1e6;
            if side == 0 {
                many = mb;
            } else {
                one = mb;
            }
            writeln!(
                log,
                "  round {}: {c} client(s) x {requests} requests ({answered} answered): peak RSS {mb:.1} MB",
                round + 1
            )?;
        }
        memory.push(many, one);
    }
    rows.extend([
        table.row(
            "console",
            &format!("console: runs table first page (GET /, fresh server), {n} runs"),
            "`reel runs --json` on the same archive",
            Unit::Millis,
            Target::AtMost(1.0),
        ),
        screen.row(
            "console",
            &format!("console: first screen of a {facts}-fact run (GET /runs/big, fresh server)"),
            "`reel show` of it, first line",
            Unit::Millis,
            Target::Reported,
        ),
        memory.row(
            "console",
            &format!("console: peak RSS of `reel serve`, {clients} concurrent clients"),
            "one client, a server of its own",
            Unit::Megabytes,
            Target::Reported,
        ),
    ]);
    Ok(())
}

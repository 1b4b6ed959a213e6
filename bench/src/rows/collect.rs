//! The `collect` row: OTLP spans taken in and written as runs, against the
//! same spans as JSON Lines with the same group commit.

use crate::*;

/// Measures the `collect` row.
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        s,
        rounds,
        tmp,
        log,
        rows,
        ..
    } = b;
    let shape = s.collect;
    let bodies = collect::requests(shape);
    let spans = shape.spans();
    writeln!(
        log,
        "\n[collect] {} traces x {} tool calls (a model span and a tool span each, content captured) \
         = {} spans in {} protobuf requests of up to 512; baseline: the same spans decoded and \
         written as JSON Lines, one fsync per trace (reel: one flush per run)",
        shape.traces,
        shape.calls,
        spans,
        bodies.len()
    )?;
    let mut pairs = Pairs::default();
    for round in 0..rounds {
        let reel_dir = tmp("reel-bench-collect-")?;
        let plain_dir = tmp("reel-bench-collect-jsonl-")?;
        let path = plain_dir.path().join("spans.jsonl");
        let mut r = None;
        let mut p = None;
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                r = Some(collect::reel(reel_dir.path(), &bodies, spans)?);
            } else {
                p = Some(collect::jsonl(&path, &bodies, spans)?);
            }
        }
        let (r, p) = (r.expect("ran"), p.expect("ran"));
        pairs.push(r.rate(), p.rate());
        writeln!(
            log,
            "  round {}: reel {}, JSON Lines {}",
            round + 1,
            Unit::SpansPerSec.show(r.rate()),
            Unit::SpansPerSec.show(p.rate()),
        )?;
    }
    rows.push(pairs.row(
        "collect",
        "collect: OTLP spans taken in and written as runs, spans/s",
        "the same spans decoded, as JSON Lines, same group commit",
        Unit::SpansPerSec,
        Target::AtLeast(1.0),
    ));
    Ok(())
}

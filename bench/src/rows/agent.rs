//! The `agent` row: the agent workload against the same facts as JSON
//! Lines.

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
    let shape = s.agent;
    writeln!(
        log,
        "\n[agent] {} concurrent runs x {} calls; per call args ~2 KiB, 3 effects with 4 KiB JSON bodies, \
         2 progress reports, 1 log, a result of 8 KiB (1 call in {} returns 256 KiB, which spills to an artifact) \
         = {} facts; baseline: the same facts as JSON Lines, the same group commit",
        shape.runs,
        shape.calls,
        shape.big_every,
        shape.facts()
    )?;
    let mut pairs = Pairs::default();
    let mut sizes = Pairs::default();
    for round in 0..rounds {
        let reel_dir = tmp("reel-bench-agent-")?;
        let plain_dir = tmp("reel-bench-agent-jsonl-")?;
        let path = plain_dir.path().join("facts.jsonl");
        let mut reel_rec = None;
        let mut base_rec = None;
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let (r, archive) = rt.block_on(agent::reel(reel_dir.path(), shape))?;
                drop(archive);
                reel_rec = Some(r);
            } else {
                base_rec = Some(agent::jsonl(&path, shape)?);
            }
        }
        let (r, b) = (reel_rec.expect("ran"), base_rec.expect("ran"));
        pairs.push(r.rate(), b.rate());
        let (a_du, _) = record::disk_usage(reel_dir.path())?;
        let (p_du, _) = record::disk_usage(&path)?;
        let n = r.facts as f64;
        sizes.push(a_du as f64 / n, p_du as f64 / n);
        writeln!(
            log,
            "  round {}: reel {}, JSON Lines {} | on disk: archive {}, JSON Lines {}",
            round + 1,
            Unit::FactsPerSec.show(r.rate()),
            Unit::FactsPerSec.show(b.rate()),
            Unit::BytesPerFact.show(a_du as f64 / n),
            Unit::BytesPerFact.show(p_du as f64 / n),
        )?;
    }
    rows.push(pairs.row(
        "agent",
        "record, agent workload: facts/s, call-boundary durability",
        "the same facts as JSON Lines, same group commit",
        Unit::FactsPerSec,
        Target::AtLeast(1.0),
    ));
    writeln!(
        log,
        "  (for information: on disk per fact, archive {} vs JSON Lines {}, ratio {:.2})",
        Unit::BytesPerFact.show(median(&sizes.reel)),
        Unit::BytesPerFact.show(median(&sizes.base)),
        median(&sizes.reel) / median(&sizes.base)
    )?;
    Ok(())
}

//! The `tripwire` row.

#[allow(unused_imports)]
use crate::*;

/// Measures the rows of this module that `opts` asks for, into `rows`.
pub(crate) fn rows(
    opts: &Options,
    rt: &tokio::runtime::Runtime,
    tmp: Tmp<'_>,
    log: &mut dyn Write,
    rows: &mut Vec<Row>,
) -> io::Result<()> {
    let s = &opts.sizes;
    let rounds = opts.sizes.rounds.max(1);
    // ---- tripwire --------------------------------------------------------
    if opts.wants("tripwire") {
        let shape = s.shape;
        writeln!(
            log,
            "\n[tripwire] the record row's workload ({} facts) with a declared secret per run: \
             the tripwire on (the default) vs off, alternating",
            shape.facts()
        )?;
        let mut wire = Pairs::default();
        for round in 0..rounds {
            let (mut on, mut off) = (0.0, 0.0);
            for side in [round % 2, 1 - round % 2] {
                let dir = tmp("reel-bench-tripwire-")?;
                let config = RecorderConfig {
                    tripwire: side == 0,
                    ..record::recorder_config()
                };
                let (r, _) = rt.block_on(record::reel_with(dir.path(), shape, config, true))?;
                if side == 0 {
                    on = r.rate();
                } else {
                    off = r.rate();
                }
            }
            wire.push(on, off);
            writeln!(
                log,
                "  round {}: tripwire on {}, off {} (ratio {:.3})",
                round + 1,
                Unit::FactsPerSec.show(on),
                Unit::FactsPerSec.show(off),
                on / off
            )?;
        }
        rows.push(wire.row(
            "tripwire",
            "tripwire: record facts/s with the tripwire on (a declared secret per run)",
            "the same, tripwire off",
            Unit::FactsPerSec,
            Target::AtLeast(0.9),
        ));
    }
    Ok(())
}

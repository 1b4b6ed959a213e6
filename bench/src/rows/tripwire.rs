//! The `tripwire` row.

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
            let (r, _) = rt.block_on(record::reel_with(
                dir.path(),
                shape,
                config,
                record::Declare::SecretPerRun,
            ))?;
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
    Ok(())
}

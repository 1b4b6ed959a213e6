//! The `replay` rows: matching over the tape's index, and end to end.

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
    let dir = tmp("reel-bench-replay-")?;
    let bytes = rt.block_on(replay::record_tape(
        dir.path(),
        s.replay_calls,
        s.replay_steps,
    ))?;
    let tools = replay::tools();
    writeln!(
        log,
        "\n[replay] one recorded run: {} calls x {} steps (progress, an effect every 8, a log every 16), tape {} KiB; \
         reel: facts matched per second by reel_replayer::replay over the tape's index (reading and indexing the tape untimed); \
         baseline: facts per second decoded by Tape::read of the same bytes, the tape freed \
         (replay() frees the facts it was given in its own time)",
        s.replay_calls,
        s.replay_steps,
        bytes.len() / 1024
    )?;
    let mut pairs = Pairs::default();
    let mut from_tape = Vec::new();
    for round in 0..rounds {
        let mut reel_rate = 0.0;
        let mut base_rate = 0.0;
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                // Replay is driven the way a test drives it: on a
                // current-thread runtime.
                let local = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let r = local.block_on(replay::replay_tape(&bytes, &tools))?;
                reel_rate = rate(r.matched as usize, r.replay);
                from_tape.push(rate(r.matched as usize, r.load + r.replay));
            } else {
                let (n, d) = replay::decode_tape(&bytes)?;
                base_rate = rate(n, d);
            }
        }
        pairs.push(reel_rate, base_rate);
        writeln!(
            log,
            "  round {}: replay() {} (reading the tape + replay() {}), Tape::read {}",
            round + 1,
            Unit::FactsPerSec.show(reel_rate),
            Unit::FactsPerSec.show(*from_tape.last().expect("pushed")),
            Unit::FactsPerSec.show(base_rate)
        )?;
    }
    rows.push(pairs.row(
        "replay",
        "replay: facts matched/s by replay() (recording loaded)",
        "Tape::read of the same tape, freed",
        Unit::FactsPerSec,
        Target::AtLeast(0.8),
    ));
    let end_to_end = Pairs {
        reel: from_tape,
        base: pairs.base.clone(),
    };
    rows.push(end_to_end.row(
        "replay",
        "replay, end to end: Tape::read + from_tape + replay(), facts/s",
        "Tape::read of the same tape, freed",
        Unit::FactsPerSec,
        Target::AtLeast(0.6),
    ));
    Ok(())
}

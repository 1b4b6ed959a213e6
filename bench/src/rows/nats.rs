//! The `nats` row: recording into a JetStream cluster against raw
//! async-nats publishes of the same blocks.

use crate::*;

/// Measures the rows of this module that `opts` asks for.
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        opts,
        s,
        rounds,
        log,
        rows,
        ..
    } = b;
    if let Some(urls) = &opts.nats {
        let mut pairs = Pairs::default();
        // Run ids unique to this bench run: the cluster keeps every run.
        let nonce = workload::unix_nanos();
        for round in 0..rounds {
            let tag = format!("bench{nonce}r{round}");
            // Reel first in every round (not alternating): the raw side
            // publishes the very blocks reel has just published.
            let c0 = nats::Cpu::now();
            let published = nats::reel(urls, &tag, s.shape, opts.workers.max(1))?;
            let c1 = nats::Cpu::now();
            let (raw, raw_cpu) = nats::raw(urls, &tag, &published, opts.workers.max(1))?;
            writeln!(
                log,
                "  nats round {round}: reel {} ({} facts, {} blocks, {} sent again while the previous was in process, in {:.3} s), raw async-nats {} ({} facts)",
                Unit::FactsPerSec.show(published.recorded.rate()),
                published.recorded.facts,
                published.last + 1 - published.first,
                published.retries,
                published.recorded.elapsed.as_secs_f64(),
                Unit::FactsPerSec.show(raw.rate()),
                raw.facts,
            )?;
            if let (Some(c0), Some(c1), Some(b)) = (c0, c1, raw_cpu) {
                // CPU seconds of each side, this process's and the
                // servers': where the cores went (reel's side includes
                // its connect and setup; the raw side is its timed part).
                let r = c1.since(c0);
                writeln!(
                    log,
                    "  nats round {round} cpu: reel side {:.2} s here + {:.2} s in nats-server; raw side {:.2} s here + {:.2} s in nats-server",
                    r.bench, r.servers, b.bench, b.servers
                )?;
            }
            pairs.push(published.recorded.rate(), raw.rate());
        }
        rows.push(pairs.row(
            "nats",
            "nats: facts/s into a 3-node JetStream cluster (R3), call-boundary durability",
            "raw async-nats publishes of the same blocks, same headers, same acks",
            Unit::FactsPerSec,
            Target::AtLeast(0.75),
        ));
    }
    Ok(())
}

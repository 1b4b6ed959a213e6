//! The compression figures printed with the `bytes` row: lz4 against zstd
//! on the same blocks.

use crate::*;

/// Prints the compression figures (with the `bytes` row).
pub(super) fn print(b: Bench<'_>) -> io::Result<()> {
    let Bench { s, log, .. } = b;
    writeln!(
        log,
        "\n[compression] the blocks of the record and agent workloads (each call's facts encoded, \
         before compression), compressed block by block"
    )?;
    for (name, blocks) in [
        ("record", record::workload_blocks(s.shape)?),
        ("agent", agent::workload_blocks(s.agent)?),
    ] {
        let (raw, codecs) = record::compression_survey(&blocks)?;
        for c in codecs {
            writeln!(
                log,
                "  {name}: {}: {:.3} of {} KiB raw; compress {:.0} MB/s, decompress {:.0} MB/s",
                c.name,
                c.bytes as f64 / raw as f64,
                raw / 1024,
                raw as f64 / 1e6 / c.compress.as_secs_f64(),
                raw as f64 / 1e6 / c.decompress.as_secs_f64(),
            )?;
        }
    }
    Ok(())
}

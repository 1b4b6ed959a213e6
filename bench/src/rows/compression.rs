//! The compression figures printed with the `bytes` row: lz4 against zstd
//! on the same blocks.

#[allow(unused_imports)]
use crate::*;

/// Prints the compression figures when `opts` asks for the `bytes` row.
pub(crate) fn print(opts: &Options, log: &mut dyn Write) -> io::Result<()> {
    let s = &opts.sizes;
    // ---- compression: lz4 against zstd on the same blocks -------------------
    if opts.wants("bytes") {
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
    }
    Ok(())
}

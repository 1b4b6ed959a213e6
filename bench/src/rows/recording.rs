//! The `record`, `record-fair`, `record-limit`, `tracing`, `bytes` and
//! `timeline` rows: one set of recordings, measured against each baseline.

use crate::*;

/// Measures the rows of this module that `opts` asks for.
pub(super) fn measure(b: Bench<'_>) -> io::Result<()> {
    let Bench {
        opts,
        s,
        rounds,
        rt,
        tmp,
        log,
        rows,
    } = b;
    let shape = s.shape;
    let with_plain = opts.wants("record") || opts.wants("bytes") || opts.wants("timeline");
    let with_fair = opts.wants("record-fair");
    let with_limit = opts.wants("record-limit");
    let with_tracing = opts.wants("tracing");
    writeln!(
        log,
        "\n[record] {} concurrent runs x {} calls x {} progress reports = {} facts per recording \
         (tokio runtime, {} workers; call-boundary durability)",
        shape.runs,
        shape.calls,
        shape.progress,
        shape.facts(),
        opts.workers
    )?;
    let mut record = Pairs::default();
    let mut tracing = Pairs::default();
    let mut fair = Pairs::default();
    let mut limit = Pairs::default();
    let mut bytes = Pairs::default();
    let mut sled_sizes = Vec::new();
    let mut apparent = Pairs::default();
    // The last round's archive and plain file, read by the timeline row.
    let mut kept: Option<(tempfile::TempDir, tempfile::TempDir)> = None;
    for round in 0..rounds {
        let reel_dir = tmp("reel-bench-archive-")?;
        let plain_dir = tmp("reel-bench-plain-")?;
        let trace_dir = tmp("reel-bench-tracing-")?;
        let plain_path = plain_dir.path().join("facts.bin");
        let mut reel_rec = None;
        let mut plain_rec = None;
        let mut trace_rec = None;
        let mut fair_rec = None;
        let mut limit_rec = None;
        let mut archive = None;
        let order: Vec<usize> = (0..5).map(|i| (i + round) % 5).collect();
        for side in order {
            match side {
                0 => {
                    let (r, a) = rt.block_on(record::reel(reel_dir.path(), shape))?;
                    reel_rec = Some(r);
                    archive = Some(a);
                }
                1 if with_plain => plain_rec = Some(record::plain(&plain_path, shape)?),
                2 if with_tracing => {
                    let (r, lines) = rt.block_on(record::tracing_json(trace_dir.path(), shape))?;
                    if lines != r.facts {
                        return Err(io::Error::other(format!(
                            "tracing wrote {lines} lines for {} facts",
                            r.facts
                        )));
                    }
                    trace_rec = Some(r);
                }
                3 if with_fair => {
                    let path = plain_dir.path().join("grouped.bin");
                    fair_rec = Some(record::plain_committed(
                        &path,
                        shape,
                        record::Commit::Grouped,
                    )?);
                }
                4 if with_limit => {
                    let path = plain_dir.path().join("nosync.bin");
                    limit_rec = Some(record::plain_committed(
                        &path,
                        shape,
                        record::Commit::NoSync,
                    )?);
                }
                _ => {}
            }
        }
        let reel_rec = reel_rec.expect("reel side ran");
        let archive = archive.expect("reel side ran");
        let mut line = format!(
            "  round {}: reel {}",
            round + 1,
            Unit::FactsPerSec.show(reel_rec.rate())
        );
        if let Some(p) = plain_rec {
            record.push(reel_rec.rate(), p.rate());
            let (a_du, a_len) = record::disk_usage(reel_dir.path())?;
            let (p_du, p_len) = record::disk_usage(&plain_path)?;
            let stats = archive.stats().map_err(io::Error::other)?;
            let n = reel_rec.facts as f64;
            bytes.push(a_du as f64 / n, p_du as f64 / n);
            apparent.push(a_len as f64 / n, p_len as f64 / n);
            sled_sizes.push(stats.bytes_on_disk as f64 / n);
            line += &format!(
                ", plain file {} | on disk: archive {} (sled size_on_disk {}), plain {}",
                Unit::FactsPerSec.show(p.rate()),
                Unit::BytesPerFact.show(a_du as f64 / n),
                Unit::BytesPerFact.show(stats.bytes_on_disk as f64 / n),
                Unit::BytesPerFact.show(p_du as f64 / n),
            );
        }
        if let Some(t) = trace_rec {
            tracing.push(reel_rec.rate(), t.rate());
            line += &format!(", tracing {}", Unit::FactsPerSec.show(t.rate()));
        }
        if let Some(f) = fair_rec {
            fair.push(reel_rec.rate(), f.rate());
            line += &format!(
                ", plain file group-committed {}",
                Unit::FactsPerSec.show(f.rate())
            );
        }
        if let Some(l) = limit_rec {
            limit.push(reel_rec.rate(), l.rate());
            line += &format!(
                ", encoded+zstd with no fsync {}",
                Unit::FactsPerSec.show(l.rate())
            );
        }
        writeln!(log, "{line}")?;
        drop(archive);
        if round + 1 == rounds {
            kept = Some((reel_dir, plain_dir));
        }
    }
    let recorded = Recorded {
        record,
        tracing,
        fair,
        limit,
        bytes,
        sled_sizes,
        apparent,
    };
    recorded.push_rows(opts, log, rows)?;
    if opts.wants("timeline") {
        let kept = kept.expect("at least one round");
        rows.push(timeline_row(shape, rounds, kept, log)?);
    }
    Ok(())
}

/// The measurements of the recording rounds, one pair (reel, baseline)
/// per round and row.
struct Recorded {
    record: Pairs,
    tracing: Pairs,
    fair: Pairs,
    limit: Pairs,
    bytes: Pairs,
    sled_sizes: Vec<f64>,
    apparent: Pairs,
}

impl Recorded {
    /// The rows `opts` asks for, into `rows`.
    fn push_rows(self, opts: &Options, log: &mut dyn Write, rows: &mut Vec<Row>) -> io::Result<()> {
        let Recorded {
            record,
            tracing,
            fair,
            limit,
            bytes,
            sled_sizes,
            apparent,
        } = self;
        if opts.wants("record") {
            rows.push(record.row(
                "record",
                "record: facts/s into the archive, call-boundary durability",
                "plain file, fsync per call",
                Unit::FactsPerSec,
                Target::AtLeast(0.75),
            ));
        }
        if opts.wants("record-fair") {
            rows.push(fair.row(
                "record-fair",
                "record, fair: the same recordings, facts/s",
                "plain file, same group commit: one fsync per batch of the concurrent calls",
                Unit::FactsPerSec,
                Target::AtLeast(1.0),
            ));
        }
        if opts.wants("record-limit") {
            rows.push(limit.row(
                "record-limit",
                "record, the limit: the same recordings, facts/s",
                "the same facts encoded, zstd-compressed as reel's blocks and written, no fsync",
                Unit::FactsPerSec,
                Target::AtLeast(0.8),
            ));
        }
        if opts.wants("tracing") {
            rows.push(tracing.row(
                "tracing",
                "tracing: the same recordings, facts/s",
                "tracing JSON file layer",
                Unit::FactsPerSec,
                Target::AtLeast(1.0),
            ));
        }
        if opts.wants("bytes") {
            rows.push(bytes.row(
                "bytes",
                "bytes: on disk per fact (archive dir, du)",
                "plain file",
                Unit::BytesPerFact,
                Target::AtMost(0.35),
            ));
            writeln!(
            log,
            "  bytes: allocated (du) archive {} vs plain {}; apparent (file lengths) archive {} vs plain {}; sled size_on_disk {}",
            Unit::BytesPerFact.show(median(&bytes.reel)),
            Unit::BytesPerFact.show(median(&bytes.base)),
            Unit::BytesPerFact.show(median(&apparent.reel)),
            Unit::BytesPerFact.show(median(&apparent.base)),
            Unit::BytesPerFact.show(median(&sled_sizes)),
        )?;
        }
        Ok(())
    }
}

/// The `timeline` row, over the last round's archive and plain file
/// (`kept`).
fn timeline_row(
    shape: Shape,
    rounds: usize,
    kept: (tempfile::TempDir, tempfile::TempDir),
    log: &mut dyn Write,
) -> io::Result<Row> {
    let (reel_dir, plain_dir) = kept;
    let plain_path = plain_dir.path().join("facts.bin");
    writeln!(
        log,
        "\n[timeline] TimelineBuilder over every run of the last recording: archive.facts() read as views vs \
         reading the plain file whole + decode_fact + the same TimelineBuilder"
    )?;
    let mut timeline = Pairs::default();
    let mut decode_only = Vec::new();
    for round in 0..rounds {
        let mut reel_rate = 0.0;
        let mut base_rate = 0.0;
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                // Opened afresh (untimed), as `reel show` would.
                let archive = reel_archive::Archive::open(
                    reel_dir.path(),
                    reel_archive::ArchiveConfig::default(),
                )
                .map_err(io::Error::other)?;
                let t = std::time::Instant::now();
                let n = record::timeline_from_archive(&archive, shape.runs)?;
                reel_rate = rate(n, t.elapsed());
                if n != shape.facts() {
                    return Err(io::Error::other(format!(
                        "the archive gave {n} facts of {}",
                        shape.facts()
                    )));
                }
            } else {
                let t = std::time::Instant::now();
                let n = record::timeline_from_plain(&plain_path)?;
                base_rate = rate(n, t.elapsed());
            }
        }
        let t = std::time::Instant::now();
        let n = record::decode_plain(&plain_path)?;
        decode_only.push(rate(n, t.elapsed()));
        timeline.push(reel_rate, base_rate);
        writeln!(
            log,
            "  round {}: archive {}, plain file {} (decode only, no timeline: {})",
            round + 1,
            Unit::FactsPerSec.show(reel_rate),
            Unit::FactsPerSec.show(base_rate),
            Unit::FactsPerSec.show(*decode_only.last().expect("pushed"))
        )?;
    }
    let row = timeline.row(
        "timeline",
        "timeline: facts/s decoded into a timeline from the archive",
        "plain file + decode_fact + same TimelineBuilder",
        Unit::FactsPerSec,
        Target::AtLeast(1.0),
    );
    writeln!(
        log,
        "  (for information: against decoding the plain file alone, without a timeline, {} -> ratio {:.2})",
        Unit::FactsPerSec.show(median(&decode_only)),
        row.reel / median(&decode_only)
    )?;
    Ok(row)
}

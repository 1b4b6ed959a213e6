//! Recording the workload three ways (reel, a plain file, `tracing`), and
//! reading it back into timelines (reel's archive, the plain file).

use std::fs::File;
use std::hint::black_box;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use reel::codec::decode_fact;
use reel::fact::RunStatus;
use reel_archive::{Archive, ArchiveConfig};
use reel_recorder::{Durability, Recorder, RecorderConfig, RunStart};
use reel_viewer::timeline::TimelineBuilder;
use tracing::instrument::WithSubscriber;
use tracing::Instrument;

use crate::workload::{self, Shape};

/// One timed recording.
#[derive(Debug, Clone, Copy)]
pub struct Recorded {
    /// Facts recorded.
    pub facts: usize,
    /// From the first run's start until everything was durable (reel:
    /// `shutdown` returned; plain file: the last fsync; tracing: the
    /// appender's guard was dropped).
    pub elapsed: Duration,
}

impl Recorded {
    /// Facts per second.
    pub fn rate(&self) -> f64 {
        self.facts as f64 / self.elapsed.as_secs_f64()
    }
}

/// The recorder's configuration in every row: call-boundary durability
/// (the default), no live-inspection socket.
pub fn recorder_config() -> RecorderConfig {
    RecorderConfig {
        durability: Durability::CallBoundary,
        serve_live: false,
        ..RecorderConfig::default()
    }
}

/// Records the workload into a new archive in `dir` through
/// `reel_recorder`: `shape.runs` concurrent runs, each calling [`workload::busy`]
/// `shape.calls` times in a row. Timed until `shutdown` returns. The archive
/// is returned open (for the read rows).
pub async fn reel(dir: &Path, shape: Shape) -> io::Result<(Recorded, Archive)> {
    reel_with(dir, shape, recorder_config(), Declare::Nothing).await
}

/// What each run of [`reel_with`] declares when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declare {
    /// Nothing.
    Nothing,
    /// A secret per run ([`RunStart::secret`]), so that redaction's
    /// known-value scrub and the tripwire have a value to look for (the
    /// tripwire row).
    SecretPerRun,
}

/// [`reel()`] with `config`, each run declaring what `declare` says.
pub async fn reel_with(
    dir: &Path,
    shape: Shape,
    config: RecorderConfig,
    declare: Declare,
) -> io::Result<(Recorded, Archive)> {
    let archive = Archive::open(dir, ArchiveConfig::default()).map_err(io::Error::other)?;
    let recorder = Recorder::with_archive(archive.clone(), config).map_err(io::Error::other)?;
    let started = Instant::now();
    drive(&recorder, shape, move |r| {
        let start = RunStart::new(workload::run_id(r));
        if declare == Declare::SecretPerRun {
            start.secret(reel::context::Secret::new(format!(
                "bench-declared-secret-{r:04}-Zq81xx"
            )))
        } else {
            start
        }
    })
    .await?;
    recorder.shutdown().await.map_err(io::Error::other)?;
    let elapsed = started.elapsed();
    Ok((
        Recorded {
            facts: shape.facts(),
            elapsed,
        },
        archive,
    ))
}

/// The same facts, built the same way and encoded with
/// [`reel::codec::encode_fact`], appended to a plain file as
/// `u32 LE length ++ encoding`, one `write` and one `fsync` per batch (a
/// batch is the facts of one call; run.started and run.ended are batches of
/// their own, as the recorder flushes them too).
pub fn plain(path: &Path, shape: Shape) -> io::Result<Recorded> {
    let started = Instant::now();
    let mut file = File::create(path)?;
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut failure = None;
    for r in 0..shape.runs {
        workload::run_facts(r, &shape, |batch| {
            if failure.is_some() {
                return;
            }
            buf.clear();
            if let Err(e) = workload::encode_batch(batch, &mut buf) {
                failure = Some(e);
                return;
            }
            if let Err(e) = file.write_all(&buf).and_then(|()| file.sync_data()) {
                failure = Some(e);
            }
        });
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Recorded {
        facts: shape.facts(),
        elapsed: started.elapsed(),
    })
}

/// How the baselines of the fair rows write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// The same group commit reel's concurrent calls get: the n-th batch of
    /// every run is written, then one fsync (the record, fair row).
    Grouped,
    /// Every batch compressed as reel stores blocks (zstd -1, one context
    /// reused) and written with no fsync at all: what the CPU and the disk
    /// allow (the record, the limit row).
    NoSync,
}

/// The same facts as [`plain`], built the same way and encoded with
/// [`reel::codec::encode_fact`], written under `commit`. Timed from
/// building the first fact until the last write (and fsync) returns.
pub fn plain_committed(path: &Path, shape: Shape, commit: Commit) -> io::Result<Recorded> {
    let started = Instant::now();
    let mut runs: Vec<Vec<Vec<u8>>> = Vec::with_capacity(shape.runs);
    let mut failure = None;
    let mut cctx = zstd::bulk::Compressor::new(1)?;
    for r in 0..shape.runs {
        let mut batches = Vec::with_capacity(shape.calls + 2);
        workload::run_facts(r, &shape, |batch| {
            let mut buf = Vec::with_capacity(batch.len() * 48);
            if let Err(e) = workload::encode_batch(batch, &mut buf) {
                failure = Some(e);
                return;
            }
            if commit == Commit::NoSync {
                match cctx.compress(&buf) {
                    Ok(packed) => buf = packed,
                    Err(e) => failure = Some(e),
                }
            }
            batches.push(buf);
        });
        runs.push(batches);
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let mut file = File::create(path)?;
    for g in 0..shape.calls + 2 {
        for run in &runs {
            file.write_all(&run[g])?;
        }
        if commit == Commit::Grouped {
            file.sync_data()?;
        }
    }
    Ok(Recorded {
        facts: shape.facts(),
        elapsed: started.elapsed(),
    })
}

/// The same workload through `tracing`: one span per call (run id, call id,
/// tool), one event per fact, a `tracing_subscriber::fmt().json()` layer
/// writing through `tracing_appender::non_blocking` (lossless, so that no
/// line is dropped) to `dir/trace.json`. Timed until the appender's guard
/// has been dropped (its worker wrote every line). Returns the recording and
/// the number of lines in the file.
pub async fn tracing_json(dir: &Path, shape: Shape) -> io::Result<(Recorded, usize)> {
    let appender = tracing_appender::rolling::never(dir, "trace.json");
    let started = Instant::now();
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .finish(appender);
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(writer)
        .finish();
    let dispatch = tracing::Dispatch::new(subscriber);
    let mut tasks = Vec::with_capacity(shape.runs);
    for r in 0..shape.runs {
        let run = async move {
            let run_id = workload::run_id(r);
            tracing::info!(run_id = %run_id, "run.started");
            for c in 0..shape.calls {
                let call_id = format!("c{}", c + 1);
                let span = tracing::info_span!("call", run_id = %run_id, call_id = %call_id, tool = workload::TOOL);
                async {
                    let call_started = Instant::now();
                    let n = shape.progress;
                    tracing::info!(args = %workload::args(r, c, n), "call.started");
                    for i in 0..n {
                        tracing::info!(count = i + 1, payload = %workload::payload(i, n), "progress");
                        if i % workload::YIELD_EVERY == workload::YIELD_EVERY - 1 {
                            tokio::task::yield_now().await;
                        }
                    }
                    tracing::info!(
                        result = %workload::result(n),
                        duration_ns = call_started.elapsed().as_nanos() as u64,
                        "call.ended"
                    );
                }
                .instrument(span)
                .await;
            }
            tracing::info!(run_id = %run_id, status = "completed", "run.ended");
        };
        tasks.push(tokio::spawn(run.with_subscriber(dispatch.clone())));
    }
    for task in tasks {
        task.await.map_err(io::Error::other)?;
    }
    drop(dispatch);
    drop(guard);
    let elapsed = started.elapsed();
    let text = std::fs::read(dir.join("trace.json"))?;
    let lines = text.iter().filter(|&&b| b == b'\n').count();
    Ok((
        Recorded {
            facts: shape.facts(),
            elapsed,
        },
        lines,
    ))
}

/// Builds the timeline of every run of the workload from the archive as
/// `reel runs` and the console do: `archive.facts(run, ..)` read as views
/// (`Facts::views`) into a `TimelineBuilder`. Returns the facts read.
pub fn timeline_from_archive(archive: &Archive, runs: usize) -> io::Result<usize> {
    let mut facts = 0;
    for r in 0..runs {
        let mut builder = TimelineBuilder::default();
        archive
            .facts(&workload::run_id(r), ..)
            .and_then(|f| f.views(&mut builder))
            .map_err(io::Error::other)?;
        let timeline = builder.finish();
        if let Some(a) = timeline.anomalies.first() {
            return Err(io::Error::other(format!(
                "run {r} reads with an anomaly: {a:?}"
            )));
        }
        facts += timeline.facts as usize;
        black_box(timeline);
    }
    Ok(facts)
}

/// Reads the plain file whole and decodes every fact with
/// [`reel::codec::decode_fact`], into the same `TimelineBuilder` (a new
/// timeline at each run.started). Returns the facts read.
pub fn timeline_from_plain(path: &Path) -> io::Result<usize> {
    let bytes = std::fs::read(path)?;
    let mut rest = &bytes[..];
    let mut facts = 0;
    let mut builder: Option<TimelineBuilder> = None;
    while rest.len() >= 4 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let fact = decode_fact(&rest[4..4 + len]).map_err(io::Error::other)?;
        rest = &rest[4 + len..];
        if matches!(fact.kind, reel::FactKind::RunStarted(_)) {
            if let Some(b) = builder.take() {
                black_box(b.finish());
            }
        }
        builder
            .get_or_insert_with(TimelineBuilder::default)
            .push(&fact);
        facts += 1;
    }
    if let Some(b) = builder.take() {
        black_box(b.finish());
    }
    Ok(facts)
}

/// Reads the plain file whole and decodes every fact, nothing more (the
/// strict reading of the baseline, printed for information).
pub fn decode_plain(path: &Path) -> io::Result<usize> {
    let bytes = std::fs::read(path)?;
    let mut rest = &bytes[..];
    let mut facts = 0;
    while rest.len() >= 4 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        black_box(decode_fact(&rest[4..4 + len]).map_err(io::Error::other)?);
        rest = &rest[4 + len..];
        facts += 1;
    }
    Ok(facts)
}

/// Bytes a path takes on disk: (allocated, as `du` counts them; apparent,
/// the sum of file lengths), summed over a directory's files.
pub fn disk_usage(path: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        let mut total = (0, 0);
        for entry in std::fs::read_dir(path)? {
            // sled may still be collecting a blob file it listed a moment
            // ago: a file gone since takes no space.
            match disk_usage(&entry?.path()) {
                Ok((a, b)) => {
                    total.0 += a;
                    total.1 += b;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    } else {
        Ok((meta.blocks() * 512, meta.len()))
    }
}

/// One codec's figures over the same blocks.
#[derive(Debug, Clone)]
pub struct Codec {
    /// The codec and its level.
    pub name: &'static str,
    /// Compressed bytes over all blocks.
    pub bytes: usize,
    /// Time to compress them all.
    pub compress: Duration,
    /// Time to decompress them all.
    pub decompress: Duration,
}

/// The blocks the recorder seals for `shape` (each call's facts, encoded
/// with [`reel::codec::encode_fact`] and length-prefixed: a block's payload before
/// compression), compressed one by one with lz4 (what archive format 2
/// stored) and zstd at level 1 (what format 3 stores), at level 3, and at
/// the fast levels -1 and -3 (`--fast=1`, `--fast=3`: less compression for
/// less CPU; any level's frames read the same). Returns the uncompressed total and each
/// codec's figures.
pub fn compression_survey(blocks: &[Vec<u8>]) -> io::Result<(usize, Vec<Codec>)> {
    let raw: usize = blocks.iter().map(Vec::len).sum();
    let mut out = Vec::new();
    // lz4_flex, as block.rs stores blocks.
    let t = Instant::now();
    let packed: Vec<Vec<u8>> = blocks
        .iter()
        .map(|b| lz4_flex::block::compress_prepend_size(b))
        .collect();
    let compress = t.elapsed();
    let t = Instant::now();
    for p in &packed {
        black_box(lz4_flex::block::decompress_size_prepended(p).map_err(io::Error::other)?);
    }
    out.push(Codec {
        name: "lz4 (lz4_flex)",
        bytes: packed.iter().map(Vec::len).sum(),
        compress,
        decompress: t.elapsed(),
    });
    // zstd as block.rs stores blocks: one context per thread, reused.
    for (name, level) in [
        ("zstd -1", 1),
        ("zstd -3", 3),
        ("zstd --fast=1", -1),
        ("zstd --fast=3", -3),
    ] {
        let mut cctx = zstd::bulk::Compressor::new(level)?;
        let mut dctx = zstd::bulk::Decompressor::new()?;
        // Warmed up first: the first codec timed would otherwise pay for
        // the contexts' first touch (it read 3x slower than the next).
        for b in blocks.iter().take(64) {
            black_box(dctx.decompress(&cctx.compress(b)?, b.len())?);
        }
        let t = Instant::now();
        let mut packed = Vec::with_capacity(blocks.len());
        for b in blocks {
            packed.push(cctx.compress(b)?);
        }
        let compress = t.elapsed();
        let t = Instant::now();
        for (p, b) in packed.iter().zip(blocks) {
            black_box(dctx.decompress(p, b.len())?);
        }
        out.push(Codec {
            name,
            bytes: packed.iter().map(Vec::len).sum(),
            compress,
            decompress: t.elapsed(),
        });
    }
    Ok((raw, out))
}

/// The workload's blocks as the recorder would seal them: for each run,
/// run.started, each call's facts, run.ended, encoded with [`reel::codec::encode_fact`]
/// and length-prefixed.
pub fn workload_blocks(shape: Shape) -> io::Result<Vec<Vec<u8>>> {
    let mut blocks = Vec::new();
    let mut failure = None;
    for r in 0..shape.runs {
        workload::run_facts(r, &shape, |batch| {
            let mut buf = Vec::new();
            if let Err(e) = workload::encode_batch(batch, &mut buf) {
                failure = Some(e);
                return;
            }
            blocks.push(buf);
        });
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(blocks),
    }
}

/// Records the workload's runs concurrently through `recorder`: run `r`
/// started as `start(r)`, then `shape.calls` calls of the busy tool in a
/// row, then ended; returns once every run has ended.
pub async fn drive(
    recorder: &Recorder,
    shape: Shape,
    start: impl Fn(usize) -> RunStart,
) -> io::Result<()> {
    let mut tasks = Vec::with_capacity(shape.runs);
    for r in 0..shape.runs {
        let recorder = recorder.clone();
        let start = start(r);
        tasks.push(tokio::spawn(async move {
            let run = recorder.start_run(start).await.map_err(io::Error::other)?;
            for c in 0..shape.calls {
                run.call(workload::TOOL, workload::args(r, c, shape.progress))
                    .invoke(workload::busy)
                    .await
                    .map_err(|e| io::Error::other(e.to_string()))?;
            }
            run.end(RunStatus::Completed)
                .await
                .map_err(io::Error::other)
        }));
    }
    for task in tasks {
        task.await.map_err(io::Error::other)??;
    }
    Ok(())
}

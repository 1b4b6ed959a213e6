//! Opening an archive: the directory checks, sled's lock, the format
//! stamp, the fingerprint key and recovery.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::control::{self, Found};
use crate::{
    fingerprint, keys, Archive, ArchiveError, FingerprintKey, Inner, Result, Trees, FORMAT_VERSION,
};

/// How to open an archive.
#[derive(Debug, Clone, Default)]
pub struct ArchiveConfig {
    /// sled's page cache size in bytes; `None` keeps sled's default.
    pub cache_capacity: Option<u64>,
    /// sled's background flush interval in milliseconds; `None` turns it
    /// off for a writer (the journal acknowledges, and the checkpointer
    /// flushes sled every [`crate::CHECKPOINT_EVERY`]; see `wal`) and keeps
    /// sled's default for a reader. `Some(0)` turns it off.
    pub flush_every_ms: Option<u64>,
    /// Where the key of [`Archive::fingerprint`] comes from; never from the
    /// archive (default: [`crate::KEY_ENV`], else the user's key file).
    pub fingerprint_key: FingerprintKey,
    /// Open only to read: the store files are never written. sled has no
    /// read-only mode (its open rewrites the log's tail and snapshot after
    /// a crash or damage), so a store its last closer sealed whole (see
    /// `control`: sled's open then rewrites nothing) is read in place, and
    /// any other from a scratch copy that sled recovers, checked against
    /// the control record; the copy costs one read and one write of the
    /// store. Every write is refused with [`ArchiveError::ReadOnly`].
    pub read_only: bool,
    /// With `read_only`: read a scratch copy even of a sealed store, so
    /// that this reader never holds the store's lock (sled allows one
    /// process per store): for a long-lived reader, such as `reel serve`,
    /// beside which a recorder may start.
    pub copy: bool,
    /// How the write-ahead journal writes (a writer's): its segment size,
    /// its bound on unapplied bytes (past it, appends wait for the
    /// checkpointer, and the waits are counted), and how long a buffered
    /// batch may wait for its sync (200 ms).
    pub journal: crate::journal::JournalConfig,
}

impl Archive {
    /// Opens the archive in `dir`, creating it when absent. Runs left running
    /// by a writer that stopped are marked [`reel_core::run::RunState::Incomplete`].
    pub fn open(dir: impl AsRef<Path>, config: ArchiveConfig) -> Result<Archive> {
        let dir = dir.as_ref().to_path_buf();
        check_dir(&dir)?;
        // A writer claims the archive first; a reader leaves a claimed
        // archive to its writer (see `claim`).
        let (claim, _reading) = crate::claim::at_open(&dir, config.read_only)?;
        // Before sled touches the store: is it whole? (See `control`.)
        let mut control = check_before_open(&dir, config.read_only, config.copy)?;
        let scratch = control.scratch.take();
        let store = scratch.as_ref().map_or(dir.as_path(), |s| s.path());
        let sled_config = sled_config(&config, store);
        if !config.read_only {
            before_sled_in_place(&dir, &control)?;
        }
        let db = match open_sled(&sled_config, &dir, claim.is_some()) {
            Err(ArchiveError::Damaged { dir, detail }) if scratch.is_none() => {
                return Err(ArchiveError::Damaged {
                    dir,
                    detail: format!("{detail}; reel did not write to it"),
                })
            }
            other => other?,
        };
        let storage = |source| ArchiveError::Storage {
            dir: dir.clone(),
            source,
        };
        let tree = |name: &str| db.open_tree(name).map_err(storage);
        let meta = tree(keys::T_META)?;
        // The format stamp: a new archive gets this reel's; an older one
        // keeps its own until this reel first writes a run into it
        // (`Archive::stamp_format`), so that opening an archive only to read
        // it leaves it readable by the reel that wrote it; a newer one is
        // refused before anything is read or recovered.
        let format = format_of(&meta, &dir)?;
        // The fingerprint key lives outside the archive (see `fingerprint`).
        // An archive written by an older reel holds its own: it is removed,
        // so that a copy of the archive made from now on cannot be used to
        // test guesses against its fingerprints.
        if meta.remove(keys::META_KEY).map_err(storage)?.is_some() {
            meta.flush().map_err(storage)?;
            tracing::warn!(
                archive = %dir.display(),
                "reel: archive {} held its own fingerprint key (written by an older reel); it is \
                 removed, because anyone with a copy of the archive could test guessed \
                 credentials against its fingerprints. Fingerprints recorded before now will \
                 not match new ones of the same credential, and copies of the archive made \
                 before now still hold the key.",
                dir.display()
            );
        }
        let key = fingerprint::Keyring::new(&config.fingerprint_key).map_err(|detail| {
            ArchiveError::FingerprintKey {
                dir: dir.clone(),
                detail,
            }
        })?;
        let trees = Trees {
            meta,
            run_ids: tree(keys::T_RUN_IDS)?,
            runs: tree(keys::T_RUNS)?,
            events: tree(keys::T_EVENTS)?,
            artifacts: tree(keys::T_ARTIFACTS)?,
            artifact_files: tree(keys::T_ARTIFACT_FILES)?,
            by_time: tree(keys::T_BY_TIME)?,
            by_tenant: tree(keys::T_BY_TENANT)?,
            by_tool: tree(keys::T_BY_TOOL)?,
            by_status: tree(keys::T_BY_STATUS)?,
            salvaged: tree(keys::T_SALVAGED)?,
            pruned: tree(keys::T_PRUNED)?,
            summaries: tree(keys::T_SUMMARIES)?,
        };
        // After sled's recovery: the same check on the store itself (the
        // files may have changed since the probe, or been sealed before
        // damage that bypassed the file system).
        let stored = stored_control(&trees, &dir)?;
        if let Some(expected) = control.expected {
            let held = stored.map_or(0, |s| s.epoch);
            if held < expected.epoch {
                let detail = lost_detail(&trees, expected, held);
                return Err(ArchiveError::Damaged { dir, detail });
            }
        }
        let (runs, facts) = match stored {
            Some(s) => (s.runs, s.facts),
            // Written before reel kept a control record (or never flushed):
            // count what is there.
            None => (
                (trees.runs.len() + trees.pruned.len()) as u64,
                trees
                    .runs
                    .iter()
                    .values()
                    .filter_map(|v| crate::record::decode_record(&v.ok()?).ok())
                    .map(|r| r.facts)
                    .sum(),
            ),
        };
        // The journal's positions are the control file's (sled's copy of
        // the record holds only the epoch and the counts).
        let positions = control.expected.unwrap_or_default();
        let (wal, replayed, torn_tail) =
            journal_at_open(&dir, &config, scratch.is_some(), &positions, &trees)?;
        let last = control::Control {
            epoch: stored.map_or(0, |s| s.epoch),
            runs,
            facts,
            seal: None,
            checkpoint: positions.checkpoint,
            acknowledged: positions.acknowledged,
        };
        let (appended, _) = tokio::sync::watch::channel(0);
        let durable = crate::durable::Durable::new(store);
        let archive = Archive {
            inner: Arc::new(Inner {
                durable,
                files: crate::files::Files::new(&dir),
                read_only: config.read_only,
                scratch,
                control: Mutex::new(control::Writer::new(&dir, control.generation, last)),
                runs: std::sync::atomic::AtomicU64::new(runs),
                facts: std::sync::atomic::AtomicU64::new(facts),
                dirty: std::sync::atomic::AtomicBool::new(false),
                next_ordinal: keys::next_ordinal(&trees).map_err(storage)?.into(),
                dir,
                db: Some(db),
                trees: Some(trees),
                key,
                live: Mutex::new(HashMap::new()),
                appended,
                format: AtomicU32::new(format),
                wal,
                torn_tail,
                _claim: claim,
            }),
        };
        if !(archive.inner.read_only && archive.inner.scratch.is_none()) {
            archive.recover()?;
            archive.finish_prunes()?;
        }
        if let Some(wal) = archive.inner.wal() {
            // What the journal held past the checkpoint, and what recovery
            // changed, become sled's before anything new is journaled.
            if replayed > 0 || archive.inner.dirty.load(Ordering::SeqCst) {
                archive.inner.checkpoint()?;
            }
            wal.start(Arc::downgrade(&archive.inner))?;
        }
        Ok(archive)
    }

    /// The format the archive is stamped with.
    pub fn format_version(&self) -> u32 {
        self.inner.format.load(Ordering::Relaxed)
    }

    /// Raises the archive's format stamp to [`FORMAT_VERSION`] before this
    /// reel writes a run into it (its blocks may be of a version an older
    /// reel cannot read: that reel then says "upgrade", not "damaged").
    pub(crate) fn stamp_format(&self) -> Result<()> {
        if self.inner.format.load(Ordering::Relaxed) >= FORMAT_VERSION {
            return Ok(());
        }
        let meta = &self.trees().meta;
        meta.insert(keys::META_FORMAT, &keys::format_value(FORMAT_VERSION))
            .map_err(|e| self.storage(e))?;
        meta.flush().map_err(|e| self.storage(e))?;
        self.inner.format.store(FORMAT_VERSION, Ordering::Relaxed);
        Ok(())
    }
}

/// The archive's format stamp (see `Archive::open`): a new archive gets
/// this reel's, a newer one is refused.
fn format_of(meta: &sled::Tree, dir: &Path) -> Result<u32> {
    let storage = |source| ArchiveError::Storage {
        dir: dir.to_path_buf(),
        source,
    };
    Ok(match meta.get(keys::META_FORMAT).map_err(storage)? {
        None => {
            meta.insert(keys::META_FORMAT, &keys::format_value(FORMAT_VERSION))
                .map_err(storage)?;
            FORMAT_VERSION
        }
        Some(v) => {
            let found = keys::format_from(&v).ok_or_else(|| ArchiveError::Format {
                dir: dir.to_path_buf(),
                detail: "its format marker is damaged".into(),
            })?;
            if found > FORMAT_VERSION {
                return Err(ArchiveError::NewerFormat {
                    dir: dir.to_path_buf(),
                    found,
                    supported: FORMAT_VERSION,
                });
            }
            found
        }
    })
}

/// sled's configuration for the store at `store`: a writer's background
/// flush is off unless asked for (the checkpointer flushes; see `wal`).
fn sled_config(config: &ArchiveConfig, store: &Path) -> sled::Config {
    let mut sled_config = sled::Config::new().path(store);
    if let Some(c) = config.cache_capacity {
        sled_config = sled_config.cache_capacity(c);
    }
    match config.flush_every_ms {
        Some(ms) => sled_config.flush_every_ms(if ms == 0 { None } else { Some(ms) }),
        None if !config.read_only => sled_config.flush_every_ms(None),
        None => sled_config,
    }
}

/// Before a writer's sled opens the store: damage in the journal's
/// acknowledged part stops it before sled's recovery rewrites anything in
/// place, and sled's unfinished snapshots go (see `control`).
fn before_sled_in_place(dir: &Path, control: &Expected) -> Result<()> {
    crate::wal::scan(dir, &control.expected.unwrap_or_default())?;
    control::remove_unfinished_snapshots(dir).map_err(|e| ArchiveError::Storage {
        dir: dir.to_path_buf(),
        source: sled::Error::Io(e),
    })
}

/// The journal past the checkpoint goes into sled: a writer's store (its
/// journal opened to write), or a reader's scratch copy (a reader of a
/// store in place found nothing past it, see `check_before_open`).
/// Returns the writer's journal, how many batches were applied, and the
/// torn tail said (see [`crate::wal::tail_said`]).
fn journal_at_open(
    dir: &Path,
    config: &ArchiveConfig,
    scratch: bool,
    positions: &control::Control,
    trees: &Trees,
) -> Result<(Option<crate::wal::Wal>, usize, Option<String>)> {
    let (wal, recovered) = if !config.read_only {
        let (wal, recovered) = crate::wal::Wal::open(dir, config.journal.clone(), positions)?;
        (Some(wal), recovered)
    } else if scratch {
        (None, crate::wal::scan(dir, positions)?)
    } else {
        return Ok((None, 0, None));
    };
    let replayed = crate::wal::replay(dir, trees, &recovered.batches)?;
    let torn_tail = crate::wal::tail_said(&recovered);
    if let Some(tail) = &torn_tail {
        tracing::info!(archive = %dir.display(), "reel: {tail}; the intact batches were read");
    }
    Ok((wal, replayed, torn_tail))
}

/// What the control file said at open.
struct Expected {
    /// Its newest intact slot's generation (0 when none).
    generation: u64,
    /// What it says is durable; `None` for a store without a control
    /// record (new, or written before reel kept one).
    expected: Option<control::Control>,
    /// For a read-only open of a store not sealed whole: the recovered
    /// scratch copy to read from.
    scratch: Option<tempfile::TempDir>,
}

/// Decides, before sled opens the store in place, whether the store holds
/// what its control record says is durable. A store as its last closer
/// sealed it is; any other is first recovered by sled on a scratch copy,
/// because sled's recovery of a damaged store rewrites it (see `control`).
fn check_before_open(dir: &Path, read_only: bool, copy: bool) -> Result<Expected> {
    let io_error = |what: &str, e: io::Error| ArchiveError::Storage {
        dir: dir.to_path_buf(),
        source: sled::Error::Io(io::Error::new(e.kind(), format!("{what}: {e}"))),
    };
    let found = control::read(dir).map_err(|e| io_error("reading reel.control", e))?;
    let (generation, expected) = match found {
        Found::Record(g, c) => (g, Some(c)),
        Found::Absent | Found::Damaged => (0, None),
    };
    let mut result = Expected {
        generation,
        expected,
        scratch: None,
    };
    let db = dir.join("db");
    if !db.exists() {
        return match found {
            Found::Absent => Ok(result),
            _ => Err(ArchiveError::Damaged {
                dir: dir.to_path_buf(),
                detail: "its store file `db` is missing, though its control record says the archive holds data"
                    .into(),
            }),
        };
    }
    if let Some(c) = expected {
        let in_place = !(read_only && copy);
        if in_place && c.seal.is_some() && control::seal_of(dir).ok() == c.seal {
            // A reader reads in place only a store that holds the whole
            // journal (its writer closed it after a checkpoint): a store
            // sealed by an earlier close, then written by a writer that
            // died before its first checkpoint, holds the same files.
            if !read_only || crate::wal::scan(dir, &c)?.batches.is_empty() {
                return Ok(result);
            }
        }
    }
    // Another process holds the store: it is theirs to read (`reel` reads
    // through the recorder's socket), and a copy of a live store says
    // nothing.
    held_elsewhere(dir, &db)?;
    control::remove_stale_scratch();
    let scratch = tempfile::Builder::new()
        .prefix(&format!(
            "{}{}-",
            control::SCRATCH_PREFIX,
            std::process::id()
        ))
        .tempdir()
        .map_err(|e| io_error("making a scratch directory for the open check", e))?;
    control::copy_store(dir, scratch.path())
        .map_err(|e| io_error("copying the store for the open check", e))?;
    let probe = sled::Config::new()
        .path(scratch.path())
        .flush_every_ms(None)
        .open()
        .map_err(|e| probe_error(dir, e))?;
    let trees = |name: &str| probe.open_tree(name).map_err(|e| probe_error(dir, e));
    let meta = trees(keys::T_META)?;
    let stored = match meta.get(keys::META_CONTROL) {
        Ok(v) => v.map(|v| control::Control::from_meta(&v)),
        Err(e) => return Err(probe_error(dir, e)),
    };
    let damaged = |detail: String| ArchiveError::Damaged {
        dir: dir.to_path_buf(),
        detail,
    };
    let verdict = match (found, stored) {
        (_, Some(None)) => Err(damaged("its stored control record is damaged".into())),
        (Found::Record(_, c), stored) => {
            let held = stored.flatten().map_or(0, |s| s.epoch);
            if held < c.epoch {
                let (runs, pruned) = (trees(keys::T_RUNS)?, trees(keys::T_PRUNED)?);
                let held_runs = (runs.len() + pruned.len()) as u64;
                Err(damaged(lost_text(c, held, held_runs)))
            } else {
                Ok(())
            }
        }
        (Found::Absent, Some(Some(_))) => Err(damaged(format!(
            "its control record `{}` is missing: reel cannot tell whether acknowledged data was lost",
            control::CONTROL_FILE
        ))),
        (Found::Damaged, Some(Some(_))) => Err(damaged(format!(
            "its control record `{}` is damaged: reel cannot tell whether acknowledged data was lost",
            control::CONTROL_FILE
        ))),
        // Written before reel kept a control record: nothing to compare.
        (Found::Absent | Found::Damaged, None) => Ok(()),
    };
    let damage = verdict.err().map(|e| match e {
        ArchiveError::Damaged { dir, detail } => ArchiveError::Damaged {
            dir,
            detail: format!("{detail}; reel did not write to it"),
        },
        e => e,
    });
    if let Some(e) = damage {
        return Err(e);
    }
    drop((meta, probe));
    if read_only {
        // Read from the copy sled has recovered, never the store itself.
        result.scratch = Some(scratch);
    }
    Ok(result)
}

/// What damage the control record shows: flushes and runs lost.
fn lost_text(expected: control::Control, held_epoch: u64, held_runs: u64) -> String {
    let flushes = expected.epoch - held_epoch;
    let mut text = format!(
        "sled's recovery ended before the last durable flush: flush {} was acknowledged (its control record says so), the store ends at flush {held_epoch}, so {flushes} durable flush{} lost",
        expected.epoch,
        if flushes == 1 { " was" } else { "es were" },
    );
    if held_runs < expected.runs {
        let lost = expected.runs - held_runs;
        text.push_str(&format!(
            "; {} run{} created, the store holds {held_runs}: {lost} run{} lost",
            expected.runs,
            if expected.runs == 1 { " was" } else { "s were" },
            if lost == 1 { " is" } else { "s are" },
        ));
    }
    text
}

fn lost_detail(trees: &Trees, expected: control::Control, held_epoch: u64) -> String {
    let held_runs = (trees.runs.len() + trees.pruned.len()) as u64;
    lost_text(expected, held_epoch, held_runs)
}

/// The control record sled's store holds (`Some(_)` once reel flushed it).
fn stored_control(trees: &Trees, dir: &Path) -> Result<Option<control::Control>> {
    match trees.meta.get(keys::META_CONTROL) {
        Ok(None) => Ok(None),
        Ok(Some(v)) => {
            control::Control::from_meta(&v)
                .map(Some)
                .ok_or_else(|| ArchiveError::Damaged {
                    dir: dir.to_path_buf(),
                    detail: "its stored control record is damaged".into(),
                })
        }
        Err(e) => Err(open_error(dir, e)),
    }
}

/// `Locked` when another process holds the store (after the grace).
fn held_elsewhere(dir: &Path, db: &Path) -> Result<()> {
    let Ok(file) = std::fs::File::open(db) else {
        return Ok(());
    };
    let started = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => {
                let _ = file.unlock();
                return Ok(());
            }
            Err(_) if started.elapsed() < LOCK_GRACE => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(_) => {
                return Err(ArchiveError::Locked {
                    dir: dir.to_path_buf(),
                })
            }
        }
    }
}

/// What sled said of the scratch copy: damage of the store, unless it is
/// about the scratch directory itself.
fn probe_error(dir: &Path, e: sled::Error) -> ArchiveError {
    match e {
        // A store file cut short, or bytes that are not what sled wrote.
        sled::Error::Io(io)
            if matches!(
                io.kind(),
                io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData
            ) =>
        {
            ArchiveError::Damaged {
                dir: dir.to_path_buf(),
                detail: format!("sled cannot recover its store: {io}"),
            }
        }
        sled::Error::ReportableBug(bug) => ArchiveError::Damaged {
            dir: dir.to_path_buf(),
            detail: format!("sled cannot recover its store: {bug}"),
        },
        e => open_error(dir, e),
    }
}

/// How long an opener waits for the directory lock before saying the
/// archive is held. sled finishes background writes of a database this
/// process just closed on its own threads, which hold the lock for a moment
/// after the last handle is dropped; another process's lock outlasts this.
const LOCK_GRACE: std::time::Duration = std::time::Duration::from_millis(1500);

/// Opens sled, waiting for its lock [`LOCK_GRACE`], or a writer holding
/// the claim [`crate::claim::WRITER_WAIT`] (readers that opened in place
/// before the claim end, and no new one opens).
fn open_sled(config: &sled::Config, dir: &Path, claimed: bool) -> Result<sled::Db> {
    let wait = match claimed {
        true => crate::claim::WRITER_WAIT,
        false => LOCK_GRACE,
    };
    let started = std::time::Instant::now();
    loop {
        match config.open().map_err(|e| open_error(dir, e)) {
            Err(ArchiveError::Locked { .. }) if started.elapsed() < wait => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn open_error(dir: &Path, e: sled::Error) -> ArchiveError {
    if let sled::Error::Io(io) = &e {
        if io.kind() == io::ErrorKind::Other && io.to_string().contains("could not acquire lock") {
            return ArchiveError::Locked {
                dir: dir.to_path_buf(),
            };
        }
    }
    match e {
        // sled's corruption is damage on disk, never a version problem;
        // so is an "unsupported" store, which is what sled says of a
        // damaged `conf` (every reel archive is sled 0.34.7's: reel's own
        // format version is checked after open, and says "newer reel").
        sled::Error::Corruption { at, .. } => ArchiveError::Damaged {
            dir: dir.to_path_buf(),
            detail: crate::corruption_detail(at),
        },
        sled::Error::Unsupported(_) => ArchiveError::Damaged {
            dir: dir.to_path_buf(),
            detail: e.to_string(),
        },
        source => ArchiveError::Storage {
            dir: dir.to_path_buf(),
            source,
        },
    }
}

/// Refuses a path that is no archive directory: a file, or a directory
/// holding other files but no archive.
fn check_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(ArchiveError::Format {
            dir: dir.to_path_buf(),
            detail: "it is a file, not a directory; pass the archive directory".into(),
        });
    }
    if dir.is_dir() && !dir.join("conf").exists() && !dir.join("db").exists() {
        let has_files = std::fs::read_dir(dir)
            .map(|mut d| {
                d.any(|e| {
                    e.map(|e| !e.file_name().to_string_lossy().starts_with("reel."))
                        .unwrap_or(false)
                })
            })
            .unwrap_or(false);
        if has_files {
            return Err(ArchiveError::Format {
                dir: dir.to_path_buf(),
                detail: "the directory has files but no archive; pass an empty or new directory, or an existing archive".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An archive as reel format 1 wrote it (every block plain, version
    /// 1, the hash chain over those bytes; stamped 1) reads and verifies,
    /// and keeps its stamp while only read.
    #[test]
    fn a_format_1_archive_with_only_version_1_blocks_reads() {
        an_old_archive_reads(1, crate::block::BLOCK_PLAIN);
    }

    /// The same for format 2: its blocks lz4-compressed (version 2), as
    /// reel wrote them before zstd.
    #[test]
    fn a_format_2_archive_with_lz4_blocks_reads() {
        an_old_archive_reads(2, crate::block::BLOCK_LZ4);
    }

    /// Writes a run, rewrites every block as reel format `format` wrote it
    /// (block version `version`, chained anew), stamps `format`, and checks
    /// the run reads back the same, verifies, and the stamp is kept.
    fn an_old_archive_reads(format: u32, version: u8) {
        use crate::block;
        use reel_core::fact::{
            FactKind, NewFact, Producer, Progress, RunEnded, RunStarted, RunStatus,
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let config = || ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([1; 32]),
            ..ArchiveConfig::default()
        };
        let archive = Archive::open(dir.path(), config()).expect("open");
        let fact = |kind| NewFact {
            at: 1,
            offset: 0,
            call: None,
            kind,
        };
        let progress = |i: u64| {
            fact(FactKind::Progress(Progress {
                payload: serde_json::json!({"message": format!("step {i} of 300"), "done": i}),
                count: i + 1,
                delivered: false,
            }))
        };
        let mut first = vec![fact(FactKind::RunStarted(RunStarted {
            run_id: "old".into(),
            session_id: None,
            identity: None,
            producer: Producer {
                name: "format-1".into(),
                version: "0".into(),
            },
            labels: Default::default(),
            teardown_scopes: vec![],
        }))];
        first.extend((0..100).map(progress));
        archive.append("old", first).expect("append");
        archive
            .append("old", (100..200).map(progress).collect())
            .expect("append");
        archive
            .append(
                "old",
                vec![fact(FactKind::RunEnded(RunEnded {
                    status: RunStatus::Completed,
                }))],
            )
            .expect("append");
        let want: Vec<_> = archive
            .facts("old", ..)
            .unwrap()
            .map(|f| f.unwrap())
            .collect();
        // Rewrite every block as that format wrote it, chained anew.
        let t = archive.trees();
        let blocks: Vec<_> = t.events.iter().map(|kv| kv.unwrap()).collect();
        assert!(
            blocks.iter().any(|(_, v)| v[0] == block::BLOCK_ZSTD),
            "some block is compressed"
        );
        let mut prev = [0u8; 32];
        for (key, value) in blocks {
            let (_, seq) = keys::split_event_key(&key).unwrap();
            let opened = block::open(&value).unwrap();
            let facts = block::decode_facts(&opened, seq).unwrap();
            let mut payload = Vec::new();
            for f in &facts {
                block::push_fact(&mut payload, f).unwrap();
            }
            let mut plain = vec![version];
            // The count, as the block held it.
            plain.extend_from_slice(&value[1..5]);
            plain.extend_from_slice(&prev);
            plain.extend_from_slice(&[0; 32]);
            if version == block::BLOCK_LZ4 {
                plain.extend_from_slice(&lz4_flex::block::compress_prepend_size(&payload));
            } else {
                plain.extend_from_slice(&payload);
            }
            let digest = block::digest_of(&plain);
            plain[37..block::HEADER_LEN].copy_from_slice(&digest);
            prev = digest;
            t.events.insert(key, plain).unwrap();
        }
        t.meta
            .insert(keys::META_FORMAT, &keys::format_value(format))
            .unwrap();
        archive.flush().unwrap();
        drop(archive);
        let archive = loop {
            match Archive::open(dir.path(), config()) {
                Err(ArchiveError::Locked { .. }) => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                other => break other.expect("an old archive opens"),
            }
        };
        assert_eq!(archive.format_version(), format);
        assert!(archive
            .trees()
            .events
            .iter()
            .all(|kv| kv.unwrap().1[0] == version));
        let got: Vec<_> = archive
            .facts("old", ..)
            .unwrap()
            .map(|f| f.unwrap())
            .collect();
        assert_eq!(got, want);
        let report = archive.verify().expect("verify");
        assert!(report.is_ok(), "{:?}", report.problems);
        assert_eq!(archive.format_version(), format);
    }

    /// What sled reports of damage is damage (exit code 2 in `reel`),
    /// never "not an archive this version can read".
    #[test]
    fn sled_corruption_is_damage_not_a_version_problem() {
        let dir = Path::new("/archive");
        let corrupt = sled::Error::Corruption { at: None, bt: () };
        for e in [corrupt, sled::Error::Unsupported("bad conf".into())] {
            let err = open_error(dir, e);
            assert!(err.is_damage(), "{err:?}");
            let text = err.to_string();
            assert!(text.contains("is damaged on disk"), "{text}");
            assert!(!text.contains("version"), "{text}");
        }
        let io = sled::Error::Io(io::Error::other("disk on fire"));
        assert!(!open_error(dir, io).is_damage());
    }
}

//! The archive's write-ahead journal (see [`crate::journal`]): what an
//! append is acknowledged by, and the checkpointer that makes sled durable
//! off the calls' path.
//!
//! - **An append** turns the batch (its block, and the run record and
//!   index entries it implies) into a list of sled operations, [`Ops`],
//!   appends them to the journal as one frame ([`Wait::Written`]: a killed
//!   process loses nothing appended), then applies them to sled's trees
//!   (in memory: sled writes its log when it flushes, or when its buffers
//!   fill). So sled never holds an operation the journal does not, past
//!   the checkpoint. Every reader in the process (the live socket too)
//!   sees the batch once its append returns, since it reads sled.
//! - **A flush** ([`crate::Archive::flush`]) syncs the artifact files
//!   written since the last one, then the journal up to its end: one
//!   `fdatasync` shared by every concurrent caller (group commit), and
//!   then records the synced position in the control record (a `pwrite`,
//!   no sync). Writes that bypass the journal (import, prune, recovery on
//!   open, salvage) mark the archive dirty; a flush then checkpoints.
//! - **A checkpoint** (the checkpointer thread: every
//!   [`CHECKPOINT_EVERY`], or once [`checkpoint_bytes`] were journaled
//!   since the last; and on close) reads the journal's end, flushes sled
//!   and syncs what sled leaves unsynced (`durable`), writes the control
//!   record with the checkpoint (that end) and syncs it, and only then lets
//!   the journal drop the segment files before it.
//!
//!   *Why the end read first is a checkpoint:* an append journals and
//!   applies its frame under a shared lock that the checkpointer takes
//!   alone, for a moment, to read the journal's end; so every frame
//!   before that end is in sled before the flush that follows, and sled's
//!   flush makes durable every write made before it began. (An append
//!   waits for the unapplied bound before it takes the lock.)
//! - **Opening** scans the journal from the control record's checkpoint,
//!   with acknowledged data reaching its acknowledged position: damage
//!   inside the acknowledged part is [`ArchiveError::Damaged`], naming the
//!   journal file, the offset and the reason; a torn tail is cut and
//!   described (a warning on the log). Every valid batch past the
//!   checkpoint is applied to sled again: the operations are absolute
//!   (a value put, a key removed), and the keys one batch touches belong
//!   to its run (or take the same value from any run: a format stamp, an
//!   artifact's size), so applying them again over whatever sled kept of
//!   them gives the state they left. A writer then checkpoints; a reader
//!   applies them to its scratch copy and leaves every file as it was.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::journal::{self, Journal, JournalConfig, JournalError, Position, Wait};
use crate::{control, keys, lock, Archive, ArchiveError, Inner, Result, Trees};

/// The one writer id this archive's writer journals under (sled admits
/// one process per archive; see `journal`'s "Several writers").
pub(crate) const WRITER: &str = "main";

/// How often the checkpointer checkpoints when anything was journaled.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Journaled bytes past the last checkpoint that wake the checkpointer
/// before [`CHECKPOINT_EVERY`]: a quarter of the unapplied bound, at most
/// 32 MiB (so writers reach the bound only when the checkpointer cannot
/// keep up); half the bound with [`JournalConfig::checkpoint_when_half_full`].
pub fn checkpoint_bytes(config: &JournalConfig) -> u64 {
    if config.checkpoint_when_half_full {
        return (config.unapplied_bytes / 2).max(1);
    }
    (config.unapplied_bytes / 4).clamp(1, 32 << 20)
}

mod ops;

use ops::{apply, decode, ApplyError};
pub(crate) use ops::{Ops, Tree};

/// The journal of an archive opened to write, and its checkpointer.
pub(crate) struct Wal {
    pub(crate) journal: Journal,
    bytes: u64,
    /// Where the last checkpoint reaches.
    checkpointed: AtomicU64,
    /// Checkpoints made since open.
    checkpoints: AtomicU64,
    /// One checkpoint at a time.
    checkpointing: Mutex<()>,
    /// Held shared by an append from its journal write to its sled apply,
    /// alone by a checkpoint while it reads the journal's end.
    order: RwLock<()>,
    /// Set when the archive's last handle goes.
    stop: Arc<AtomicBool>,
    /// Set while the checkpointer holds a handle of the archive (from just
    /// before it takes one to just after it lets go), so that the last
    /// user handle still knows it is the last (see [`Wal::others`]).
    holding: Arc<AtomicBool>,
    checkpointer: Mutex<Option<JoinHandle<()>>>,
}

/// The journal's figures for `reel stats` (read through the recorder's
/// socket while one holds the archive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JournalFigures {
    /// Bytes journaled past the last checkpoint.
    pub unapplied_bytes: u64,
    /// The bound on them ([`JournalConfig::unapplied_bytes`]).
    pub unapplied_bound: u64,
    /// Appends that waited for the checkpointer (the bound).
    pub bound_waits: u64,
    /// Time spent in those waits, in microseconds.
    pub bound_waited_us: u64,
    /// Batches journaled since the archive was opened.
    pub batches: u64,
    /// `fdatasync`s of the journal.
    pub syncs: u64,
    /// Checkpoints since the archive was opened.
    pub checkpoints: u64,
}

/// The archive's words for a journal error: damage is the archive's
/// damage (exit 2, with salvage as the way out), the rest a storage error.
pub(crate) fn journal_error(dir: &Path, e: JournalError) -> ArchiveError {
    match e {
        JournalError::Damaged {
            dir: jdir,
            acknowledged,
            end,
            cut,
        } => ArchiveError::Damaged {
            dir: dir.to_path_buf(),
            detail: format!(
                "its journal {} holds acknowledged batches up to journal position {acknowledged} \
                 (by the control record, or by the journal's own later frames), but its valid \
                 part ends at position {end}, at {}",
                jdir.display(),
                cut.map(|c| c.to_string()).unwrap_or_else(|| {
                    "the clean end of its last file (whole trailing batches are missing)".into()
                })
            ),
        },
        e => ArchiveError::Storage {
            dir: dir.to_path_buf(),
            source: sled::Error::Io(std::io::Error::other(e.to_string())),
        },
    }
}

/// Applies recovered batches to sled (a writer's store, or a reader's
/// scratch copy); returns how many.
pub(crate) fn replay(dir: &Path, trees: &Trees, batches: &[journal::Batch]) -> Result<usize> {
    for batch in batches {
        let records: Vec<&[u8]> = batch.records.iter().map(Vec::as_slice).collect();
        match apply(trees, &records) {
            Ok(()) => {}
            Err(ApplyError::Malformed) => {
                return Err(ArchiveError::Damaged {
                    dir: dir.to_path_buf(),
                    detail: format!(
                        "its journal holds an intact batch at position {} whose records are no \
                         archive operations",
                        batch.position
                    ),
                })
            }
            Err(ApplyError::Sled(e)) => {
                return Err(ArchiveError::Storage {
                    dir: dir.to_path_buf(),
                    source: e,
                })
            }
        }
    }
    Ok(batches.len())
}

/// The torn tail a scan found, said for a reader after a crash: how many
/// facts were written after the last acknowledged flush and never
/// acknowledged, and where the written part was cut; `None` when the
/// journal ends cleanly at the acknowledged position.
pub(crate) fn tail_said(recovered: &journal::Recovered) -> Option<String> {
    if recovered.unacknowledged == 0 && recovered.cut.is_none() {
        return None;
    }
    let tail = &recovered.batches[recovered
        .batches
        .len()
        .saturating_sub(recovered.unacknowledged)..];
    let facts: u64 = tail.iter().map(|b| ops::facts_in(&b.records)).sum();
    let bytes = recovered.end.saturating_sub(recovered.acknowledged);
    let batches = tail.len();
    let written = format!(
        "the last {facts} fact{}, written after the last acknowledged flush and never \
         acknowledged ({batches} batch{}, {bytes} bytes past journal position {}),",
        if facts == 1 { "" } else { "s" },
        if batches == 1 { "" } else { "es" },
        recovered.acknowledged,
    );
    Some(match &recovered.cut {
        Some(cut) => format!("{written} end at {cut}"),
        None => format!(
            "{written} end cleanly at journal position {}",
            recovered.end
        ),
    })
}

impl Archive {
    /// After a crash, the journal's tail written past the last
    /// acknowledged flush, said in reel's words ("the last 147 facts,
    /// written after the last acknowledged flush and never acknowledged
    /// (...), end at a bad checksum at offset X of ..."): not damage, but
    /// the last moments before the crash, which a reader says once.
    /// `None` when the journal ended at what was acknowledged.
    pub fn torn_tail(&self) -> Option<&str> {
        self.inner.torn_tail.as_deref()
    }
}

/// The journal's directory in the archive at `dir`.
pub(crate) fn journal_dir(dir: &Path) -> std::path::PathBuf {
    journal::writer_dir(dir, WRITER).expect("a valid writer id")
}

/// Reads the journal of the archive at `dir` past the control record's
/// checkpoint (never writes); damage is an error.
pub(crate) fn scan(dir: &Path, control: &control::Control) -> Result<journal::Recovered> {
    journal::scan(&journal_dir(dir), control.checkpoint, control.acknowledged)
        .map_err(|e| journal_error(dir, e))
}

impl Wal {
    /// Opens the archive's journal to write: `Recovered` holds what to
    /// apply to sled before anything else is written.
    pub(crate) fn open(
        dir: &Path,
        config: JournalConfig,
        control: &control::Control,
    ) -> Result<(Wal, journal::Recovered)> {
        let bytes = checkpoint_bytes(&config);
        let (journal, recovered) = Journal::open(
            &journal_dir(dir),
            config,
            control.checkpoint,
            control.acknowledged,
        )
        .map_err(|e| journal_error(dir, e))?;
        Ok((
            Wal {
                journal,
                bytes,
                checkpointed: AtomicU64::new(control.checkpoint),
                checkpoints: AtomicU64::new(0),
                checkpointing: Mutex::new(()),
                order: RwLock::new(()),
                stop: Arc::new(AtomicBool::new(false)),
                holding: Arc::new(AtomicBool::new(false)),
                checkpointer: Mutex::new(None),
            },
            recovered,
        ))
    }

    /// Starts the checkpointer thread for the archive `inner`.
    pub(crate) fn start(&self, inner: Weak<Inner>) -> Result<()> {
        let (stop, holding) = (self.stop.clone(), self.holding.clone());
        let spawned = std::thread::Builder::new()
            .name("reel-checkpoint".into())
            .spawn(move || checkpointer(inner, stop, holding));
        match spawned {
            Ok(handle) => {
                *lock(&self.checkpointer) = Some(handle);
                Ok(())
            }
            Err(e) => Err(ArchiveError::Storage {
                dir: self.journal.dir().to_path_buf(),
                source: sled::Error::Io(e),
            }),
        }
    }

    /// Stops the checkpointer (from the last handle's drop; never joins
    /// the thread it runs on).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let handle = lock(&self.checkpointer).take();
        if let Some(handle) = handle {
            handle.thread().unpark();
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }

    /// Handles of the archive the checkpointer may hold now (0 or 1).
    pub(crate) fn others(&self) -> usize {
        usize::from(self.holding.load(Ordering::SeqCst))
    }

    fn wake(&self) {
        if let Some(handle) = lock(&self.checkpointer).as_ref() {
            handle.thread().unpark();
        }
    }

    /// The journal's figures.
    pub(crate) fn figures(&self) -> JournalFigures {
        let stats = self.journal.stats();
        JournalFigures {
            unapplied_bytes: self
                .journal
                .end()
                .saturating_sub(self.checkpointed.load(Ordering::SeqCst)),
            unapplied_bound: self.journal.config().unapplied_bytes,
            bound_waits: stats.bound_waits,
            bound_waited_us: stats.bound_waited_us,
            batches: stats.batches,
            syncs: stats.syncs,
            checkpoints: self.checkpoints.load(Ordering::SeqCst),
        }
    }
}

/// The checkpointer thread: a checkpoint every [`CHECKPOINT_EVERY`] when
/// anything was journaled or written past the journal, or at once when
/// woken (bytes past [`checkpoint_bytes`]); it holds the archive only
/// while it checkpoints.
fn checkpointer(inner: Weak<Inner>, stop: Arc<AtomicBool>, holding: Arc<AtomicBool>) {
    loop {
        std::thread::park_timeout(CHECKPOINT_EVERY);
        if stop.load(Ordering::SeqCst) {
            return;
        }
        holding.store(true, Ordering::SeqCst);
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if inner.checkpoint_due() && !inner.waits_until_half_full() {
            if let Err(e) = inner.checkpoint() {
                tracing::warn!(archive = %inner.dir.display(), "reel: a checkpoint failed (the next one tries again; acknowledged batches stay in the journal): {e}");
            }
        }
        drop(inner);
        holding.store(false, Ordering::SeqCst);
    }
}

impl Inner {
    pub(crate) fn wal(&self) -> Option<&Wal> {
        self.wal.as_ref()
    }

    /// With [`JournalConfig::checkpoint_when_half_full`], whether the
    /// checkpointer leaves the journal to fill (it is under half its bound,
    /// and nothing was written past it).
    fn waits_until_half_full(&self) -> bool {
        let Some(wal) = self.wal() else {
            return false;
        };
        wal.journal.config().checkpoint_when_half_full
            && !self.dirty.load(Ordering::SeqCst)
            && wal
                .journal
                .end()
                .saturating_sub(wal.checkpointed.load(Ordering::SeqCst))
                < wal.bytes
    }

    pub(crate) fn checkpoint_due(&self) -> bool {
        let Some(wal) = self.wal() else {
            return false;
        };
        self.dirty.load(Ordering::SeqCst)
            || wal.journal.end() > wal.checkpointed.load(Ordering::SeqCst)
    }

    /// Makes sled hold everything journaled so far, durably, and records
    /// it (see the module): the epoch goes into sled before sled's flush,
    /// the checkpoint into the control file (synced) only after the flush
    /// and the file syncs, and journal files go only after that.
    pub(crate) fn checkpoint(&self) -> Result<usize> {
        let wal = self.wal();
        let _one = wal.map(|w| lock(&w.checkpointing));
        // Cleared before the flush: a write that lands during it sets it
        // again, and is flushed by the next one.
        self.dirty.store(false, Ordering::SeqCst);
        // Read before sled's flush: every frame before it is in sled (see
        // the module), and every run counted was created before it.
        let position = wal.map(|w| {
            let _alone = reel_core::lock::write(&w.order);
            w.journal.end()
        });
        let last = lock(&self.control).last;
        let next = control::Control {
            epoch: last.epoch + 1,
            runs: self.runs.load(Ordering::SeqCst),
            facts: self.facts.load(Ordering::SeqCst),
            seal: None,
            checkpoint: position.unwrap_or(last.checkpoint),
            acknowledged: last.acknowledged.max(wal.map_or(0, |w| w.journal.synced())),
        };
        self.trees()
            .meta
            .insert(keys::META_CONTROL, &next.meta_value())
            .map_err(|e| self.storage(e))?;
        let n = self.db().flush().map_err(|e| self.storage(e))?;
        // The artifact files an index entry of this flush may name, before
        // the log's sync makes the flush durable (see `files`).
        self.files
            .sync()
            .map_err(|e| self.storage(sled::Error::Io(e)))?;
        self.durable
            .sync()
            .map_err(|e| self.storage(sled::Error::Io(e)))?;
        {
            let mut control = lock(&self.control);
            let next = control::Control {
                acknowledged: next.acknowledged.max(control.last.acknowledged),
                ..next
            };
            control
                .write(next, control::SyncData::Now)
                .map_err(|e| self.control_error(e))?;
        }
        if let (Some(wal), Some(position)) = (wal, position) {
            wal.checkpointed.fetch_max(position, Ordering::SeqCst);
            wal.checkpoints.fetch_add(1, Ordering::SeqCst);
            wal.journal
                .checkpointed(position)
                .map_err(|e| journal_error(&self.dir, e))?;
        }
        Ok(n)
    }

    /// Makes everything appended so far durable: written past the journal
    /// (import, prune, ...), a checkpoint; else the artifact files, then
    /// the journal (one `fdatasync` for every concurrent caller), and the
    /// synced position into the control record.
    pub(crate) fn flush(&self) -> Result<usize> {
        let Some(wal) = self.wal() else {
            return self.checkpoint();
        };
        if self.dirty.load(Ordering::SeqCst) {
            return self.checkpoint();
        }
        self.files
            .sync()
            .map_err(|e| self.storage(sled::Error::Io(e)))?;
        let end = wal.journal.end();
        wal.journal
            .sync_to(end)
            .map_err(|e| journal_error(&self.dir, e))?;
        let synced = wal.journal.synced();
        let mut control = lock(&self.control);
        if synced > control.last.acknowledged {
            let next = control::Control {
                acknowledged: synced,
                ..control.last
            };
            control
                .write(next, control::SyncData::Skip)
                .map_err(|e| self.control_error(e))?;
        }
        Ok(0)
    }
}

impl Archive {
    /// Applies a batch's operations to sled, then journals them as one
    /// frame (see the module); without a journal (never for a writer),
    /// only applies them, for the next flush to checkpoint.
    pub(crate) fn commit(&self, ops: Ops) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let records = ops.records();
        let payload: usize = records.iter().map(|r| 4 + r.len()).sum();
        if payload >= 1 << 30 {
            return Err(ArchiveError::Storage {
                dir: self.inner.dir.clone(),
                source: sled::Error::Io(std::io::Error::other(JournalError::TooLarge.to_string())),
            });
        }
        let applied = |e| match e {
            ApplyError::Sled(e) => self.storage(e),
            ApplyError::Malformed => ArchiveError::Damaged {
                dir: self.inner.dir.clone(),
                detail: "a batch of operations this process built does not read back".into(),
            },
        };
        let Some(wal) = self.inner.wal() else {
            apply(self.trees(), &records).map_err(applied)?;
            self.dirty();
            return Ok(());
        };
        // An older reel must not read an archive whose acknowledged writes
        // may be in a journal it does not know: the stamp says "upgrade".
        self.stamp_format()?;
        wal.journal.wait_for_room(&records);
        let end = {
            let _shared = reel_core::lock::read(&wal.order);
            let end = wal
                .journal
                .append_past_bound(&records, Wait::Written)
                .map_err(|e| journal_error(&self.inner.dir, e))?;
            apply(self.trees(), &records).map_err(applied)?;
            end
        };
        if end.saturating_sub(wal.checkpointed.load(Ordering::SeqCst)) >= wal.bytes {
            wal.wake();
        }
        Ok(())
    }

    /// The journal's figures, when this process writes the archive.
    pub fn journal_figures(&self) -> Option<JournalFigures> {
        self.inner.wal().map(Wal::figures)
    }

    /// Checkpoints now (see the module): sled made durable with everything
    /// journaled, and the journal files it covers dropped.
    pub fn checkpoint(&self) -> Result<()> {
        self.writable()?;
        self.inner.checkpoint().map(|_| ())
    }
}

/// The blocks in every intact frame of every writer's journal of the
/// archive at `dir`, past damaged places too (for salvage: the batches
/// acknowledged since the last checkpoint may be nowhere else), each with
/// the run ordinal of its key. Never writes.
pub(crate) fn journal_blocks(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for writer in journal::writers(dir).unwrap_or_default() {
        let Ok(jdir) = journal::writer_dir(dir, &writer) else {
            continue;
        };
        let Ok(report) = journal::salvage(&jdir) else {
            continue;
        };
        for frame in &report.frames {
            for record in &frame.batch.records {
                if let Some((Tree::Events, key, Some(value))) = decode(record) {
                    if let Some((ordinal, _)) = keys::split_event_key(key) {
                        out.push((ordinal, value.to_vec()));
                    }
                }
            }
        }
    }
    out
}

/// The journal positions the control record of the archive at `dir`
/// holds: (checkpoint, acknowledged); `None` without an intact record.
/// For tests that simulate a power cut (cutting the journal back to what
/// was synced).
#[doc(hidden)]
pub fn journal_positions(dir: &Path) -> Option<(Position, Position)> {
    match control::read(dir).ok()? {
        control::Found::Record(_, c) => Some((c.checkpoint, c.acknowledged)),
        _ => None,
    }
}

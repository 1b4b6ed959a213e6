//! The write-ahead journal: a batch is acknowledged once it is in an
//! append-only file and that file is `fdatasync`ed, so sled can be written
//! off the calls' path (issue 42). This module is the journal on its own;
//! the archive's writer, its checkpointer and its open use it.
//!
//! # Where it lives, and several writers
//!
//! One journal per writer process, each in a directory of its own:
//! `ARCHIVE/journal/WRITER/`, with segment files named by their sequence
//! number (`000000000001.wal`, `000000000002.wal`, ...) and a `lock` file a
//! writer holds (`flock`) while it writes. A writer's positions are its
//! own: the control record keeps a checkpoint and an acknowledged position
//! per writer, and the checkpointer applies each writer's journal in its
//! own order (facts are ordered per run, and a run has one writer). A
//! second recorder on the same archive takes another writer id instead of
//! waiting for the first one's lock; [`writer_dir`] names the directory and
//! [`writers`] lists them.
//!
//! # Positions
//!
//! A [`Position`] counts the frame bytes written to one writer's journal
//! since it began (segment headers are not counted), so positions run on
//! across segment files. [`Journal::append`] returns the position at the
//! end of the batch's frame: once the journal is synced past it, the batch
//! is durable. A checkpoint is such a position too: everything before it is
//! in sled.
//!
//! # Format
//!
//! All integers little-endian. A segment file starts with a 32-byte header:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `REELJNL\0` |
//! | 4 | format version (1) |
//! | 8 | the file's sequence number (its name) |
//! | 8 | the position of its first frame |
//! | 4 | CRC32C of the 28 bytes before |
//!
//! and goes on with frames, back to back, one per batch (the batch
//! envelope: a batch's records are written, checked and cut together):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | CRC32C of the payload, then of the 20 bytes that follow this field |
//! | 4 | payload length |
//! | 8 | the frame's own position |
//! | 8 | the position synced before the frame was written |
//! | 4 | payload: the number of records |
//! | 4 + n, each | payload: a record's length, then its bytes |
//!
//! *The checksum is CRC32C* (the `crc32c` crate): hardware-accelerated on
//! x86-64 (SSE 4.2) and ARMv8, so checking a frame costs far less than
//! writing it; the checksum RocksDB's and LevelDB's logs and iSCSI use;
//! and, unlike a 64-bit hash such as xxh3, it has proven detection of
//! every burst error of up to 32 bits, the damage a torn sector or a
//! flipped byte makes. Four bytes a frame.
//!
//! *The position in each frame* makes stale bytes (an old file reused,
//! zeroes, a frame copied elsewhere) fail to read as the frame that belongs
//! at that place, even with a matching checksum.
//!
//! *The synced position in each frame* is the journal's own record of how
//! far acknowledged data reached when the frame was written: no batch
//! before it can be a torn tail. A scan that stops early looks past its cut
//! for intact frames; one that says everything up to a point past the cut
//! was synced proves the cut is damage, even when the caller's
//! acknowledged position lags (a control record written without a sync).
//! It costs 8 bytes a frame and no sync.
//!
//! # Writing: group commit
//!
//! As in RocksDB's WAL: a writer frames its batch outside any lock, takes
//! a position for it under the journal's lock (a few bytes of work), and
//! queues it. If no writer is leading, it leads: it takes every batch
//! queued by then, writes them with one `write`, and, when any of them
//! waits for durability, pays one `fdatasync` for all of them; then it
//! wakes the writers whose batches that covered. Writers that queue while
//! a leader writes are taken by the next leader. There is no deliberate
//! delay: a lone writer leads at once. A failed write or sync stops the
//! journal for good ([`JournalError::Failed`]): after a failed `fsync` the
//! kernel may have dropped the dirty pages (PostgreSQL's lesson), so
//! nothing after it can be acknowledged.
//!
//! The durability modes map onto [`Wait`]:
//! - **every fact**: each batch with [`Wait::Synced`].
//! - **call boundary**: a call's batches with [`Wait::Written`], then
//!   [`Journal::sync_to`] the last one's position before the call returns
//!   (or its last batch with [`Wait::Synced`]); concurrent calls share
//!   their syncs.
//! - **buffered**: batches with [`Wait::Written`] (in the file, which a
//!   killed process does not lose); the journal's own thread syncs what is
//!   written every [`JournalConfig::sync_within`] (200 ms by default;
//!   sled's background flush, the bound until now, runs every 500 ms), so
//!   an unsynced batch waits at most that bound plus the time of one
//!   group's write and sync (a sync under way when the bound falls due is
//!   waited for first).
//!
//! *Rotation.* When the active file has reached
//! [`JournalConfig::segment_bytes`], the leader syncs it and starts the next
//! one before writing its group (a group is never split across files). A
//! new file is synced with its header, and then its directory, before any
//! frame is written to it: a frame in a file is never lost because the
//! file's name was. Since each file is synced before the next begins, a
//! synced position means every byte before it is synced too.
//!
//! *Bounded.* The journal's unapplied size (what is written past the last
//! checkpoint) has a bound, [`JournalConfig::unapplied_bytes`]: a writer
//! whose batch would pass it waits for [`Journal::checkpointed`] (one batch
//! always goes through when nothing is unapplied). The waits are counted
//! in [`JournalStats`].
//!
//! *Checkpoints.* The checkpointer applies batches to sled, makes sled
//! durable, writes the checkpoint into the control record and syncs it,
//! and only then calls [`Journal::checkpointed`], which drops the segment
//! files wholly before the checkpoint. (A deleted file that a power cut
//! brings back lies before the checkpoint: no scan reads it.)
//!
//! # Reading: recovery
//!
//! [`scan()`] reads a journal without writing a byte: from the segment
//! holding the checkpoint, frame after frame, across files while each file
//! continues where the last one ends, up to the first place that is not an
//! intact frame or to the clean end of the last file. The caller says how
//! far acknowledged data reaches (the control record's acknowledged
//! position: the last position the writer synced and recorded); the
//! frames read, and the intact frames past the place the scan stops, can
//! only raise it (each records what was synced before it was written).
//! That position decides what the end means:
//!
//! - **a torn tail** (the valid part ends at or past the acknowledged
//!   position): normal after a crash; not damage, and not silent either:
//!   the batches past the acknowledged position are returned (they were
//!   written, never acknowledged, and are the recorder's last moments), and
//!   [`Recovered::tail`] says how many, and where and why the tail was cut.
//! - **damage** (the valid part ends before the acknowledged position: a bad
//!   checksum, a file ending early, a missing or damaged file inside the
//!   acknowledged part): [`JournalError::Damaged`], naming the file, the
//!   offset, the position and the reason. [`JournalError::is_damage`] says
//!   so (exit 2, with `reel salvage` as the way out).
//!
//! [`salvage()`] reads every intact frame, past damaged ones too (a frame is
//! found wherever the bytes are an intact frame naming the position that
//! belongs at that place), for `reel salvage`.
//!
//! [`Journal::open`] scans the same way under the writer's lock, syncs the
//! last file (the recovered tail becomes durable before anything is written
//! after it), and starts a new segment file at the valid part's end. The
//! torn bytes stay where they are (evidence), and later scans pass over
//! them: a cut followed by a file that starts at its position is an
//! earlier crash's tail ([`Recovered::earlier_cuts`]), not damage.
//!
//! # What the caller records
//!
//! The acknowledged position is [`Journal::synced`]. The writer stores it
//! in the control record after each sync that advanced it (a `pwrite`, not
//! synced: it survives a killed process), and syncs the record at each
//! checkpoint. After a power cut the stored position may lag the last
//! syncs; the frames' own synced positions then prove what they can.
//!
//! # What a crash can and cannot lose
//!
//! - *A killed process* (SIGKILL, a panic, an OOM kill) loses nothing the
//!   kernel was given: every batch returned by [`Journal::append`], with
//!   either [`Wait`], is in the page cache and survives. A batch still
//!   being written is cut whole (its frame fails its checksum or is short).
//! - *A power cut or a kernel crash* loses what was not synced: batches
//!   acknowledged with [`Wait::Synced`] (or covered by a returned
//!   [`Journal::sync_to`]) survive; buffered ones written less than
//!   [`JournalConfig::sync_within`] (plus one sync) before the cut may not.
//!   What is lost is always a tail: positions are synced in order.
//! - *Detected:* any acknowledged batch missing or changed, as long as the
//!   acknowledged position in the control record survived, or an intact
//!   frame past the damage was written after a sync that covered it: a
//!   flipped byte, a file cut short or cut on a frame boundary, a missing
//!   or damaged file, a stale file put back.
//! - *Not detected:* a loss of whole trailing batches together with the
//!   control record's matching update (a device that acknowledged a sync it
//!   did not do, for both files): the journal then ends cleanly where the
//!   older control record says it should. Nor a CRC32C collision (one in
//!   2^32 for random damage; none for bursts up to 32 bits).

mod frame;
mod salvage;
mod scan;

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use salvage::{salvage, SalvageReport, Salvaged};
pub use scan::{scan, Batch, Cut, CutReason, Recovered};

use frame::{Header, Unplaced, HEADER_LEN};

/// A place in one writer's journal: the count of frame bytes before it.
pub type Position = u64;

/// The directory, inside an archive's, that holds the writers' journals.
pub const JOURNAL_DIR: &str = "journal";

/// The journal of writer `writer` in the archive at `archive`. A writer id
/// is 1 to 64 ASCII letters, digits, `-` or `_`.
pub fn writer_dir(archive: &Path, writer: &str) -> Result<PathBuf, JournalError> {
    let ok = (1..=64).contains(&writer.len())
        && writer
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        return Err(JournalError::WriterId {
            id: writer.to_owned(),
        });
    }
    Ok(archive.join(JOURNAL_DIR).join(writer))
}

/// The writer ids with a journal in the archive at `archive`, sorted.
pub fn writers(archive: &Path) -> Result<Vec<String>, JournalError> {
    let dir = archive.join(JOURNAL_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(JournalError::io(&dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| JournalError::io(&dir, e))?;
        if let Some(name) = entry.file_name().to_str() {
            if entry.path().is_dir() && writer_dir(archive, name).is_ok() {
                out.push(name.to_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// How a journal writes.
#[derive(Debug, Clone)]
pub struct JournalConfig {
    /// A segment file is closed, and the next one started, once it holds
    /// this many bytes (it may pass it by one group). Default 64 MiB.
    pub segment_bytes: u64,
    /// The most the journal holds past the last checkpoint before writers
    /// wait for the checkpointer. Default 256 MiB.
    pub unapplied_bytes: u64,
    /// The longest a written batch waits for a sync when nobody waits for
    /// one (buffered durability), or `None` for no syncing thread. Default
    /// 200 ms.
    pub sync_within: Option<Duration>,
}

impl Default for JournalConfig {
    fn default() -> JournalConfig {
        JournalConfig {
            segment_bytes: 64 << 20,
            unapplied_bytes: 256 << 20,
            sync_within: Some(Duration::from_millis(200)),
        }
    }
}

/// What [`Journal::append`] waits for before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The batch is in the file (a killed process does not lose it; a
    /// power cut may).
    Written,
    /// The batch is synced (`fdatasync`): durable.
    Synced,
}

/// Counters of a journal since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Batches appended.
    pub batches: u64,
    /// Frame bytes appended.
    pub bytes: u64,
    /// Leaders' writes (each wrote one group of batches).
    pub writes: u64,
    /// `fdatasync`s of segment files (rotations' included).
    pub syncs: u64,
    /// Segment files created.
    pub segments: u64,
    /// Appends that waited for a checkpoint (the unapplied bound).
    pub bound_waits: u64,
    /// Time spent in those waits, in microseconds.
    pub bound_waited_us: u64,
}

/// The journal's errors. Each message says what happened and what to do.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Acknowledged batches are missing or damaged.
    #[error(
        "journal {dir} is damaged: acknowledged batches reach journal position {acknowledged} \
         (by the archive's record, or by the journal's own later frames), but its valid part \
         ends at position {end}, at {}; nothing was changed: keep a copy of the archive \
         directory as it is, then recover every intact batch with `reel salvage`",
        cut.as_ref().map(|c| c.to_string())
            .unwrap_or_else(|| "the clean end of its last file (whole trailing batches are missing)".into())
    )]
    Damaged {
        /// The journal's directory.
        dir: PathBuf,
        /// How far acknowledged data reaches (the caller's position, or
        /// further by the journal's own frames).
        acknowledged: Position,
        /// Where the valid part ends.
        end: Position,
        /// Where and why it stops, unless at the clean end of its last file.
        cut: Option<Box<Cut>>,
    },
    /// A segment file of a newer journal format.
    #[error(
        "journal file {file} was written by a newer reel (journal format {found}; this reel reads \
         format {}): upgrade reel",
        frame::VERSION
    )]
    NewerFormat {
        /// The file.
        file: PathBuf,
        /// Its format version.
        found: u32,
    },
    /// Another process writes this journal.
    #[error(
        "journal {dir} is held by another writer process: stop it, or give this writer another \
         writer id"
    )]
    Locked {
        /// The journal's directory.
        dir: PathBuf,
    },
    /// The file system failed.
    #[error("journal {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A batch too large for one frame.
    #[error(
        "a batch of more than {} bytes is too large for one journal frame: split it",
        frame::MAX_PAYLOAD
    )]
    TooLarge,
    /// A write or sync failed earlier: the journal takes no more batches.
    #[error(
        "journal {dir} stopped after a failed write or sync ({detail}); batches not acknowledged \
         before it were not made durable: free the disk or fix the device, then reopen the \
         archive (its open recovers the journal's valid part)"
    )]
    Failed {
        /// The journal's directory.
        dir: PathBuf,
        /// The failure.
        detail: String,
    },
    /// The journal was closed.
    #[error("journal {dir} is closed: reopen the archive to write")]
    Closed {
        /// The journal's directory.
        dir: PathBuf,
    },
    /// A writer id that cannot name a directory.
    #[error("{id:?} is not a journal writer id: use 1 to 64 ASCII letters, digits, `-` or `_`")]
    WriterId {
        /// The id given.
        id: String,
    },
}

impl JournalError {
    pub(crate) fn io(path: &Path, source: io::Error) -> JournalError {
        JournalError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// True for acknowledged data missing or damaged (exit 2).
    pub fn is_damage(&self) -> bool {
        matches!(self, JournalError::Damaged { .. })
    }
}

/// A writer's journal: appends batches with group commit (see the module).
pub struct Journal {
    shared: Arc<Shared>,
    syncer: Option<JoinHandle<()>>,
}

struct Shared {
    dir: PathBuf,
    config: JournalConfig,
    state: Mutex<State>,
    /// A leader finished, a checkpoint lowered the unapplied size, or the
    /// journal failed or closed.
    changed: Condvar,
    /// Wakes the syncing thread to stop.
    stopping: Condvar,
    /// The active segment file: only the leader locks it.
    active: Mutex<Active>,
    /// Held (flocked) while this process writes the journal.
    _lock: File,
}

struct State {
    /// Placed frames not yet written, in position order.
    pending: Vec<Vec<u8>>,
    /// The end of the last queued frame.
    queued: Position,
    /// The end of the last frame in the file.
    written: Position,
    /// The end of the last synced frame.
    synced: Position,
    /// The furthest position a waiting writer wants synced.
    sync_wanted: Position,
    /// A leader is writing.
    leading: bool,
    /// The last checkpoint.
    checkpoint: Position,
    /// Segment files by sequence number, with their first position when
    /// their header reads (the last is the active one).
    segments: Vec<(u64, Option<Position>)>,
    failed: Option<String>,
    closed: bool,
    stats: JournalStats,
}

struct Active {
    file: File,
    seq: u64,
    /// Bytes in the file.
    len: u64,
    /// Bytes written since its last sync.
    unsynced: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Creates `dir` and the directories above it that are missing, each
/// synced into its parent.
fn create_dirs(dir: &Path) -> Result<(), JournalError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(parent)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(JournalError::io(dir, e)),
    }
    if let Some(parent) = dir.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| JournalError::io(dir, e))
}

/// Creates segment `seq` starting at `base`: header written and synced,
/// then the directory synced.
fn create_segment(dir: &Path, seq: u64, base: Position) -> Result<Active, JournalError> {
    let path = dir.join(scan::file_name(seq));
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&path)
        .map_err(|e| JournalError::io(&path, e))?;
    file.write_all(&Header { seq, base }.encode())
        .and_then(|()| file.sync_all())
        .map_err(|e| JournalError::io(&path, e))?;
    sync_dir(dir)?;
    Ok(Active {
        file,
        seq,
        len: HEADER_LEN as u64,
        unsynced: false,
    })
}

impl Journal {
    /// Opens the journal in `dir` to write (created when missing): takes
    /// the writer's lock, [`scan()`]s it from the checkpoint `from` with
    /// acknowledged data reaching `acknowledged` (damage is an error, and
    /// nothing is written then), syncs its last file, and starts a new
    /// segment file at the end of its valid part. The [`Recovered`]
    /// batches are for the caller to apply; they count as unapplied until
    /// [`Journal::checkpointed`].
    pub fn open(
        dir: &Path,
        config: JournalConfig,
        from: Position,
        acknowledged: Position,
    ) -> Result<(Journal, Recovered), JournalError> {
        create_dirs(dir)?;
        let lock_path = dir.join("lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| JournalError::io(&lock_path, e))?;
        match lock_file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(JournalError::Locked {
                    dir: dir.to_path_buf(),
                })
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(JournalError::io(&lock_path, e)),
        }
        let recovered = scan(dir, from, acknowledged)?;
        let mut segments = Vec::new();
        let files = scan::list(dir)?;
        for (seq, path) in &files {
            let mut head = Vec::new();
            {
                use std::io::Read as _;
                File::open(path)
                    .and_then(|f| f.take(HEADER_LEN as u64).read_to_end(&mut head))
                    .map_err(|e| JournalError::io(path, e))?;
            }
            segments.push((*seq, Header::decode(&head).ok().map(|h| h.base)));
        }
        // The tail recovered from the last file (written, maybe not synced)
        // becomes durable before anything is acknowledged after it.
        if let Some((_, path)) = files.last() {
            File::open(path)
                .and_then(|f| f.sync_data())
                .map_err(|e| JournalError::io(path, e))?;
        }
        let seq = recovered.last_seq + 1;
        let active = create_segment(dir, seq, recovered.end)?;
        segments.push((seq, Some(recovered.end)));
        let end = recovered.end;
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            config,
            state: Mutex::new(State {
                pending: Vec::new(),
                queued: end,
                written: end,
                synced: end,
                sync_wanted: end,
                leading: false,
                checkpoint: from.min(end),
                segments,
                failed: None,
                closed: false,
                stats: JournalStats {
                    segments: 1,
                    ..JournalStats::default()
                },
            }),
            changed: Condvar::new(),
            stopping: Condvar::new(),
            active: Mutex::new(active),
            _lock: lock_file,
        });
        let syncer = match shared.config.sync_within {
            Some(every) => {
                let shared = shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("reel-journal-sync".into())
                    .spawn(move || shared.sync_every(every));
                Some(spawned.map_err(|e| JournalError::io(dir, e))?)
            }
            None => None,
        };
        Ok((Journal { shared, syncer }, recovered))
    }

    /// Appends one batch of records, as one frame, and returns the
    /// position at its end once `wait` holds. Past the unapplied bound, it
    /// first waits for a checkpoint.
    pub fn append(&self, records: &[&[u8]], wait: Wait) -> Result<Position, JournalError> {
        let frame = Unplaced::new(records).ok_or(JournalError::TooLarge)?;
        let len = frame.len();
        let s = &self.shared;
        let mut st = lock(&s.state);
        let over = |st: &State| {
            st.queued > st.checkpoint
                && st.queued - st.checkpoint + len > s.config.unapplied_bytes
                && st.failed.is_none()
                && !st.closed
        };
        if over(&st) {
            st.stats.bound_waits += 1;
            let began = Instant::now();
            while over(&st) {
                st = s.changed.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            st.stats.bound_waited_us += began.elapsed().as_micros() as u64;
        }
        s.usable(&st)?;
        let bytes = frame.place(st.queued, st.synced);
        st.pending.push(bytes);
        st.queued += len;
        st.stats.batches += 1;
        st.stats.bytes += len;
        let end = st.queued;
        let synced = match wait {
            Wait::Written => 0,
            Wait::Synced => end,
        };
        s.drive(st, end, synced)?;
        Ok(end)
    }

    /// Returns once every batch up to `position` (clamped to what was
    /// appended) is synced: the call-boundary wait. Concurrent callers
    /// share one `fdatasync`.
    pub fn sync_to(&self, position: Position) -> Result<(), JournalError> {
        let st = lock(&self.shared.state);
        let to = position.min(st.queued);
        self.shared.drive(st, to, to)
    }

    /// Records that everything before `position` is in sled and that the
    /// checkpoint is durable (in the synced control record): writers
    /// waiting on the unapplied bound go on, and the segment files wholly
    /// before `position` are deleted. Returns how many were.
    pub fn checkpointed(&self, position: Position) -> Result<usize, JournalError> {
        let s = &self.shared;
        let drop: Vec<u64> = {
            let mut st = lock(&s.state);
            st.checkpoint = st.checkpoint.max(position.min(st.queued));
            s.changed.notify_all();
            // A file can go when a later one starts at or before the
            // checkpoint; never the active (last) one.
            let mut next_base = None;
            let mut drop = Vec::new();
            for &(seq, base) in st.segments.iter().rev() {
                if next_base.is_some_and(|b| b <= st.checkpoint) {
                    drop.push(seq);
                }
                if base.is_some() {
                    next_base = base;
                }
            }
            st.segments.retain(|(seq, _)| !drop.contains(seq));
            drop
        };
        for seq in &drop {
            let path = s.dir.join(scan::file_name(*seq));
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(JournalError::io(&path, e)),
            }
        }
        Ok(drop.len())
    }

    /// Syncs everything appended, stops the syncing thread, and returns the
    /// position the journal ends at (all of it durable).
    pub fn close(mut self) -> Result<Position, JournalError> {
        let end = self.finish();
        end.and_then(|end| {
            let st = lock(&self.shared.state);
            match &st.failed {
                Some(detail) => Err(JournalError::Failed {
                    dir: self.shared.dir.clone(),
                    detail: detail.clone(),
                }),
                None => Ok(end),
            }
        })
    }

    /// Syncs what is appended and stops the syncing thread; the journal
    /// takes no more batches.
    fn finish(&mut self) -> Result<Position, JournalError> {
        let s = &self.shared;
        let st = lock(&s.state);
        let end = st.queued;
        let synced = if st.closed {
            drop(st);
            Ok(())
        } else {
            s.drive(st, end, end)
        };
        lock(&s.state).closed = true;
        s.stopping.notify_all();
        s.changed.notify_all();
        if let Some(syncer) = self.syncer.take() {
            let _ = syncer.join();
        }
        synced.map(|()| end)
    }

    /// The journal's counters.
    pub fn stats(&self) -> JournalStats {
        lock(&self.shared.state).stats
    }

    /// How far the journal is synced: the acknowledged position the caller
    /// keeps in its control record.
    pub fn synced(&self) -> Position {
        lock(&self.shared.state).synced
    }

    /// The journal's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }
}

impl Drop for Journal {
    /// Syncs what was appended (as [`Journal::close`], its error logged).
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::warn!("closing the journal: {e}");
        }
    }
}

impl Shared {
    fn usable(&self, st: &State) -> Result<(), JournalError> {
        if let Some(detail) = &st.failed {
            return Err(JournalError::Failed {
                dir: self.dir.clone(),
                detail: detail.clone(),
            });
        }
        if st.closed {
            return Err(JournalError::Closed {
                dir: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Returns once the file holds everything up to `written` and is
    /// synced up to `synced`, leading a group when nobody is.
    fn drive<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        written: Position,
        synced: Position,
    ) -> Result<(), JournalError> {
        loop {
            if st.written >= written && st.synced >= synced {
                return Ok(());
            }
            if let Some(detail) = &st.failed {
                return Err(JournalError::Failed {
                    dir: self.dir.clone(),
                    detail: detail.clone(),
                });
            }
            st.sync_wanted = st.sync_wanted.max(synced);
            if st.leading {
                st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            // Lead: take every queued batch.
            st.leading = true;
            let group = std::mem::take(&mut st.pending);
            let start = st.written;
            let target = st.queued;
            let sync = st.sync_wanted > st.synced;
            drop(st);
            let result = self.write_group(start, &group, sync);
            st = lock(&self.state);
            st.leading = false;
            match result {
                Ok(done) => {
                    st.written = target;
                    st.stats.writes += u64::from(!group.is_empty());
                    st.stats.syncs += done.syncs;
                    if sync {
                        st.synced = target;
                    }
                    if let Some(seq) = done.rotated {
                        // The files before the new one are synced whole.
                        st.synced = st.synced.max(start);
                        st.segments.push((seq, Some(start)));
                        st.stats.segments += 1;
                    }
                }
                Err(e) => st.failed = Some(e.to_string()),
            }
            self.changed.notify_all();
        }
    }

    /// The leader's work: rotate when due, write the group, sync.
    fn write_group(
        &self,
        start: Position,
        group: &[Vec<u8>],
        sync: bool,
    ) -> Result<Written, JournalError> {
        let mut active = lock(&self.active);
        let mut done = Written {
            rotated: None,
            syncs: 0,
        };
        let path = |seq| self.dir.join(scan::file_name(seq));
        if !group.is_empty()
            && active.len >= self.config.segment_bytes
            && active.len > HEADER_LEN as u64
        {
            if active.unsynced {
                active
                    .file
                    .sync_data()
                    .map_err(|e| JournalError::io(&path(active.seq), e))?;
                done.syncs += 1;
            }
            let seq = active.seq + 1;
            *active = create_segment(&self.dir, seq, start)?;
            done.rotated = Some(seq);
        }
        let bytes = match group {
            [one] => std::borrow::Cow::Borrowed(one),
            many => std::borrow::Cow::Owned(many.concat()),
        };
        if !bytes.is_empty() {
            active
                .file
                .write_all(&bytes)
                .map_err(|e| JournalError::io(&path(active.seq), e))?;
            active.len += bytes.len() as u64;
            active.unsynced = true;
        }
        if sync && active.unsynced {
            active
                .file
                .sync_data()
                .map_err(|e| JournalError::io(&path(active.seq), e))?;
            active.unsynced = false;
            done.syncs += 1;
        }
        Ok(done)
    }

    /// The syncing thread: every `every`, syncs what is written.
    fn sync_every(&self, every: Duration) {
        let mut st = lock(&self.state);
        loop {
            // Checked under the lock the wait releases: a close is never
            // missed.
            if st.closed || st.failed.is_some() {
                return;
            }
            st = self
                .stopping
                .wait_timeout(st, every)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            if !st.closed && st.queued > st.synced {
                let to = st.queued;
                // A failure is kept in the state: the next append reports it.
                let _ = self.drive(st, to, to);
                st = lock(&self.state);
            }
        }
    }
}

/// What a leader's write did besides writing.
struct Written {
    /// The new segment's sequence number, when it rotated.
    rotated: Option<u64>,
    /// `fdatasync`s paid.
    syncs: u64,
}

#[cfg(test)]
mod tests;

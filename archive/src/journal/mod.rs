//! The write-ahead journal: a batch is acknowledged once it is in an
//! append-only file and that file is `fdatasync`ed, so sled can be written
//! off the calls' path (issue 42). This module is the journal on its own;
//! the archive's writer, its checkpointer and its open use it.
//!
//! ```
//! use reel_archive::journal::{scan, writer_dir, Journal, JournalConfig, Wait};
//!
//! let archive = tempfile::tempdir().unwrap();
//! let dir = writer_dir(archive.path(), "recorder-1").unwrap();
//! // A new journal: nothing checkpointed, nothing acknowledged yet.
//! let (journal, recovered) = Journal::open(&dir, JournalConfig::default(), 0, 0).unwrap();
//! assert!(recovered.batches.is_empty());
//! // A batch of two records, acknowledged once synced.
//! let end = journal.append(&[b"fact", b"run record"], Wait::Synced).unwrap();
//! assert_eq!(journal.synced(), end);
//! // Buffered: written now, synced within `sync_within`.
//! let tail = journal.append(&[b"progress"], Wait::Written).unwrap();
//! journal.close().unwrap();
//!
//! // After a crash (or a close), a reader: from the checkpoint (0), with
//! // acknowledged data reaching `end` (what the control record holds).
//! let found = scan(&dir, 0, end).unwrap();
//! assert_eq!(found.batches.len(), 2);
//! assert_eq!(found.batches[1].end, tail);
//! // The buffered batch lies past the acknowledged position: the tail.
//! assert_eq!(found.unacknowledged, 1);
//! ```
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

mod error;
mod frame;
mod salvage;
mod scan;
mod writer;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::JournalError;
pub use salvage::{salvage, SalvageReport, Salvaged};
pub use scan::{scan, Batch, Cut, CutReason, Recovered};
pub use writer::Journal;

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
    /// Not for recording: the archive's checkpointer then checkpoints only
    /// once half of [`JournalConfig::unapplied_bytes`] is unapplied, never
    /// on its timer (a flush after writes past the journal, an explicit
    /// checkpoint and the close still checkpoint), so the journal fills.
    /// For tests and benchmarks of the open that applies a full journal
    /// after a crash (reel-bench's `open-after-crash` row). Default `false`.
    #[doc(hidden)]
    pub checkpoint_when_half_full: bool,
}

impl Default for JournalConfig {
    fn default() -> JournalConfig {
        JournalConfig {
            segment_bytes: 64 << 20,
            unapplied_bytes: 256 << 20,
            sync_within: Some(Duration::from_millis(200)),
            checkpoint_when_half_full: false,
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

#[cfg(test)]
mod tests;

//! # reel-archive: reel's storage
//!
//! An embedded sled database holding runs (and calls outside any run) as
//! append-only streams of facts, in blocks; the [live] socket protocol that
//! serves its reads while a recorder holds it; and [tapes](tape) in and out
//! of it. The fact model, the stream rules and the tape format are the
//! core's (`reel`).
//!
//! ```
//! use reel_archive::{Archive, ArchiveConfig, RunFilter};
//! use reel_core::fact::{FactKind, NewFact, Producer, Progress, RunStarted, RunEnded, RunStatus};
//! use serde_json::json;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let archive = Archive::open(dir.path(), ArchiveConfig::default()).unwrap();
//! let fact = |kind| NewFact { at: 1, offset: 0, call: None, kind };
//! archive.append("run-1", vec![
//!     fact(FactKind::RunStarted(RunStarted {
//!         run_id: "run-1".into(),
//!         session_id: None,
//!         identity: None,
//!         producer: Producer { name: "doc".into(), version: "1".into() },
//!         labels: Default::default(),
//!         teardown_scopes: vec![],
//!     })),
//!     fact(FactKind::Progress(Progress { payload: json!({"message": "working"}), count: 1, delivered: false })),
//! ]).unwrap();
//! archive.append("run-1", vec![fact(FactKind::RunEnded(RunEnded { status: RunStatus::Completed }))]).unwrap();
//!
//! let facts: Vec<_> = archive.facts("run-1", ..).unwrap().collect::<Result<_, _>>().unwrap();
//! assert_eq!(facts.iter().map(|f| f.seq).collect::<Vec<_>>(), vec![0, 1, 2]);
//! let page = archive.list_runs(&RunFilter::default()).unwrap();
//! assert_eq!(page.runs[0].run_id, "run-1");
//! ```
//!
//! The archive: an embedded sled database holding many runs.
//!
//! Trees by role, not per run (see the `keys` module for the layout, known only there):
//! run records, facts stored in blocks, content-addressed artifacts, and index
//! trees by start time, tenant, tool and status. Listing runs reads the
//! indexes and run records, never the facts.
//!
//! # Contract
//!
//! - [`Archive::append`] is the single sequencer: it numbers facts per run,
//!   gapless from 0, and stores each batch as one block (one sled insert, so a
//!   crash never tears a fact). The first batch of a run must start with
//!   `run.started`; a batch containing `run.ended` closes the run. Every
//!   batch is held to the stream rules of [`reel_core::rules`] before any of it is
//!   stored.
//! - [`Archive::import_run_with_artifacts`] (and [`Archive::import_run`])
//!   is all or nothing: it checks the whole stream against the same rules,
//!   every artifact against its digest and the run id's absence, then
//!   writes everything in one sled transaction. A refused or interrupted
//!   import leaves no trace; of concurrent imports of one run id, exactly
//!   one wins.
//! - Appends are durable after [`Archive::flush`]: one `fdatasync` of the
//!   write-ahead journal shared by concurrent callers (or within the
//!   journal's `sync_within`, 200 ms); a checkpointer writes sled off the
//!   calls' path (see [`journal`] and [`CHECKPOINT_EVERY`]). After a
//!   crash, [`Archive::open`] applies the journal past the last checkpoint,
//!   finds every run that was still running, rebuilds its record from its
//!   facts, and marks it [`RunState::Incomplete`].
//! - sled locks its directory to one process: a second opener gets
//!   [`ArchiveError::Locked`], naming the directory, at once.
//! - Reading never panics on stored bytes: a damaged block is reported as
//!   [`ArchiveError::Corrupt`] with the run and seq range it held, and the
//!   facts around it still read.

mod block;
pub mod claim;
mod control;
mod durable;
mod error;
mod files;
mod fingerprint;
mod follow;
#[doc(hidden)]
pub mod fuzzing;
mod import;
pub mod journal;
mod keys;
mod list;
pub mod live;
mod open;
mod prune;
mod read;
mod record;
mod recover;
mod salvage;
mod stats;
mod store;
mod summary;
pub mod tape;
mod verify;
mod wal;
pub mod wire;
mod write;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use reel_core::codec::Digest;
use reel_core::fact::Fingerprint;
use reel_core::rules::StreamRules;
use reel_core::run::RunRecord;
use reel_core::sequence::Sequencer;

pub use error::{ArchiveError, Result};
pub use files::read_artifact_file;
pub use fingerprint::{FingerprintKey, Keyring, CONFIG_DIR_ENV, KEY_ENV, KEY_FILE};
pub use list::{Cursor, DamagedRun, RunFilter, RunPage};
pub use open::ArchiveConfig;
pub use prune::{PruneFilter, PruneReport};
pub use read::Facts;
pub use salvage::{salvage, LostSeqs, SalvageReport, SalvagedRun};
pub use stats::ArchiveStats;
pub use tape::TapeExt;
pub use verify::{Problem, VerifyReport};
#[doc(hidden)]
pub use wal::journal_positions;
pub use wal::{JournalFigures, CHECKPOINT_EVERY};

/// The archive format version this build writes, and the newest it reads.
///
/// | format | what it adds |
/// |---|---|
/// | 1 | blocks of version 1 (plain), run records of version 1 |
/// | 2 | blocks of version 2 (lz4-compressed when smaller) |
/// | 3 | blocks of version 3 (a zstd frame when smaller); version 2 read, no longer written |
/// | 4 | artifact bytes in content-addressed files (`artifacts/`), indexed in sled; those an older reel kept in sled still read |
/// | 5 | the round's one step. A write-ahead journal (`journal/`) acknowledges writes: batches past the control record's checkpoint are in it and not yet in sled. Facts may carry fields format 4 lacks: a `log` of the run naming the calls in flight (`in_flight`), a tool error kept structured (`result`). A reel that knows neither must not read or write the archive. Older facts read unchanged (the fields default empty, their bytes the same) |
/// | 6 | the round's one step. A summary of each run that ends (`summaries`: its duration and state, per tool the calls, errors, progress reports and a histogram of durations), journaled with the run's last block; runs without one (older, crashed before this reel, imported, running) are summarized from their facts when an overview needs them. Facts are unchanged |
///
/// Every new block or record version raises it. An archive stamped newer
/// than this is refused on open ([`ArchiveError::NewerFormat`]), never read
/// as damage. An older one is read as it is; its stamp is raised when this
/// reel first writes a run into it (see [`Archive::open`]).
pub const FORMAT_VERSION: u32 = 6;

/// An open archive. Cheap to clone; all clones share one database and one
/// sequencer.
#[derive(Clone)]
pub struct Archive {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    /// sled's store and its trees: `None` only while the last handle is
    /// dropped (see `Drop for Inner`).
    db: Option<sled::Db>,
    trees: Option<Trees>,
    key: Keyring,
    live: Mutex<HashMap<String, Arc<Mutex<LiveRun>>>>,
    appended: tokio::sync::watch::Sender<u64>,
    /// The format the archive is stamped with (raised to
    /// [`FORMAT_VERSION`] before this reel's first write).
    format: std::sync::atomic::AtomicU32,
    /// What makes a flush durable beyond sled's own (see `durable`).
    durable: durable::Durable,
    /// The artifact files (see `files`), in the archive directory itself
    /// (never a scratch copy: they are written once and never changed).
    files: files::Files,
    /// The control record (see `control`); its lock also orders flushes.
    control: Mutex<control::Writer>,
    /// Runs created so far, for the control record.
    runs: std::sync::atomic::AtomicU64,
    /// Facts the store holds, for the control record.
    facts: std::sync::atomic::AtomicU64,
    /// Written since the last flush: the last handle's drop flushes.
    dirty: std::sync::atomic::AtomicBool,
    /// The least ordinal a new run may take (see [`Archive::new_ordinal`]).
    next_ordinal: std::sync::atomic::AtomicU64,
    /// Opened only to read ([`ArchiveConfig::read_only`]).
    read_only: bool,
    /// The journal's torn tail found at open (see [`Archive::torn_tail`]).
    torn_tail: Option<String>,
    /// The recovered copy a read-only open reads from, when the store was
    /// not sealed whole (removed with the last handle).
    scratch: Option<tempfile::TempDir>,
    /// The write-ahead journal and its checkpointer, for a writer (see
    /// `wal`); `None` for a reader, and once the last handle closed it.
    wal: Option<wal::Wal>,
    /// A writer's claim on the archive (see `claim`), let go after the
    /// last handle sealed the store (fields drop after `Drop::drop`).
    _claim: Option<std::fs::File>,
}

pub(crate) struct Trees {
    pub meta: sled::Tree,
    pub run_ids: sled::Tree,
    pub runs: sled::Tree,
    pub events: sled::Tree,
    /// Artifact bytes as older reels stored them (see `files`).
    pub artifacts: sled::Tree,
    /// Artifact files: digest -> size (see `files`).
    pub artifact_files: sled::Tree,
    pub by_time: sled::Tree,
    pub by_tenant: sled::Tree,
    pub by_tool: sled::Tree,
    pub by_status: sled::Tree,
    pub salvaged: sled::Tree,
    pub pruned: sled::Tree,
    /// Run summaries (see `summary`).
    pub summaries: sled::Tree,
}

/// A run this process is writing.
struct LiveRun {
    ordinal: u64,
    record: RunRecord,
    /// Numbers the run's appends (the one numberer, `reel_core::sequence`).
    seq: Sequencer,
    /// Where the run stands under the stream rules (the call ids it has
    /// started among them): each batch is checked from here.
    rules: StreamRules,
    head: Digest,
    /// The run's summary so far, stored when the run ends.
    summary: reel_core::summary::SummaryBuilder,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn trees(&self) -> &Trees {
        self.trees
            .as_ref()
            .expect("open until the last handle is dropped")
    }

    fn db(&self) -> &sled::Db {
        self.db
            .as_ref()
            .expect("open until the last handle is dropped")
    }

    fn storage(&self, source: sled::Error) -> ArchiveError {
        match source {
            // A read that meets corrupted data is damage, as at open; so
            // is a file of the open store gone missing (a deleted blob).
            sled::Error::Corruption { at, .. } => ArchiveError::Damaged {
                dir: self.dir.clone(),
                detail: corruption_detail(at),
            },
            sled::Error::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
                ArchiveError::Damaged {
                    dir: self.dir.clone(),
                    detail: format!("a file of the store is missing ({io})"),
                }
            }
            source => ArchiveError::Storage {
                dir: self.dir.clone(),
                source,
            },
        }
    }

    fn control_error(&self, e: std::io::Error) -> ArchiveError {
        ArchiveError::Storage {
            dir: self.dir.clone(),
            source: sled::Error::Io(std::io::Error::new(
                e.kind(),
                format!("writing {}: {e}", control::CONTROL_FILE),
            )),
        }
    }
}

/// The last handle seals the store (see `control`) once sled has let go
/// of its files, so that the next open need not probe a copy. A writer
/// first flushes what it wrote, then lets sled recover the store once more
/// and close it: sled's open records its recovery in a snapshot and pads
/// the log's last segment, so a store sealed after that is one a reader's
/// open leaves byte for byte as it is. A reader that read the store in
/// place (it was sealed) seals it again: sled's open touched the files'
/// times, not their bytes. A reader of a scratch copy seals nothing.
impl Drop for Inner {
    fn drop(&mut self) {
        if self.trees.is_none() || self.scratch.is_some() {
            return;
        }
        if let Some(wal) = &self.wal {
            wal.stop();
        }
        // Everything journaled goes into sled, and the journal closes (its
        // lock with it), before the store is sealed.
        if !self.read_only && self.checkpoint_due() && self.checkpoint().is_err() {
            return;
        }
        self.wal = None;
        let mut sealed = lock(&self.control).last;
        self.trees = None;
        self.db = None;
        if !self.read_only {
            if wait_for_sled(&self.dir).is_none() {
                return;
            }
            match sled::Config::new()
                .path(&self.dir)
                .flush_every_ms(None)
                .open()
            {
                Ok(reopened) => drop(reopened),
                Err(_) => return,
            }
        }
        let Some(held) = wait_for_sled(&self.dir) else {
            return;
        };
        if let Ok(seal) = control::seal_of(&self.dir) {
            sealed.seal = Some(seal);
            let mut writer = lock(&self.control);
            if let Err(e) = writer.write(sealed, control::SyncData::Now) {
                tracing::warn!(archive = %self.dir.display(), "reel: could not seal the archive's control record: {e}");
            }
        }
        let _ = held.unlock();
    }
}

/// Waits until sled has let go of the store in `dir` (its lock), and
/// holds the lock.
fn wait_for_sled(dir: &Path) -> Option<std::fs::File> {
    let db = std::fs::File::open(dir.join("db")).ok()?;
    let started = std::time::Instant::now();
    while db.try_lock().is_err() {
        if started.elapsed() > std::time::Duration::from_millis(1500) {
            tracing::debug!(archive = %dir.display(), "reel: sled still holds the store; not sealed");
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Some(db)
}

/// The last handle of a writer marks the runs it leaves running
/// incomplete (as the next open would) and flushes, so that the store it
/// seals is one a reader's open does not change.
impl Drop for Archive {
    fn drop(&mut self) {
        // The checkpointer may hold a handle for a moment: not a user's.
        let others = self.inner.wal().map_or(0, wal::Wal::others);
        if Arc::strong_count(&self.inner).saturating_sub(others) > 1 || self.inner.read_only {
            return;
        }
        if self.recover().is_ok() {
            self.dirty();
        }
    }
}

/// What sled's `Corruption` means, in words (its own text names a
/// backtrace).
pub(crate) fn corruption_detail(at: Option<sled::DiskPtr>) -> String {
    match at {
        Some(at) => format!(
            "sled read bytes that are not what it wrote (a checksum does not match, at {at})"
        ),
        None => "sled read bytes that are not what it wrote (a checksum does not match)".into(),
    }
}

pub(crate) use reel_core::lock::lock;

impl Archive {
    /// The archive directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub(crate) fn trees(&self) -> &Trees {
        self.inner.trees()
    }

    pub(crate) fn db(&self) -> &sled::Db {
        self.inner.db()
    }

    pub(crate) fn storage(&self, source: sled::Error) -> ArchiveError {
        self.inner.storage(source)
    }

    /// A keyed MAC (HMAC-SHA256, all 32 bytes) of `data` for `purpose`,
    /// under a key derived from the archive's fingerprint key for that
    /// purpose alone: what a host seals state it hands out with (e.g. an
    /// MCP server's `requestState`), and checks when it comes back. A MAC
    /// for one purpose says nothing of another's, nor of any
    /// [`Archive::fingerprint`]. See [`Keyring::keyed_mac`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let config = reel_archive::ArchiveConfig { fingerprint_key: reel_archive::FingerprintKey::Key([7; 32]), ..Default::default() };
    /// let archive = reel_archive::Archive::open(dir.path().join("a"), config).unwrap();
    /// let tag = archive.keyed_mac("example/state", b"round 1");
    /// assert_eq!(tag, archive.keyed_mac("example/state", b"round 1"));
    /// assert_ne!(tag, archive.keyed_mac("example/other", b"round 1"));
    /// ```
    pub fn keyed_mac(&self, purpose: &str, data: &[u8]) -> [u8; 32] {
        self.inner.key.keyed_mac(purpose, data)
    }

    /// The keyed fingerprint of a secret (HMAC-SHA256, first 16 bytes, hex)
    /// under the key of [`ArchiveConfig::fingerprint_key`], which is read
    /// (or created) on the first call and never stored in the archive.
    /// Equal secrets give equal fingerprints under one key; without the key
    /// a fingerprint tells nothing about the secret, and a guess cannot be
    /// tested against it. See [`Keyring::fingerprint`].
    pub fn fingerprint(&self, secret: &[u8]) -> Fingerprint {
        self.inner.key.fingerprint(secret)
    }

    /// The archive's fingerprint key (cheap to clone): what a recorder
    /// fingerprints credentials and keys cleanups with.
    pub fn keyring(&self) -> Keyring {
        self.inner.key.clone()
    }
}

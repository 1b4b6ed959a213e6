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
//! use reel::fact::{FactKind, NewFact, Producer, Progress, RunStarted, RunEnded, RunStatus};
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
//!     fact(FactKind::Progress(Progress { payload: json!({"message": "working"}), count: 1 })),
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
//! Trees by role, not per run (see the `keys` module for the layout, known only here):
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
//!   batch is held to the stream rules of [`reel::rules`] before any of it is
//!   stored.
//! - [`Archive::import_run_with_artifacts`] (and [`Archive::import_run`])
//!   is all or nothing: it checks the whole stream against the same rules,
//!   every artifact against its digest and the run id's absence, then
//!   writes everything in one sled transaction. A refused or interrupted
//!   import leaves no trace; of concurrent imports of one run id, exactly
//!   one wins.
//! - Appends are durable after [`Archive::flush`] (or sled's background
//!   flush). After a crash, [`Archive::open`] finds every run that was still
//!   running, rebuilds its record from its facts, and marks it
//!   [`RunState::Incomplete`].
//! - sled locks its directory to one process: a second opener gets
//!   [`ArchiveError::Locked`], naming the directory, at once.
//! - Reading never panics on stored bytes: a damaged block is reported as
//!   [`ArchiveError::Corrupt`] with the run and seq range it held, and the
//!   facts around it still read.

mod block;
mod fingerprint;
mod keys;
mod list;
pub mod live;
pub mod tape;
mod verify;

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::Stream;
use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};
use sled::Transactional as _;

use reel::fact::{Fact, FactKind, Fingerprint, NewFact};
use reel::run::{RunRecord, RunState};

pub use fingerprint::{FingerprintKey, CONFIG_DIR_ENV, KEY_ENV, KEY_FILE};
pub use list::{Cursor, RunFilter, RunPage};
pub use reel::codec::{decode_fact, encode_fact, parse_digest, Digest};
pub use reel::rules::{Rule, StreamRules, Violation};
pub use tape::TapeExt;
pub use verify::{Problem, VerifyReport};

/// The archive format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Errors of the archive. Each message says what happened and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Another process holds the archive open.
    #[error(
        "archive {dir} is held open by another process (sled allows one process per archive): \
         stop that process, or read the archive through it (`reel` does this by itself when the \
         recorder serves its socket)"
    )]
    Locked {
        /// The archive directory.
        dir: PathBuf,
    },
    /// The directory is not an archive this reel can read.
    #[error("{dir} is not a reel archive this version can read: {detail}")]
    Format {
        /// The archive directory.
        dir: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// sled or the file system failed.
    #[error("archive {dir}: storage error: {source}")]
    Storage {
        /// The archive directory.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: sled::Error,
    },
    /// No run with this id.
    #[error("no run {run_id:?} in the archive: list runs with `reel runs`")]
    UnknownRun {
        /// The id asked for.
        run_id: String,
    },
    /// A run with this id already exists.
    #[error("run {run_id:?} already exists in the archive: run ids must be unique; import under a new id or into another archive")]
    RunExists {
        /// The id.
        run_id: String,
    },
    /// The run no longer takes facts.
    #[error("run {run_id:?} is {state}: it takes no more facts; start a new run")]
    RunClosed {
        /// The id.
        run_id: String,
        /// Its state.
        state: RunState,
    },
    /// Facts that cannot be appended as given.
    #[error("run {run_id:?}: {detail}")]
    InvalidFacts {
        /// The run.
        run_id: String,
        /// What is wrong with them.
        detail: String,
    },
    /// A stored block or record is damaged.
    #[error("run {run_id:?}, seq {first_seq}..={}: stored block is damaged ({detail}); run `reel verify` for the whole archive", last_seq.map(|s| s.to_string()).unwrap_or_else(|| "?".into()))]
    Corrupt {
        /// The run.
        run_id: String,
        /// First seq the damaged block held.
        first_seq: u64,
        /// Last seq it held, when known.
        last_seq: Option<u64>,
        /// What is wrong.
        detail: String,
    },
    /// The fingerprint key given in the environment is malformed.
    #[error("archive {dir}: {detail}")]
    FingerprintKey {
        /// The archive directory.
        dir: PathBuf,
        /// What is wrong and what to do.
        detail: String,
    },
    /// A fact could not be encoded.
    #[error("run {run_id:?}: a fact could not be encoded: {detail}")]
    Encode {
        /// The run.
        run_id: String,
        /// The encoder's message.
        detail: String,
    },
    /// An import was refused: one of its facts breaks a rule of the run's
    /// fact stream (see [`rules`]). Nothing of the import was stored.
    #[error("run {run_id:?}: fact {index} of the import breaks a stream rule: {violation}; nothing was imported: fix that fact, or export the run again")]
    ImportBreaksRule {
        /// The run.
        run_id: String,
        /// The fact's position among the facts given (0-based).
        index: usize,
        /// Which fact and which rule.
        violation: Box<Violation>,
    },
    /// An import was refused: an artifact's bytes do not match its digest.
    /// Nothing of the import was stored.
    #[error("artifact {index} of the import, {digest:?}: {detail}; nothing was imported: export the run again")]
    ImportArtifactMismatch {
        /// The artifact's position among the artifacts given (0-based).
        index: usize,
        /// The digest it was given under.
        digest: String,
        /// What is wrong.
        detail: String,
    },
}

/// Result of archive operations.
pub type Result<T, E = ArchiveError> = std::result::Result<T, E>;

/// How to open an archive.
#[derive(Debug, Clone, Default)]
pub struct ArchiveConfig {
    /// sled's page cache size in bytes; `None` keeps sled's default.
    pub cache_capacity: Option<u64>,
    /// sled's background flush interval in milliseconds; `None` keeps sled's
    /// default (500 ms). `Some(0)` turns background flushing off.
    pub flush_every_ms: Option<u64>,
    /// Where the key of [`Archive::fingerprint`] comes from; never from the
    /// archive (default: [`KEY_ENV`], else the user's key file).
    pub fingerprint_key: FingerprintKey,
}

/// Figures about the whole archive.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ArchiveStats {
    /// Number of runs.
    pub runs: u64,
    /// Number of facts across all runs.
    pub facts: u64,
    /// Number of stored artifacts (after deduplication).
    pub artifacts: u64,
    /// Bytes the archive takes on disk.
    pub bytes_on_disk: u64,
    /// The oldest run: (id, start time).
    pub oldest: Option<(String, i64)>,
    /// The newest run: (id, start time).
    pub newest: Option<(String, i64)>,
}

/// An open archive. Cheap to clone; all clones share one database and one
/// sequencer.
#[derive(Clone)]
pub struct Archive {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    db: sled::Db,
    trees: Trees,
    key: fingerprint::KeySlot,
    live: Mutex<HashMap<String, Arc<Mutex<LiveRun>>>>,
    appended: tokio::sync::watch::Sender<u64>,
}

pub(crate) struct Trees {
    pub run_ids: sled::Tree,
    pub runs: sled::Tree,
    pub events: sled::Tree,
    pub artifacts: sled::Tree,
    pub by_time: sled::Tree,
    pub by_tenant: sled::Tree,
    pub by_tool: sled::Tree,
    pub by_status: sled::Tree,
}

/// A run this process is writing.
struct LiveRun {
    ordinal: u64,
    record: RunRecord,
    next_seq: u64,
    head: Digest,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(crate) fn encode_record(record: &RunRecord) -> Vec<u8> {
    let mut out = vec![1u8];
    // A record is plain data: encoding it cannot fail.
    rmp_serde::encode::write_named(&mut out, record).expect("run record encodes");
    out
}

pub(crate) fn decode_record(bytes: &[u8]) -> Result<RunRecord, String> {
    match bytes.split_first() {
        Some((1, rest)) => {
            rmp_serde::from_slice(rest).map_err(|e| format!("run record does not decode: {e}"))
        }
        Some((v, _)) => Err(format!("run record version {v} is not supported")),
        None => Err("empty run record".into()),
    }
}

impl Archive {
    /// Opens the archive in `dir`, creating it when absent. Runs left running
    /// by a writer that stopped are marked [`RunState::Incomplete`].
    pub fn open(dir: impl AsRef<Path>, config: ArchiveConfig) -> Result<Archive> {
        let dir = dir.as_ref().to_path_buf();
        if dir.exists() && !dir.is_dir() {
            return Err(ArchiveError::Format {
                dir,
                detail: "it is a file, not a directory; pass the archive directory".into(),
            });
        }
        if dir.is_dir() && !dir.join("conf").exists() && !dir.join("db").exists() {
            let has_files = std::fs::read_dir(&dir)
                .map(|mut d| {
                    d.any(|e| {
                        e.map(|e| !e.file_name().to_string_lossy().starts_with("reel."))
                            .unwrap_or(false)
                    })
                })
                .unwrap_or(false);
            if has_files {
                return Err(ArchiveError::Format {
                    dir,
                    detail: "the directory has files but no archive; pass an empty or new directory, or an existing archive".into(),
                });
            }
        }
        let mut sled_config = sled::Config::new().path(&dir);
        if let Some(c) = config.cache_capacity {
            sled_config = sled_config.cache_capacity(c);
        }
        if let Some(ms) = config.flush_every_ms {
            sled_config = sled_config.flush_every_ms(if ms == 0 { None } else { Some(ms) });
        }
        let db = open_sled(&sled_config, &dir)?;
        let storage = |source| ArchiveError::Storage {
            dir: dir.clone(),
            source,
        };
        let tree = |name: &str| db.open_tree(name).map_err(storage);
        let meta = tree(keys::T_META)?;
        match meta.get(keys::META_FORMAT).map_err(storage)? {
            None => {
                meta.insert(keys::META_FORMAT, &FORMAT_VERSION.to_be_bytes())
                    .map_err(storage)?;
            }
            Some(v) => {
                let found = <[u8; 4]>::try_from(v.as_ref())
                    .map(u32::from_be_bytes)
                    .map_err(|_| ArchiveError::Format {
                        dir: dir.clone(),
                        detail: "its format marker is damaged".into(),
                    })?;
                if found > FORMAT_VERSION {
                    return Err(ArchiveError::Format {
                        dir,
                        detail: format!(
                            "it has format {found}, this reel reads up to {FORMAT_VERSION}: upgrade reel"
                        ),
                    });
                }
            }
        }
        // The fingerprint key lives outside the archive (see `fingerprint`).
        // An archive written by an older reel holds its own: it is removed,
        // so that a copy of the archive made from now on cannot be used to
        // test guesses against its fingerprints.
        if meta.remove(keys::META_KEY).map_err(storage)?.is_some() {
            meta.flush().map_err(storage)?;
            eprintln!(
                "reel: archive {} held its own fingerprint key (written by an older reel); it is \
                 removed, because anyone with a copy of the archive could test guessed \
                 credentials against its fingerprints. Fingerprints recorded before now will \
                 not match new ones of the same credential, and copies of the archive made \
                 before now still hold the key.",
                dir.display()
            );
        }
        let key = fingerprint::KeySlot::new(&config.fingerprint_key).map_err(|detail| {
            ArchiveError::FingerprintKey {
                dir: dir.clone(),
                detail,
            }
        })?;
        let trees = Trees {
            run_ids: tree(keys::T_RUN_IDS)?,
            runs: tree(keys::T_RUNS)?,
            events: tree(keys::T_EVENTS)?,
            artifacts: tree(keys::T_ARTIFACTS)?,
            by_time: tree(keys::T_BY_TIME)?,
            by_tenant: tree(keys::T_BY_TENANT)?,
            by_tool: tree(keys::T_BY_TOOL)?,
            by_status: tree(keys::T_BY_STATUS)?,
        };
        let (appended, _) = tokio::sync::watch::channel(0);
        let archive = Archive {
            inner: Arc::new(Inner {
                dir,
                db,
                trees,
                key,
                live: Mutex::new(HashMap::new()),
                appended,
            }),
        };
        archive.recover()?;
        Ok(archive)
    }

    /// The archive directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub(crate) fn trees(&self) -> &Trees {
        &self.inner.trees
    }

    fn storage(&self, source: sled::Error) -> ArchiveError {
        ArchiveError::Storage {
            dir: self.inner.dir.clone(),
            source,
        }
    }

    /// A keyed MAC (HMAC-SHA256, all 32 bytes) of `data` for `purpose`,
    /// under a key derived from the archive's fingerprint key for that
    /// purpose alone: what a host seals state it hands out with (e.g. an
    /// MCP server's `requestState`), and checks when it comes back. A MAC
    /// for one purpose says nothing of another's, nor of any
    /// [`Archive::fingerprint`].
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
        let mut derive = <Hmac<Sha256> as Mac>::new_from_slice(&self.inner.key.key()[..])
            .expect("HMAC takes any key size");
        // NUL-framed, so that no secret a credential fingerprints (text)
        // names the derived key.
        derive.update(b"\0reel keyed mac\0");
        derive.update(purpose.as_bytes());
        derive.update(b"\0");
        let subkey = derive.finalize().into_bytes();
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&subkey).expect("HMAC takes any key size");
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    /// The keyed fingerprint of a secret (HMAC-SHA256, first 16 bytes, hex)
    /// under the key of [`ArchiveConfig::fingerprint_key`], which is read
    /// (or created) on the first call and never stored in the archive.
    /// Equal secrets give equal fingerprints under one key; without the key
    /// a fingerprint tells nothing about the secret, and a guess cannot be
    /// tested against it.
    pub fn fingerprint(&self, secret: &[u8]) -> Fingerprint {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.inner.key.key()[..])
            .expect("HMAC takes any key size");
        mac.update(secret);
        let out = mac.finalize().into_bytes();
        Fingerprint(format!("hmac-sha256:{}", hex::encode(&out[..16])))
    }

    // -----------------------------------------------------------------------
    // Writing
    // -----------------------------------------------------------------------

    /// Appends facts to a run and returns the seqs they were given. The first
    /// batch of a run must begin with `run.started` naming `run_id`; the
    /// whole batch becomes one block. The batch is checked against the
    /// stream rules ([`rules`]) from where the run stands before any of it is
    /// stored: a batch that breaks one is refused whole.
    pub fn append(&self, run_id: &str, facts: Vec<NewFact>) -> Result<std::ops::Range<u64>> {
        let mut live = lock(&self.inner.live);
        let run = match live.get(run_id) {
            Some(run) => run.clone(),
            None => {
                // Not being written: a stored run is closed, any other is new.
                self.refuse_stored(run_id)?;
                if facts.is_empty() {
                    return Err(ArchiveError::UnknownRun {
                        run_id: run_id.into(),
                    });
                }
                let facts = numbered(facts, 0);
                check_batch(run_id, StreamRules::new(run_id), &facts)?;
                // The map lock is held from the look-up to here, so no other
                // append creates the run meanwhile; the run is locked before
                // the map shows it, so no other append's block goes first.
                let run = self.create_run(run_id, &facts[0])?;
                let mut guard = lock(&run);
                live.insert(run_id.to_owned(), run.clone());
                drop(live);
                let appended = self.append_checked(&mut guard, &facts);
                drop(guard);
                return self.appended(run_id, appended);
            }
        };
        drop(live);
        let mut guard = lock(&run);
        if guard.record.state.is_closed() {
            return Err(ArchiveError::RunClosed {
                run_id: run_id.into(),
                state: guard.record.state,
            });
        }
        let first = guard.next_seq;
        let facts = numbered(facts, first);
        match check_batch(run_id, StreamRules::resume(&guard.record, first), &facts) {
            // A batch that starts the stream again: it exists already.
            Err(_)
                if facts
                    .first()
                    .is_some_and(|f| RunRecord::from_first(f).is_some()) =>
            {
                return Err(ArchiveError::RunExists {
                    run_id: run_id.into(),
                })
            }
            other => other?,
        }
        let appended = self.append_checked(&mut guard, &facts);
        drop(guard);
        self.appended(run_id, appended)
    }

    /// Stores a checked batch of a run as one block: its seqs, and whether
    /// the run is closed now.
    fn append_checked(
        &self,
        run: &mut LiveRun,
        facts: &[Fact],
    ) -> Result<(std::ops::Range<u64>, bool)> {
        let first = run.next_seq;
        self.write_block(run, facts)?;
        Ok((first..run.next_seq, run.record.state.is_closed()))
    }

    /// The end of an append: a closed run stops being live.
    fn appended(
        &self,
        run_id: &str,
        appended: Result<(std::ops::Range<u64>, bool)>,
    ) -> Result<std::ops::Range<u64>> {
        let (range, closed) = appended?;
        if closed {
            lock(&self.inner.live).remove(run_id);
        }
        Ok(range)
    }

    /// Refuses facts for a run that is stored and not being written: such a
    /// run is closed (ended, or marked incomplete on open).
    fn refuse_stored(&self, run_id: &str) -> Result<()> {
        let t = self.trees();
        if let Some(ord) = t.run_ids.get(run_id).map_err(|e| self.storage(e))? {
            // Not live, so the stored record is current.
            let state = keys::u64_from(&ord)
                .and_then(|o| t.runs.get(o.to_be_bytes()).ok().flatten())
                .and_then(|bytes| decode_record(&bytes).ok())
                .map(|r| r.state)
                .unwrap_or(RunState::Incomplete);
            return Err(ArchiveError::RunClosed {
                run_id: run_id.into(),
                state,
            });
        }
        Ok(())
    }

    /// Stores a new run's record and index entries from its first fact (a
    /// checked `run.started`), before its first block.
    fn create_run(&self, run_id: &str, first: &Fact) -> Result<Arc<Mutex<LiveRun>>> {
        let t = self.trees();
        let Some(record) = RunRecord::from_first(first) else {
            return Err(ArchiveError::InvalidFacts {
                run_id: run_id.into(),
                detail: format!(
                    "a new stream must begin with run.started, or with the call.started of a call outside any run, not {}",
                    first.kind.name()
                ),
            });
        };
        let ordinal = self.inner.db.generate_id().map_err(|e| self.storage(e))?;
        // The record and its indexes go in before the first block, so that a
        // crash after the block always leaves a run to recover. The "running"
        // status entry goes first of all: it is what recovery looks for, so a
        // crash that keeps only some of these inserts (sled recovers a prefix
        // of them) still leaves a run that recovery finds and completes.
        t.by_status
            .insert(
                keys::index_key(
                    &[keys::state_byte(RunState::Running)],
                    record.started_at,
                    ordinal,
                ),
                &[],
            )
            .map_err(|e| self.storage(e))?;
        t.runs
            .insert(ordinal.to_be_bytes(), encode_record(&record))
            .map_err(|e| self.storage(e))?;
        self.index_new(ordinal, &record)?;
        t.run_ids
            .insert(run_id, &ordinal.to_be_bytes())
            .map_err(|e| self.storage(e))?;
        Ok(Arc::new(Mutex::new(LiveRun {
            ordinal,
            record,
            next_seq: 0,
            head: [0; 32],
        })))
    }

    /// Seals `facts` (already numbered from `run.next_seq`) into one block.
    fn write_block(&self, run: &mut LiveRun, facts: &[Fact]) -> Result<()> {
        if facts.is_empty() {
            return Ok(());
        }
        let run_id = run.record.run_id.clone();
        let mut payload = Vec::with_capacity(facts.len() * 128);
        let before = run.record.clone();
        let mut changed = false;
        for fact in facts {
            block::push_fact(&mut payload, fact).map_err(|e| ArchiveError::Encode {
                run_id: run_id.clone(),
                detail: e.to_string(),
            })?;
            changed |= run.record.observe(fact);
        }
        let first = facts[0].seq;
        let (value, digest) = block::seal(facts.len() as u32, &run.head, &payload);
        let t = self.trees();
        if let Err(e) = t.events.insert(keys::event_key(run.ordinal, first), value) {
            run.record = before;
            return Err(self.storage(e));
        }
        run.head = digest;
        run.next_seq = first + facts.len() as u64;
        if changed {
            self.store_record(run.ordinal, &before, &run.record)?;
        }
        self.inner.appended.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Writes a changed record and brings the indexes along.
    fn store_record(&self, ordinal: u64, before: &RunRecord, after: &RunRecord) -> Result<()> {
        let t = self.trees();
        let s = |e| self.storage(e);
        t.runs
            .insert(ordinal.to_be_bytes(), encode_record(after))
            .map_err(s)?;
        for tool in after.tools.difference(&before.tools) {
            t.by_tool
                .insert(
                    keys::index_key(&keys::name_prefix(tool), after.started_at, ordinal),
                    &[],
                )
                .map_err(s)?;
        }
        if before.state != after.state {
            self.swap_status(
                keys::index_key(
                    &[keys::state_byte(before.state)],
                    before.started_at,
                    ordinal,
                ),
                ordinal,
                after,
            )?;
        }
        Ok(())
    }

    /// Moves a run's status index entry from `old_key` to `after`'s state in
    /// one sled batch, which a crash never splits: the archive never holds
    /// neither entry, nor both.
    fn swap_status(&self, old_key: Vec<u8>, ordinal: u64, after: &RunRecord) -> Result<()> {
        let mut batch = sled::Batch::default();
        batch.remove(old_key);
        batch.insert(
            keys::index_key(&[keys::state_byte(after.state)], after.started_at, ordinal),
            sled::IVec::default(),
        );
        self.trees()
            .by_status
            .apply_batch(batch)
            .map_err(|e| self.storage(e))
    }

    fn index_new(&self, ordinal: u64, record: &RunRecord) -> Result<()> {
        self.index_but_status(ordinal, record)?;
        self.trees()
            .by_status
            .insert(
                keys::index_key(
                    &[keys::state_byte(record.state)],
                    record.started_at,
                    ordinal,
                ),
                &[],
            )
            .map_err(|e| self.storage(e))?;
        Ok(())
    }

    /// Inserts the start-time, tenant and tool index entries of a run (each
    /// insert is idempotent).
    fn index_but_status(&self, ordinal: u64, record: &RunRecord) -> Result<()> {
        let t = self.trees();
        let s = |e| self.storage(e);
        t.by_time
            .insert(keys::index_key(&[], record.started_at, ordinal), &[])
            .map_err(s)?;
        if let Some(tenant) = record.tenant() {
            t.by_tenant
                .insert(
                    keys::index_key(&keys::name_prefix(tenant), record.started_at, ordinal),
                    &[],
                )
                .map_err(s)?;
        }
        for tool in &record.tools {
            t.by_tool
                .insert(
                    keys::index_key(&keys::name_prefix(tool), record.started_at, ordinal),
                    &[],
                )
                .map_err(s)?;
        }
        Ok(())
    }

    /// Imports a whole run (e.g. from a tape): its facts keep their seqs. See
    /// [`Archive::import_run_with_artifacts`], which this is without
    /// artifacts.
    pub fn import_run(&self, facts: impl IntoIterator<Item = Fact>) -> Result<RunRecord> {
        let facts: Vec<Fact> = facts.into_iter().collect();
        self.import_run_with_artifacts(&facts, &[])
    }

    /// Imports a whole run with the artifacts its facts refer to, all or
    /// nothing: its facts keep their seqs, and an imported run that never
    /// ended is marked incomplete.
    ///
    /// Everything is checked before anything is written: every fact against
    /// the stream rules ([`rules`], the checks `append` applies;
    /// [`ArchiveError::ImportBreaksRule`] names the first fact that breaks
    /// one), every artifact's bytes against its `sha256:<hex>` digest
    /// ([`ArchiveError::ImportArtifactMismatch`]), the encoding of every
    /// block, and the run id's absence ([`ArchiveError::RunExists`]). A
    /// refused import stores nothing.
    pub fn import_run_with_artifacts(
        &self,
        facts: &[Fact],
        artifacts: &[(String, Vec<u8>)],
    ) -> Result<RunRecord> {
        const BATCH: usize = 1024;
        let Some(first) = facts.first() else {
            return Err(ArchiveError::InvalidFacts {
                run_id: String::new(),
                detail: "there are no facts to import: a run holds at least its run.started".into(),
            });
        };
        // The stream is the one the first fact starts (a run, or a call
        // outside any run); if it starts none, the rules refuse that fact.
        let run_id = match &first.kind {
            FactKind::RunStarted(s) => s.run_id.clone(),
            FactKind::CallStarted(c) => c
                .outside_run
                .as_ref()
                .map(|o| o.key.clone())
                .unwrap_or_default(),
            _ => String::new(),
        };
        let mut rules = StreamRules::new(run_id.as_str());
        let mut record = RunRecord::from_first(first);
        for (index, fact) in facts.iter().enumerate() {
            if let Err(violation) = rules.check(fact) {
                return Err(ArchiveError::ImportBreaksRule {
                    run_id,
                    index,
                    violation: Box::new(violation),
                });
            }
            if let Some(r) = &mut record {
                r.observe(fact);
            }
        }
        // The rules hold, so the first fact is a stream's head.
        let Some(mut record) = record else {
            return Err(ArchiveError::InvalidFacts {
                run_id,
                detail: "the first fact is neither run.started nor the call.started of a call outside any run".into(),
            });
        };
        if !record.state.is_closed() {
            record.state = RunState::Incomplete;
        }
        let mut digests = Vec::with_capacity(artifacts.len());
        for (index, (digest, bytes)) in artifacts.iter().enumerate() {
            let actual: Digest = Sha256::digest(bytes).into();
            let refuse = |detail: String| ArchiveError::ImportArtifactMismatch {
                index,
                digest: digest.clone(),
                detail,
            };
            match parse_digest(digest) {
                None => return Err(refuse("the digest is not sha256:<64 hex digits>".into())),
                Some(given) if given != actual => {
                    return Err(refuse(format!(
                        "its bytes have the digest sha256:{}",
                        hex::encode(actual)
                    )))
                }
                Some(_) => digests.push(actual),
            }
        }
        let refuse_existing = |live: &HashMap<String, Arc<Mutex<LiveRun>>>| -> Result<()> {
            let stored = self
                .trees()
                .run_ids
                .contains_key(&run_id)
                .map_err(|e| self.storage(e))?;
            if stored || live.contains_key(&run_id) {
                return Err(ArchiveError::RunExists {
                    run_id: run_id.clone(),
                });
            }
            Ok(())
        };
        refuse_existing(&lock(&self.inner.live))?;
        // Seal the blocks, chained as `append` chains them.
        let ordinal = self.inner.db.generate_id().map_err(|e| self.storage(e))?;
        let mut blocks = Vec::with_capacity(facts.len().div_ceil(BATCH));
        let mut head: Digest = [0; 32];
        for chunk in facts.chunks(BATCH) {
            let mut payload = Vec::with_capacity(chunk.len() * 128);
            for fact in chunk {
                block::push_fact(&mut payload, fact).map_err(|e| ArchiveError::Encode {
                    run_id: run_id.clone(),
                    detail: format!("seq {}: {e}", fact.seq),
                })?;
            }
            let (value, digest) = block::seal(chunk.len() as u32, &head, &payload);
            head = digest;
            blocks.push((keys::event_key(ordinal, chunk[0].seq), value));
        }
        let started = record.started_at;
        let status = keys::index_key(&[keys::state_byte(record.state)], started, ordinal);
        let by_time = keys::index_key(&[], started, ordinal);
        let by_tenant = record
            .tenant()
            .map(|tenant| keys::index_key(&keys::name_prefix(tenant), started, ordinal));
        let by_tool: Vec<Vec<u8>> = record
            .tools
            .iter()
            .map(|tool| keys::index_key(&keys::name_prefix(tool), started, ordinal))
            .collect();
        let stored_record = encode_record(&record);

        // All of it goes in as one sled transaction over every tree it
        // touches. sled seals a transaction's writes as one batch in its log
        // and recovers such a batch whole or not at all, so a crash or an
        // error part way leaves no trace of the import: no artifact, block,
        // record, index or run id entry that a reader, `verify` or recovery
        // would see. (Writing in an order recovery understands instead would
        // leave orphan artifacts, which nothing could tell from wanted ones.)
        // The run id's absence is checked inside the transaction, which sled
        // serialises with every other transaction, and the map of live runs
        // stays locked throughout, so neither a concurrent import nor an
        // `append` creating the same run can slip in: exactly one wins.
        let t = self.trees();
        let live = lock(&self.inner.live);
        refuse_existing(&live)?;
        let committed = (
            &t.run_ids,
            &t.runs,
            &t.events,
            &t.artifacts,
            &t.by_time,
            &t.by_tenant,
            &t.by_tool,
            &t.by_status,
        )
            .transaction(
                |(run_ids, runs, events, stored_artifacts, time, tenant, tool, by_status)| {
                    if run_ids.get(run_id.as_bytes())?.is_some() {
                        return Err(sled::transaction::ConflictableTransactionError::Abort(()));
                    }
                    for (digest, (_, bytes)) in digests.iter().zip(artifacts) {
                        // Content-addressed: bytes already stored stay.
                        if stored_artifacts.get(digest)?.is_none() {
                            stored_artifacts.insert(&digest[..], &bytes[..])?;
                        }
                    }
                    for (key, value) in &blocks {
                        events.insert(&key[..], &value[..])?;
                    }
                    time.insert(&by_time[..], &[][..])?;
                    if let Some(key) = &by_tenant {
                        tenant.insert(&key[..], &[][..])?;
                    }
                    for key in &by_tool {
                        tool.insert(&key[..], &[][..])?;
                    }
                    by_status.insert(&status[..], &[][..])?;
                    runs.insert(&ordinal.to_be_bytes()[..], &stored_record[..])?;
                    run_ids.insert(run_id.as_bytes(), &ordinal.to_be_bytes()[..])?;
                    Ok(())
                },
            );
        drop(live);
        match committed {
            Ok(()) => {}
            Err(sled::transaction::TransactionError::Abort(())) => {
                return Err(ArchiveError::RunExists { run_id })
            }
            Err(sled::transaction::TransactionError::Storage(e)) => return Err(self.storage(e)),
        }
        self.inner.appended.send_modify(|n| *n += 1);
        Ok(record)
    }

    /// Stores artifact bytes once per sha-256 digest and returns the digest
    /// as `sha256:<hex>`.
    pub fn put_artifact(&self, bytes: &[u8]) -> Result<String> {
        let digest: Digest = Sha256::digest(bytes).into();
        let t = self.trees();
        // compare_and_swap from "absent" stores the bytes once.
        let _ = t
            .artifacts
            .compare_and_swap(digest, None::<&[u8]>, Some(bytes))
            .map_err(|e| self.storage(e))?;
        Ok(format!("sha256:{}", hex::encode(digest)))
    }

    /// The bytes stored under a `sha256:<hex>` digest.
    pub fn artifact(&self, digest: &str) -> Result<Option<Vec<u8>>> {
        let Some(raw) = parse_digest(digest) else {
            return Ok(None);
        };
        Ok(self
            .trees()
            .artifacts
            .get(raw)
            .map_err(|e| self.storage(e))?
            .map(|v| v.to_vec()))
    }

    /// Makes everything appended so far durable. Returns the bytes flushed.
    pub fn flush(&self) -> Result<usize> {
        self.inner.db.flush().map_err(|e| self.storage(e))
    }

    /// [`Archive::flush`] for async code.
    pub async fn flush_async(&self) -> Result<usize> {
        self.inner
            .db
            .flush_async()
            .await
            .map_err(|e| self.storage(e))
    }

    // -----------------------------------------------------------------------
    // Reading
    // -----------------------------------------------------------------------

    fn ordinal(&self, run_id: &str) -> Result<u64> {
        let ord = self
            .trees()
            .run_ids
            .get(run_id)
            .map_err(|e| self.storage(e))?
            .ok_or_else(|| ArchiveError::UnknownRun {
                run_id: run_id.into(),
            })?;
        keys::u64_from(&ord).ok_or_else(|| ArchiveError::Corrupt {
            run_id: run_id.into(),
            first_seq: 0,
            last_seq: None,
            detail: "its run id entry is damaged".into(),
        })
    }

    pub(crate) fn record_by_ordinal(&self, ordinal: u64) -> Result<Option<RunRecord>, String> {
        let bytes = self
            .trees()
            .runs
            .get(ordinal.to_be_bytes())
            .map_err(|e| e.to_string())?;
        let Some(bytes) = bytes else { return Ok(None) };
        let record = decode_record(&bytes)?;
        // A run this process is writing has a fresher count in memory.
        if !record.state.is_closed() {
            let live = lock(&self.inner.live).get(&record.run_id).cloned();
            if let Some(live) = live {
                return Ok(Some(lock(&live).record.clone()));
            }
        }
        Ok(Some(record))
    }

    /// The record of one run.
    pub fn run(&self, run_id: &str) -> Result<RunRecord> {
        let ordinal = self.ordinal(run_id)?;
        self.record_by_ordinal(ordinal)
            .map_err(|detail| ArchiveError::Corrupt {
                run_id: run_id.into(),
                first_seq: 0,
                last_seq: None,
                detail,
            })?
            .ok_or_else(|| ArchiveError::UnknownRun {
                run_id: run_id.into(),
            })
    }

    /// Every run id, by start time (ties in creation order).
    pub fn run_ids(&self) -> impl Iterator<Item = Result<String>> + '_ {
        self.trees().by_time.iter().map(move |item| {
            let (key, _) = item.map_err(|e| self.storage(e))?;
            let (_, ordinal) = keys::split_index_tail(&key).unwrap_or((0, u64::MAX));
            self.record_by_ordinal(ordinal)
                .ok()
                .flatten()
                .map(|r| r.run_id)
                .ok_or_else(|| ArchiveError::Corrupt {
                    run_id: format!("#{ordinal}"),
                    first_seq: 0,
                    last_seq: None,
                    detail: "the time index points at a missing or damaged run record".into(),
                })
        })
    }

    /// The facts of a run whose seq lies in `range`, in seq order. A damaged
    /// block yields one [`ArchiveError::Corrupt`] naming its seq range, and
    /// iteration goes on after it.
    pub fn facts(&self, run_id: &str, range: impl RangeBounds<u64>) -> Result<Facts> {
        let ordinal = self.ordinal(run_id)?;
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => Some(e),
            Bound::Excluded(&0) => return Ok(Facts::empty(self.clone(), run_id)),
            Bound::Excluded(&e) => Some(e - 1),
            Bound::Unbounded => None,
        };
        let events = &self.trees().events;
        // The block holding `start` is the one with the greatest first seq <= start.
        let holding = events
            .range(keys::event_key(ordinal, 0)..=keys::event_key(ordinal, start))
            .next_back()
            .transpose()
            .map_err(|e| self.storage(e))?
            .and_then(|(k, _)| keys::split_event_key(&k).map(|(_, s)| s));
        let from = holding.unwrap_or(start);
        Ok(Facts {
            archive: self.clone(),
            run_id: run_id.into(),
            ordinal,
            current: None,
            cursor: Some(BlockCursor {
                from,
                upto: end.unwrap_or(u64::MAX),
                done: from > end.unwrap_or(u64::MAX),
            }),
            pending: VecDeque::new(),
            start,
            end,
            // Without a block at or before `start`, every seq from 0 is lost.
            expect: Some(holding.unwrap_or(0)),
        })
    }

    /// Follows a run: yields its facts from `from_seq` on, waiting for new
    /// ones as they land, and ends once the run is closed and all its facts
    /// were yielded. Only appends made through this process's [`Archive`]
    /// wake it (sled admits one process per archive).
    pub fn follow(
        &self,
        run_id: &str,
        from_seq: u64,
    ) -> impl Stream<Item = Result<Fact>> + Send + 'static {
        struct Follow {
            archive: Archive,
            run_id: String,
            next: u64,
            buf: VecDeque<Result<Fact>>,
            rx: tokio::sync::watch::Receiver<u64>,
            done: bool,
        }
        let state = Follow {
            archive: self.clone(),
            run_id: run_id.into(),
            next: from_seq,
            buf: VecDeque::new(),
            rx: self.inner.appended.subscribe(),
            done: false,
        };
        futures::stream::unfold(state, |mut st| async move {
            loop {
                if let Some(item) = st.buf.pop_front() {
                    return Some((item, st));
                }
                if st.done {
                    return None;
                }
                st.rx.borrow_and_update();
                let closed = match st.archive.run(&st.run_id) {
                    Ok(r) => r.state.is_closed(),
                    Err(ArchiveError::UnknownRun { .. }) => false,
                    Err(e) => {
                        st.done = true;
                        return Some((Err(e), st));
                    }
                };
                match st.archive.facts(&st.run_id, st.next..) {
                    Ok(facts) => {
                        for item in facts {
                            match &item {
                                Ok(f) => st.next = f.seq + 1,
                                Err(ArchiveError::Corrupt {
                                    last_seq: Some(l), ..
                                }) => st.next = l + 1,
                                Err(_) => st.done = true,
                            }
                            st.buf.push_back(item);
                            if st.done {
                                break;
                            }
                        }
                    }
                    Err(ArchiveError::UnknownRun { .. }) => {}
                    Err(e) => {
                        st.done = true;
                        st.buf.push_back(Err(e));
                    }
                }
                // Closed and nothing new: done. Otherwise wait for an append
                // (an error means the archive is gone: done too).
                if st.buf.is_empty() && (closed || st.rx.changed().await.is_err()) {
                    st.done = true;
                }
            }
        })
    }

    /// Figures about the archive.
    pub fn stats(&self) -> Result<ArchiveStats> {
        let t = self.trees();
        let s = |e| self.storage(e);
        let mut facts = 0;
        let mut runs = 0;
        for item in t.runs.iter() {
            let (key, _) = item.map_err(s)?;
            if let Some(Ok(Some(r))) = keys::u64_from(&key).map(|o| self.record_by_ordinal(o)) {
                facts += r.facts;
            }
            runs += 1;
        }
        let end = |item: Option<sled::Result<(sled::IVec, sled::IVec)>>| -> Result<Option<(String, i64)>> {
            let Some(item) = item else { return Ok(None) };
            let (key, _) = item.map_err(s)?;
            let Some((at, ord)) = keys::split_index_tail(&key) else {
                return Ok(None);
            };
            Ok(self
                .record_by_ordinal(ord)
                .ok()
                .flatten()
                .map(|r| (r.run_id, at)))
        };
        Ok(ArchiveStats {
            runs,
            facts,
            artifacts: t.artifacts.len() as u64,
            bytes_on_disk: self.inner.db.size_on_disk().map_err(s)?,
            oldest: end(t.by_time.iter().next())?,
            newest: end(t.by_time.iter().next_back())?,
        })
    }

    // -----------------------------------------------------------------------
    // Recovery
    // -----------------------------------------------------------------------

    /// Marks runs left running by a stopped writer as incomplete, with their
    /// records rebuilt from the facts that made it to disk.
    fn recover(&self) -> Result<()> {
        let t = self.trees();
        let s = |e| self.storage(e);
        let running: Vec<(sled::IVec, u64)> = t
            .by_status
            .scan_prefix([keys::state_byte(RunState::Running)])
            .keys()
            .filter_map(|k| {
                let k = k.ok()?;
                let (_, o) = keys::split_index_tail(&k)?;
                Some((k, o))
            })
            .collect();
        for (status_key, ordinal) in running {
            let before = match self.record_by_ordinal(ordinal) {
                Ok(Some(record)) => record,
                // The crash came right after the run's first insert, its
                // status entry: nothing else of it was kept.
                Ok(None) => {
                    t.by_status.remove(status_key).map_err(s)?;
                    continue;
                }
                Err(_) => continue,
            };
            // Status changes are atomic (see `swap_status`), so a crash never
            // leaves a closed run both its own entry and a "running" one:
            // that is damage, left for `verify` to report.
            let own = keys::index_key(
                &[keys::state_byte(before.state)],
                before.started_at,
                ordinal,
            );
            if before.state.is_closed() && t.by_status.contains_key(own).map_err(s)? {
                continue;
            }
            let mut after = RunRecord {
                state: RunState::Running,
                facts: 0,
                calls: 0,
                ended_calls: 0,
                failed_credentials: 0,
                tools: BTreeSet::new(),
                ended_at: None,
                ..before.clone()
            };
            for item in t.events.scan_prefix(ordinal.to_be_bytes()) {
                let (key, value) = item.map_err(|e| self.storage(e))?;
                let Some((_, first)) = keys::split_event_key(&key) else {
                    continue;
                };
                let Ok(opened) = block::open(&value) else {
                    continue;
                };
                after.facts = after.facts.max(first + opened.count as u64);
                if let Ok(facts) = block::decode_facts(&opened, first) {
                    for fact in &facts {
                        after.observe(fact);
                    }
                }
            }
            // The calls and tools of a damaged block stay known from the
            // stored record (which the tool index agrees with).
            after.calls = after.calls.max(before.calls);
            after.tools.extend(before.tools.iter().cloned());
            if after.state == RunState::Running {
                after.state = RunState::Incomplete;
            }
            // The crash may have cut the inserts that make or change a run
            // (record, indexes, run id) anywhere: store the record and assert
            // every index entry it implies (each insert is idempotent), and
            // move the status entry last, so that a crash during recovery
            // leaves the run to the next one.
            t.runs
                .insert(ordinal.to_be_bytes(), encode_record(&after))
                .map_err(s)?;
            self.index_but_status(ordinal, &after)?;
            let _ = t
                .run_ids
                .compare_and_swap(
                    after.run_id.as_bytes(),
                    None::<&[u8]>,
                    Some(&ordinal.to_be_bytes()[..]),
                )
                .map_err(s)?;
            self.swap_status(status_key.to_vec(), ordinal, &after)?;
        }
        Ok(())
    }
}

/// How long an opener waits for the directory lock before saying the
/// archive is held. sled finishes background writes of a database this
/// process just closed on its own threads, which hold the lock for a moment
/// after the last handle is dropped; another process's lock outlasts this.
const LOCK_GRACE: std::time::Duration = std::time::Duration::from_millis(1500);

fn open_sled(config: &sled::Config, dir: &Path) -> Result<sled::Db> {
    let started = std::time::Instant::now();
    loop {
        match config.open().map_err(|e| open_error(dir, e)) {
            Err(ArchiveError::Locked { .. }) if started.elapsed() < LOCK_GRACE => {
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
        sled::Error::Corruption { .. } | sled::Error::Unsupported(_) => ArchiveError::Format {
            dir: dir.to_path_buf(),
            detail: e.to_string(),
        },
        source => ArchiveError::Storage {
            dir: dir.to_path_buf(),
            source,
        },
    }
}

/// Gives a batch its seqs, from `first`.
fn numbered(facts: Vec<NewFact>, first: u64) -> Vec<Fact> {
    facts
        .into_iter()
        .enumerate()
        .map(|(i, f)| f.with_seq(first + i as u64))
        .collect()
}

/// Checks a batch against the stream rules as they stand before it.
fn check_batch(run_id: &str, mut rules: StreamRules, facts: &[Fact]) -> Result<()> {
    for (i, fact) in facts.iter().enumerate() {
        rules
            .check(fact)
            .map_err(|violation| ArchiveError::InvalidFacts {
                run_id: run_id.into(),
                detail: format!(
                    "fact {i} of the batch breaks a stream rule: {violation}; nothing of the batch was stored"
                ),
            })?;
    }
    Ok(())
}

/// The facts of one run, in seq order (see [`Archive::facts`]).
pub struct Facts {
    archive: Archive,
    run_id: String,
    ordinal: u64,
    cursor: Option<BlockCursor>,
    /// The block being read, its facts decoded one at a time.
    current: Option<OpenBlock>,
    pending: VecDeque<Result<Fact>>,
    start: u64,
    end: Option<u64>,
    /// The first seq the next block should hold; `None` after a damaged
    /// block of unknown extent.
    expect: Option<u64>,
}

/// A block whose checksum was checked, read one fact at a time (so that a
/// reader never holds a block's facts decoded all at once).
struct OpenBlock {
    payload: BlockPayload,
    /// Byte position of the next fact in the payload.
    pos: usize,
    /// Seq of the next fact.
    seq: u64,
    /// Seq of the block's last fact.
    last: u64,
}

/// Where an [`OpenBlock`]'s plain payload is.
enum BlockPayload {
    /// In the stored block, after its header (a plain block: no copy).
    Stored(sled::IVec),
    /// Decompressed from a compressed block.
    Decompressed(Vec<u8>),
}

impl OpenBlock {
    fn payload(&self) -> &[u8] {
        match &self.payload {
            BlockPayload::Stored(value) => value.get(block::HEADER_LEN..).unwrap_or_default(),
            BlockPayload::Decompressed(plain) => plain,
        }
    }

    /// The next fact; `None` at the block's end.
    fn next_fact(&mut self) -> Option<Result<Fact, String>> {
        if self.seq > self.last {
            return (self.pos != self.payload().len())
                .then(|| Err("the block holds more bytes than its header counts facts".into()));
        }
        let (fact, next) = match block::fact_at(self.payload(), self.pos) {
            Ok(x) => x,
            Err(e) => return Some(Err(e)),
        };
        if fact.seq != self.seq {
            return Some(Err(format!(
                "fact has seq {} where {} was expected",
                fact.seq, self.seq
            )));
        }
        self.pos = next;
        self.seq += 1;
        Some(Ok(fact))
    }
}

/// Which blocks remain to read: keys `from..=upto` of the run (first seqs).
///
/// Each block is looked up afresh instead of holding one sled iterator for
/// the whole run: a live sled iterator pins memory that sled cannot reclaim
/// until it is dropped, so a long run read through one grows without bound.
struct BlockCursor {
    from: u64,
    upto: u64,
    /// No block is left in range.
    done: bool,
}

impl Facts {
    /// The next block in range, and the first seq of the block after it.
    fn next_block(&mut self) -> Option<sled::Result<(u64, sled::IVec, Option<u64>)>> {
        let cursor = self.cursor.as_mut()?;
        if cursor.done {
            return None;
        }
        let events = &self.archive.trees().events;
        let lo = keys::event_key(self.ordinal, cursor.from);
        let hi = keys::event_key(self.ordinal, cursor.upto);
        let mut range = events.range(lo..=hi);
        let (key, value) = match range.next()? {
            Ok(kv) => kv,
            Err(e) => return Some(Err(e)),
        };
        let next = match range.next() {
            Some(Ok((k, _))) => keys::split_event_key(&k).map(|(_, s)| s),
            _ => None,
        };
        drop(range);
        let first = keys::split_event_key(&key).map_or(cursor.from, |(_, s)| s);
        match first.checked_add(1) {
            Some(f) if f <= cursor.upto => cursor.from = f,
            _ => cursor.done = true,
        }
        Some(Ok((first, value, next)))
    }

    fn empty(archive: Archive, run_id: &str) -> Facts {
        Facts {
            archive,
            run_id: run_id.into(),
            ordinal: 0,
            cursor: None,
            current: None,
            pending: VecDeque::new(),
            start: 0,
            end: None,
            expect: None,
        }
    }

    /// Seqs `first..=last` that no block holds.
    fn missing(&self, first: u64, last: u64) -> ArchiveError {
        ArchiveError::Corrupt {
            run_id: self.run_id.clone(),
            first_seq: first,
            last_seq: Some(last),
            detail: "no block holds these facts (a block is missing)".into(),
        }
    }

    /// Once the blocks in range are read: the facts from `expect` up to the
    /// end of the range that no block holds (blocks lost at the end of the
    /// range or of the run).
    fn missing_at_end(&self) -> Option<ArchiveError> {
        let expect = self.expect?;
        if self.end.is_some_and(|e| expect > e) {
            return None;
        }
        // The record is read before the blocks: a writer stores a block
        // before the record that counts it, so a run seen closed here has
        // all its blocks in place for the lookup below (read the other way
        // round, a reader racing the last append would report the fact
        // just written as missing).
        let closed_count = match self.archive.run(&self.run_id) {
            Ok(r) if r.state.is_closed() => Some(r.facts),
            _ => None,
        };
        let next = self
            .archive
            .trees()
            .events
            .range(keys::event_key(self.ordinal, expect)..=keys::event_key(self.ordinal, u64::MAX))
            .keys()
            .next();
        let last = match next {
            Some(Ok(k)) => keys::split_event_key(&k)?.1.checked_sub(1)?,
            Some(Err(_)) => return None,
            // Only a closed run's count is final.
            None => closed_count?.checked_sub(1)?,
        };
        (last >= expect && last >= self.start).then(|| self.missing(expect, last))
    }
}

impl Iterator for Facts {
    type Item = Result<Fact>;

    fn next(&mut self) -> Option<Result<Fact>> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if let Some(b) = &mut self.current {
                match b.next_fact() {
                    None => self.current = None,
                    Some(Ok(f)) if f.seq < self.start => {}
                    Some(Ok(f)) if self.end.is_some_and(|e| f.seq > e) => self.current = None,
                    Some(Ok(f)) => return Some(Ok(f)),
                    Some(Err(detail)) => {
                        let (first, last) = (b.seq.min(b.last), b.last);
                        self.current = None;
                        if last >= self.start && self.end.is_none_or(|e| first <= e) {
                            return Some(Err(ArchiveError::Corrupt {
                                run_id: self.run_id.clone(),
                                first_seq: first,
                                last_seq: Some(last),
                                detail,
                            }));
                        }
                    }
                }
                continue;
            }
            self.cursor.as_ref()?;
            let (first, value, next_first) = match self.next_block() {
                Some(Ok(block)) => block,
                Some(Err(e)) => {
                    self.cursor = None;
                    return Some(Err(self.archive.storage(e)));
                }
                None => {
                    self.cursor = None;
                    return self.missing_at_end().map(Err);
                }
            };
            // Seqs between the previous block and this one: a lost block.
            if let Some(expect) = self.expect {
                if first > expect && first > self.start {
                    let missing = self.missing(expect, first - 1);
                    self.pending.push_back(Err(missing));
                }
            }
            // A compressed block's payload is decompressed here, once; its
            // facts are still decoded one at a time.
            let opened = block::open(&value).map(|b| match b.payload {
                Cow::Borrowed(_) => (b.count, None),
                Cow::Owned(plain) => (b.count, Some(plain)),
            });
            match opened {
                Ok((0, _)) => self.expect = Some(first),
                Ok((count, plain)) => {
                    self.expect = Some(first + count as u64);
                    self.current = Some(OpenBlock {
                        payload: match plain {
                            Some(plain) => BlockPayload::Decompressed(plain),
                            None => BlockPayload::Stored(value),
                        },
                        pos: 0,
                        seq: first,
                        last: first + count as u64 - 1,
                    });
                }
                Err(detail) => {
                    let last_seq = match next_first {
                        Some(n) => Some(n.saturating_sub(1)),
                        None => self
                            .archive
                            .run(&self.run_id)
                            .ok()
                            .map(|r| r.facts.saturating_sub(1))
                            .filter(|&l| l >= first),
                    };
                    self.expect = last_seq.map(|l| l + 1);
                    // A damaged block wholly before the range is not in it.
                    if last_seq.is_none_or(|l| l >= self.start) {
                        self.pending.push_back(Err(ArchiveError::Corrupt {
                            run_id: self.run_id.clone(),
                            first_seq: first,
                            last_seq,
                            detail,
                        }));
                    }
                }
            }
        }
    }
}

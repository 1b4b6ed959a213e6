//! The control record: what the archive knows is durable, kept outside
//! sled's log, so that an open can tell a whole store from one that lost
//! acknowledged data.
//!
//! *Why:* sled 0.34's recovery treats the first damaged message of its log
//! as the log's end and drops everything after it without a word; its open
//! then zeroes the rest of the log, so a store that lost data reads as a
//! smaller, sound one. PostgreSQL's control file is the model: a small
//! record beside the data, written after each durable flush, checked at
//! open.
//!
//! - **The epoch.** Each [`Archive::flush`](crate::Archive::flush) numbers
//!   itself: it inserts `(epoch, runs)` into sled's `meta` tree, flushes
//!   sled and syncs its files, and only then writes the same pair here.
//!   So the control record never claims a flush that is not durable, and
//!   sled's recovered epoch is at least the recorded one unless sled lost
//!   a durable flush: recovery that ends before it is damage.
//! - **The runs** created so far (never lowered: prune leaves tombstones),
//!   to say how many runs a damaged store lost, and for salvage to know
//!   what "everything" was; and **the facts** the store holds (lowered by
//!   prune before it deletes anything), so that `verify` and salvage find
//!   a lost tail that no run record still counts.
//! - **The seal.** A process that closes an archive it found whole writes a
//!   digest of the store files' metadata (name, size, inode, modification
//!   and change times) once sled has let go of them. An open that finds the
//!   files as sealed opens sled at once; any other open first lets sled
//!   recover a scratch copy of the store and compares that copy's epoch
//!   (the probe), because sled's recovery of a damaged store rewrites it:
//!   reading never destroys what salvage could recover.
//!
//! - **The journal's positions** (format 5, see `wal`): the checkpoint
//!   (everything of the writer's journal before it is in sled, durable
//!   with the flush numbered by the epoch) and the acknowledged position
//!   (how far the journal was synced and acknowledged). A checkpoint is
//!   written with a sync; the acknowledged position after each journal
//!   sync, without one (it survives a killed process; after a power cut
//!   it may lag, and the journal's own frames then prove what they can).
//!   They are an extension after the older slot's bytes, with a checksum
//!   of their own over the whole slot: a reel that knows no journal reads
//!   the slot as before, and a slot it rewrites leaves an extension whose
//!   checksum fails, read as "no journal positions".
//!
//! The file holds two slots, written in turn (a generation number says
//! which is newer), each with its own checksum: a torn write leaves the
//! other slot, one generation older, which claims no more than is true.
//! Per flush it costs one small sled insert and one `pwrite` of the slot,
//! not synced: after a power loss the record may lag the last flushes
//! (it then checks less, never claims more); it is synced with the seal.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// The control file's name in the archive directory.
pub(crate) const CONTROL_FILE: &str = "reel.control";

const MAGIC: &[u8; 8] = b"REELCTL1";
/// A slot as reel format 4 wrote it: magic, generation, epoch, runs,
/// facts, seal flag, seal, checksum.
const SLOT_LEN: usize = 8 + 8 + 8 + 8 + 8 + 1 + 32 + 16;
/// The journal's extension after it: magic, checkpoint, acknowledged, and
/// a checksum of the whole slot up to here.
const EXT_MAGIC: &[u8; 8] = b"REELJPOS";
const EXT_LEN: usize = 8 + 8 + 8 + 16;
/// Where each slot starts (a sector apart: a torn write of one never
/// touches the other).
const SLOT_AT: [u64; 2] = [0, 512];

/// What the archive knows is durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Control {
    /// The last durable flush.
    pub epoch: u64,
    /// Runs created up to that flush.
    pub runs: u64,
    /// Facts the store held at that flush (at least).
    pub facts: u64,
    /// The store files' metadata digest when a process closed the store
    /// whole; `None` while a process holds it (or after a crash).
    pub seal: Option<[u8; 32]>,
    /// The journal's checkpoint: its batches before it are in sled,
    /// durable with this epoch's flush (0 without a journal).
    pub checkpoint: u64,
    /// How far the journal was synced and acknowledged (at least).
    pub acknowledged: u64,
}

impl Control {
    /// The value stored in sled's `meta` tree: epoch and runs.
    pub(crate) fn meta_value(&self) -> [u8; 24] {
        crate::keys::control_value(self.epoch, self.runs, self.facts)
    }

    /// Reads [`Control::meta_value`]; `None` when damaged.
    pub(crate) fn from_meta(bytes: &[u8]) -> Option<Control> {
        let (epoch, runs, facts) = crate::keys::control_from(bytes)?;
        Some(Control {
            epoch,
            runs,
            facts,
            seal: None,
            checkpoint: 0,
            acknowledged: 0,
        })
    }

    fn encode(&self, generation: u64) -> [u8; SLOT_LEN + EXT_LEN] {
        let mut s = [0u8; SLOT_LEN + EXT_LEN];
        s[..8].copy_from_slice(MAGIC);
        s[8..16].copy_from_slice(&generation.to_be_bytes());
        s[16..24].copy_from_slice(&self.epoch.to_be_bytes());
        s[24..32].copy_from_slice(&self.runs.to_be_bytes());
        s[32..40].copy_from_slice(&self.facts.to_be_bytes());
        if let Some(seal) = &self.seal {
            s[40] = 1;
            s[41..73].copy_from_slice(seal);
        }
        let sum = Sha256::digest(&s[..73]);
        s[73..SLOT_LEN].copy_from_slice(&sum[..16]);
        let e = SLOT_LEN;
        s[e..e + 8].copy_from_slice(EXT_MAGIC);
        s[e + 8..e + 16].copy_from_slice(&self.checkpoint.to_le_bytes());
        s[e + 16..e + 24].copy_from_slice(&self.acknowledged.to_le_bytes());
        let sum = Sha256::digest(&s[..e + 24]);
        s[e + 24..e + EXT_LEN].copy_from_slice(&sum[..16]);
        s
    }

    /// The journal's positions in a slot's extension: `(0, 0)` when there
    /// is none, or when an older reel rewrote the slot before it.
    fn decode_ext(s: &[u8]) -> (u64, u64) {
        let e = SLOT_LEN;
        let Some(ext) = s.get(e..e + EXT_LEN) else {
            return (0, 0);
        };
        if &ext[..8] != EXT_MAGIC || Sha256::digest(&s[..e + 24])[..16] != ext[24..] {
            return (0, 0);
        }
        let u = |r: std::ops::Range<usize>| u64::from_le_bytes(ext[r].try_into().expect("8 bytes"));
        (u(8..16), u(16..24))
    }

    /// A slot's generation and record; `None` when it is not an intact slot.
    fn decode(s: &[u8]) -> Option<(u64, Control)> {
        if s.len() < SLOT_LEN || &s[..8] != MAGIC {
            return None;
        }
        if Sha256::digest(&s[..73])[..16] != s[73..SLOT_LEN] {
            return None;
        }
        let u = |r: std::ops::Range<usize>| u64::from_be_bytes(s[r].try_into().expect("8 bytes"));
        let seal = match s[40] {
            0 => None,
            1 => Some(s[41..73].try_into().expect("32 bytes")),
            _ => return None,
        };
        let (checkpoint, acknowledged) = Control::decode_ext(s);
        Some((
            u(8..16),
            Control {
                epoch: u(16..24),
                runs: u(24..32),
                facts: u(32..40),
                seal,
                checkpoint,
                acknowledged,
            },
        ))
    }
}

/// What the control file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// No control file: a new archive, or one written before reel kept one.
    Absent,
    /// A control file with no intact slot.
    Damaged,
    /// The newest intact slot, with its generation.
    Record(u64, Control),
}

/// Reads the control file of the archive in `dir`. Never writes.
pub(crate) fn read(dir: &Path) -> io::Result<Found> {
    let bytes = match std::fs::read(dir.join(CONTROL_FILE)) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Absent),
        Err(e) => return Err(e),
    };
    let newest = SLOT_AT
        .iter()
        .filter_map(|&at| Control::decode(bytes.get(at as usize..)?))
        .max_by_key(|(generation, _)| *generation);
    Ok(match newest {
        Some((generation, control)) => Found::Record(generation, control),
        None => Found::Damaged,
    })
}

/// Whether [`Writer::write`] syncs the control file after writing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncData {
    /// `fdatasync` the slot before returning (the seal).
    Now,
    /// Leave it to the OS (each flush: the record may lag after a power
    /// loss, and then checks less, never claims more).
    Skip,
}

/// Writes the control record, slot after slot.
pub(crate) struct Writer {
    path: PathBuf,
    file: Option<File>,
    generation: u64,
    /// The record last written (or found at open).
    pub last: Control,
}

impl Writer {
    /// For the archive in `dir`, continuing after generation `generation`.
    pub(crate) fn new(dir: &Path, generation: u64, last: Control) -> Writer {
        Writer {
            path: dir.join(CONTROL_FILE),
            file: None,
            generation,
            last,
        }
    }

    /// Writes `control` into the older slot, and syncs it if `sync` says.
    pub(crate) fn write(&mut self, control: Control, sync: SyncData) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        if self.file.is_none() {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&self.path)?;
            self.file = Some(file);
        }
        let file = self.file.as_ref().expect("opened above");
        let generation = self.generation + 1;
        file.write_all_at(
            &control.encode(generation),
            SLOT_AT[(generation % 2) as usize],
        )?;
        if sync == SyncData::Now {
            file.sync_data()?;
        }
        self.generation = generation;
        self.last = control;
        Ok(())
    }
}

/// The files of sled's store in `dir`: `conf`, `db`, its snapshots and
/// `blobs/*` (reel's own `reel.*` files are not the store's).
pub(crate) fn store_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == "conf" || name == "db" || name.starts_with("snap.") {
            files.push(entry.path());
        }
    }
    match std::fs::read_dir(dir.join("blobs")) {
        Ok(entries) => {
            for entry in entries {
                files.push(entry?.path());
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    files.sort();
    Ok(files)
}

/// The digest of the store files' names and metadata: equal only while no
/// file was written, added, removed or replaced. The change time is set by
/// the kernel on every write and cannot be set back by a user, so a
/// damaged byte written through the file system always changes it.
pub(crate) fn seal_of(dir: &Path) -> io::Result<[u8; 32]> {
    use std::os::unix::fs::MetadataExt;
    let mut h = Sha256::new();
    for path in store_files(dir)? {
        let m = std::fs::symlink_metadata(&path)?;
        let name = path.strip_prefix(dir).unwrap_or(&path);
        h.update(name.to_string_lossy().as_bytes());
        h.update([0]);
        for n in [
            m.len(),
            m.dev(),
            m.ino(),
            m.mtime() as u64,
            m.mtime_nsec() as u64,
            m.ctime() as u64,
            m.ctime_nsec() as u64,
        ] {
            h.update(n.to_be_bytes());
        }
    }
    Ok(h.finalize().into())
}

/// The name of a scratch copy in the temporary directory starts with this,
/// then the pid of the process that made it.
pub(crate) const SCRATCH_PREFIX: &str = "reel-probe-";

/// Removes the scratch copies of processes that no longer run (killed
/// before they could remove their own). Only where `/proc` tells which
/// processes run; a pid reused since keeps its copy until it ends.
pub(crate) fn remove_stale_scratch() {
    let proc_fs = Path::new("/proc/self");
    if !proc_fs.exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// sled's unfinished snapshots in `dir`: sled 0.34 writes a snapshot to
/// `snap.<lsn>.generating`, syncs it and renames it; a process killed
/// before the rename leaves the file, and sled's next open takes it for
/// the newest snapshot and, finding it empty or short, refuses the whole
/// store as corrupt. It never holds anything sled's log does not.
pub(crate) fn unfinished_snapshots(dir: &Path) -> io::Result<Vec<PathBuf>> {
    Ok(store_files(dir)?
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "generating"))
        .collect())
}

/// Removes sled's unfinished snapshots (see [`unfinished_snapshots`])
/// before a writer's sled opens the store in place, and syncs the
/// directory; only while no process holds the store (sled's lock on `db`:
/// a running sled may be writing one).
pub(crate) fn remove_unfinished_snapshots(dir: &Path) -> io::Result<()> {
    if !dir.join("db").exists() {
        return Ok(());
    }
    let unfinished = unfinished_snapshots(dir)?;
    if unfinished.is_empty() {
        return Ok(());
    }
    let Ok(db) = File::open(dir.join("db")) else {
        return Ok(());
    };
    if db.try_lock().is_err() {
        return Ok(());
    }
    for path in &unfinished {
        tracing::debug!(file = %path.display(), "reel: removing sled's unfinished snapshot left by a killed process");
        std::fs::remove_file(path)?;
    }
    File::open(dir)?.sync_all()?;
    let _ = db.unlock();
    Ok(())
}

/// Copies the store files of `from` into the empty directory `into`, for
/// sled to recover there instead of in place; sled's unfinished snapshots
/// are left out (see [`unfinished_snapshots`]).
pub(crate) fn copy_store(from: &Path, into: &Path) -> io::Result<()> {
    let unfinished = unfinished_snapshots(from)?;
    for path in store_files(from)?
        .into_iter()
        .filter(|p| !unfinished.contains(p))
    {
        let name = path.strip_prefix(from).unwrap_or(&path);
        let to = into.join(name);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(&path, &to)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_round_trip_and_a_torn_slot_falls_back_to_the_other() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), Found::Absent);
        let mut w = Writer::new(dir.path(), 0, Control::default());
        let a = Control {
            epoch: 3,
            runs: 2,
            facts: 10,
            seal: None,
            ..Control::default()
        };
        let b = Control {
            epoch: 4,
            runs: 2,
            facts: 12,
            seal: Some([9; 32]),
            checkpoint: 4096,
            acknowledged: 5000,
        };
        w.write(a, SyncData::Skip).unwrap();
        w.write(b, SyncData::Now).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Found::Record(2, b));
        // Tear the newer slot (generation 2 is in slot 0).
        let path = dir.path().join(CONTROL_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Found::Record(1, a));
        bytes[512 + 20] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Found::Damaged);
    }

    /// A scratch copy left by a process that no longer runs is removed by
    /// the next probe; one of a running process is kept.
    #[test]
    fn scratch_copies_of_ended_processes_are_removed() {
        let tmp = std::env::temp_dir();
        // pid 0 never names a process in /proc.
        let stale = tmp.join(format!("{SCRATCH_PREFIX}0-test"));
        let live = tmp.join(format!("{SCRATCH_PREFIX}{}-test", std::process::id()));
        for d in [&stale, &live] {
            std::fs::create_dir_all(d.join("blobs")).unwrap();
            std::fs::write(d.join("db"), b"x").unwrap();
        }
        remove_stale_scratch();
        assert!(!stale.exists());
        assert!(live.exists());
        std::fs::remove_dir_all(&live).unwrap();
    }

    /// A slot as reel format 4 wrote it (no extension) reads, with no
    /// journal positions; so does one whose extension an older reel left
    /// stale by rewriting the slot's first part.
    #[test]
    fn a_slot_without_a_valid_extension_has_no_journal_positions() {
        let c = Control {
            epoch: 9,
            runs: 1,
            facts: 2,
            seal: None,
            checkpoint: 77,
            acknowledged: 88,
        };
        let bytes = c.encode(3);
        assert_eq!(Control::decode(&bytes), Some((3, c)));
        let old = Control::decode(&bytes[..SLOT_LEN]).expect("the older part reads");
        assert_eq!((old.1.checkpoint, old.1.acknowledged), (0, 0));
        let mut rewritten = bytes;
        let older = Control { epoch: 10, ..c }.encode(4);
        rewritten[..SLOT_LEN].copy_from_slice(&older[..SLOT_LEN]);
        let (_, read) = Control::decode(&rewritten).expect("reads");
        assert_eq!((read.epoch, read.checkpoint, read.acknowledged), (10, 0, 0));
    }

    #[test]
    fn the_meta_value_round_trips() {
        let c = Control {
            epoch: u64::MAX - 1,
            runs: 7,
            facts: 99,
            seal: None,
            ..Control::default()
        };
        assert_eq!(Control::from_meta(&c.meta_value()), Some(c));
        assert_eq!(Control::from_meta(&[1, 2, 3]), None);
    }
}

#[cfg(test)]
mod sealing {
    use super::*;
    use crate::{Archive, ArchiveConfig, FingerprintKey};
    use reel_core::fact::{FactKind, NewFact, Producer, RunStarted};

    fn config() -> ArchiveConfig {
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([3; 32]),
            ..ArchiveConfig::default()
        }
    }

    /// A writer's close seals the store as sled leaves it: the seal still
    /// matches once sled has closed, so the next writer opens in place.
    /// Each flush is numbered, and the store's epoch follows the file's.
    #[test]
    fn a_writer_seals_the_store_it_closes_and_numbers_its_flushes() {
        let dir = tempfile::tempdir().unwrap();
        {
            let archive = Archive::open(dir.path(), config()).unwrap();
            archive
                .append(
                    "r",
                    vec![NewFact {
                        at: 1,
                        offset: 0,
                        call: None,
                        kind: FactKind::RunStarted(RunStarted {
                            run_id: "r".into(),
                            session_id: None,
                            identity: None,
                            producer: Producer {
                                name: "t".into(),
                                version: "1".into(),
                            },
                            labels: Default::default(),
                            teardown_scopes: vec![],
                        }),
                    }],
                )
                .unwrap();
            // A flush syncs the journal and records how far it reaches; a
            // checkpoint numbers sled's flush and records the journal
            // position sled holds.
            archive.flush().unwrap();
            let Found::Record(_, c) = read(dir.path()).unwrap() else {
                panic!("a control record after a flush")
            };
            assert!(c.acknowledged > 0, "{c:?}");
            archive.checkpoint().unwrap();
            archive.checkpoint().unwrap();
            let Found::Record(_, c) = read(dir.path()).unwrap() else {
                panic!("a control record after a checkpoint")
            };
            assert_eq!((c.epoch, c.runs, c.facts, c.seal), (2, 1, 1, None));
            assert_eq!(c.checkpoint, c.acknowledged, "{c:?}");
        }
        // sled's threads may still be closing: give them the open's grace.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let Found::Record(_, c) = read(dir.path()).unwrap() else {
            panic!("a control record after the close")
        };
        assert!(c.epoch >= 2, "{c:?}");
        assert_eq!(c.seal, Some(seal_of(dir.path()).unwrap()), "sealed as left");
    }
}

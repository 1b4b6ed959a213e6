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
/// A slot: magic, generation, epoch, runs, facts, seal flag, seal, checksum.
const SLOT_LEN: usize = 8 + 8 + 8 + 8 + 8 + 1 + 32 + 16;
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
        })
    }

    fn encode(&self, generation: u64) -> [u8; SLOT_LEN] {
        let mut s = [0u8; SLOT_LEN];
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
        s[73..].copy_from_slice(&sum[..16]);
        s
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
        Some((
            u(8..16),
            Control {
                epoch: u(16..24),
                runs: u(24..32),
                facts: u(32..40),
                seal,
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

/// Copies the store files of `from` into the empty directory `into`, for
/// sled to recover there instead of in place.
pub(crate) fn copy_store(from: &Path, into: &Path) -> io::Result<()> {
    for path in store_files(from)? {
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
        };
        let b = Control {
            epoch: 4,
            runs: 2,
            facts: 12,
            seal: Some([9; 32]),
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

    #[test]
    fn the_meta_value_round_trips() {
        let c = Control {
            epoch: u64::MAX - 1,
            runs: 7,
            facts: 99,
            seal: None,
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
            archive.flush().unwrap();
            archive.flush().unwrap();
            let Found::Record(_, c) = read(dir.path()).unwrap() else {
                panic!("a control record after a flush")
            };
            assert_eq!((c.epoch, c.runs, c.facts, c.seal), (2, 1, 1, None));
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

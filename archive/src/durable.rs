//! What "durable" takes on top of sled's flush.
//!
//! sled 0.34's `flush` writes its log with `sync_file_range(WAIT_BEFORE |
//! WRITE | WAIT_AFTER)` on Linux: the pages reach the device, but neither
//! the file's size (the log grows as segments are added) nor the device's
//! write cache is flushed, which `sync_file_range(2)` says in as many words
//! ("there is no guarantee that the data is available after a crash").
//! sled also writes values and nodes above its blob threshold to files in
//! `blobs/` and never syncs them nor the directory. A process killed with
//! SIGKILL loses nothing either way (the page cache survives it); a power
//! loss or a kernel crash would lose a flush sled had answered.
//!
//! So [`Archive::flush`](crate::Archive::flush) follows sled's flush with
//! this: every blob file created since the last sync is synced, then the
//! `blobs/` directory (their names), then `fdatasync` of the log file, which
//! also writes its size and flushes the device's cache. Only then is a call
//! told its facts are durable.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use reel_core::lock::lock;

pub(crate) struct Durable {
    /// sled's log file (`db`), opened for syncing only.
    log: Option<File>,
    blobs: PathBuf,
    /// The blob files synced so far (sled names them by LSN), each with
    /// its length when it was synced. sled writes a blob file once, from
    /// the start, on the inserting thread; a flush may run while another
    /// thread inserts (the recorder's writer appends during its flusher's
    /// flush), so a blob file may be synced while it is still being
    /// written: its length then grows past the one recorded here, and the
    /// next sync syncs it again. Empty before the first sync, which syncs
    /// those already there (a previous process may have died before
    /// syncing them).
    synced: Mutex<HashMap<u64, u64>>,
}

impl Durable {
    /// For the archive in `dir` (its sled store already open).
    pub(crate) fn new(dir: &Path) -> Durable {
        Durable {
            // Read-only suffices: fsync(2) works on any descriptor.
            log: File::open(dir.join("db")).ok(),
            blobs: dir.join("blobs"),
            synced: Mutex::new(HashMap::new()),
        }
    }

    /// Syncs what sled's flush left unsynced (see the module).
    pub(crate) fn sync(&self) -> io::Result<()> {
        // One sync at a time: a second flush waiting here finds the blobs
        // already synced and pays only the log's fdatasync.
        let mut synced = lock(&self.synced);
        let mut seen = Vec::new();
        let mut new_names = false;
        match std::fs::read_dir(&self.blobs) {
            Ok(entries) => {
                for entry in entries {
                    let entry = entry?;
                    let Some(lsn) = entry
                        .file_name()
                        .to_str()
                        .and_then(|n| n.parse::<u64>().ok())
                    else {
                        continue;
                    };
                    seen.push(lsn);
                    // The length before the sync: the sync covers at
                    // least these bytes.
                    let len = match entry.metadata() {
                        Ok(m) => m.len(),
                        // Collected by sled since it was listed.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(e),
                    };
                    let known = synced.get(&lsn).copied();
                    if known == Some(len) {
                        continue;
                    }
                    match File::open(entry.path()) {
                        Ok(f) => f.sync_all()?,
                        // Collected by sled since it was listed: nothing to keep.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(e),
                    }
                    new_names |= known.is_none();
                    synced.insert(lsn, len);
                }
                if new_names {
                    File::open(&self.blobs)?.sync_all()?;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // Forget the files sled has collected.
        if synced.len() > seen.len() {
            let seen: std::collections::HashSet<u64> = seen.into_iter().collect();
            synced.retain(|lsn, _| seen.contains(lsn));
        }
        if let Some(log) = &self.log {
            log.sync_data()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Archive, ArchiveConfig, FingerprintKey};

    /// A fresh archive holding a 600 KiB artifact (above sled's blob
    /// threshold: a blob file of its own), flushed once.
    fn flushed_with_a_blob() -> (tempfile::TempDir, Archive) {
        let dir = tempfile::tempdir().expect("tempdir");
        let archive = Archive::open(
            dir.path(),
            ArchiveConfig {
                fingerprint_key: FingerprintKey::Key([1; 32]),
                ..ArchiveConfig::default()
            },
        )
        .expect("open");
        let big: Vec<u8> = (0..600 * 1024u64).map(|i| (i * 7919 % 251) as u8).collect();
        // A large value in sled (as an older reel stored artifacts; this
        // one writes them to files of its own, see `files`).
        archive
            .trees()
            .artifacts
            .insert([9u8; 32], big)
            .expect("insert");
        // Past the journal: a checkpoint makes it durable.
        archive.checkpoint().expect("checkpoint");
        (dir, archive)
    }

    /// A value above sled's blob threshold lands in a file of its own; the
    /// flush finds that file and syncs it (the bookkeeping records it at
    /// its length), and a second flush has nothing new to sync.
    #[test]
    fn a_flush_syncs_the_blob_files_sled_leaves_unsynced() {
        let (dir, archive) = flushed_with_a_blob();
        let blobs: Vec<u64> = std::fs::read_dir(dir.path().join("blobs"))
            .expect("sled keeps large values in blobs/")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        assert!(!blobs.is_empty(), "the 600 KiB value is a blob file");
        let synced = archive.inner.durable.synced.lock().expect("lock").clone();
        let newest = *blobs.iter().max().expect("one");
        let len = std::fs::metadata(dir.path().join("blobs").join(newest.to_string()))
            .expect("the blob file")
            .len();
        assert_eq!(synced.get(&newest), Some(&len), "{blobs:?}");
        archive.checkpoint().expect("a second checkpoint");
        assert_eq!(*archive.inner.durable.synced.lock().expect("lock"), synced);
    }

    /// A blob file synced while sled was still writing it (a flush on the
    /// recorder's flusher thread runs beside the writer's inserts) is
    /// synced again once it has grown: its recorded length no longer
    /// matches.
    #[test]
    fn a_blob_file_that_grew_since_its_sync_is_synced_again() {
        let (dir, archive) = flushed_with_a_blob();
        let durable = &archive.inner.durable;
        // As if the last sync had seen the newest blob file half written.
        let newest = *durable
            .synced
            .lock()
            .expect("lock")
            .keys()
            .max()
            .expect("a blob");
        durable.synced.lock().expect("lock").insert(newest, 10);
        archive.checkpoint().expect("a second checkpoint");
        let len = std::fs::metadata(dir.path().join("blobs").join(newest.to_string()))
            .expect("the blob file")
            .len();
        assert!(len > 10);
        assert_eq!(
            durable.synced.lock().expect("lock").get(&newest),
            Some(&len),
            "synced again at its full length"
        );
    }
}

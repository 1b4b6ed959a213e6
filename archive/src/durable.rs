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

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub(crate) struct Durable {
    /// sled's log file (`db`), opened for syncing only.
    log: Option<File>,
    blobs: PathBuf,
    /// The highest blob file (sled names them by LSN, which only grows)
    /// synced so far; 0 before the first sync, which syncs those already
    /// there (a previous process may have died before syncing them).
    synced: Mutex<u64>,
}

impl Durable {
    /// For the archive in `dir` (its sled store already open).
    pub(crate) fn new(dir: &Path) -> Durable {
        Durable {
            // Read-only suffices: fsync(2) works on any descriptor.
            log: File::open(dir.join("db")).ok(),
            blobs: dir.join("blobs"),
            synced: Mutex::new(0),
        }
    }

    /// Syncs what sled's flush left unsynced (see the module).
    pub(crate) fn sync(&self) -> io::Result<()> {
        // One sync at a time: a second flush waiting here finds the blobs
        // already synced and pays only the log's fdatasync.
        let mut synced = self.synced.lock().unwrap_or_else(|p| p.into_inner());
        let mut newest = *synced;
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
                    if lsn <= *synced {
                        continue;
                    }
                    match File::open(entry.path()) {
                        Ok(f) => f.sync_all()?,
                        // Collected by sled since it was listed: nothing to keep.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(e),
                    }
                    newest = newest.max(lsn);
                }
                if newest > *synced {
                    File::open(&self.blobs)?.sync_all()?;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        if let Some(log) = &self.log {
            log.sync_data()?;
        }
        *synced = newest;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Archive, ArchiveConfig, FingerprintKey};

    /// A value above sled's blob threshold lands in a file of its own; the
    /// flush finds that file and syncs it (the bookkeeping moves past it),
    /// and a second flush has nothing new to sync.
    #[test]
    fn a_flush_syncs_the_blob_files_sled_leaves_unsynced() {
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
        archive.put_artifact(&big).expect("put");
        archive.flush().expect("flush");
        let blobs: Vec<u64> = std::fs::read_dir(dir.path().join("blobs"))
            .expect("sled keeps large values in blobs/")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        assert!(!blobs.is_empty(), "the 600 KiB value is a blob file");
        let synced = *archive.inner.durable.synced.lock().expect("lock");
        assert_eq!(synced, *blobs.iter().max().expect("one"), "{blobs:?}");
        archive.flush().expect("a second flush");
        assert_eq!(*archive.inner.durable.synced.lock().expect("lock"), synced);
    }
}

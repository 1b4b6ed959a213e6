//! A writer's claim on an archive, so that no reader costs a recorder its
//! start and no reader reads a store a writer is changing under it.
//!
//! sled admits one process per archive, and a reader that opens a sealed
//! store in place holds sled's lock while it reads: a recorder starting
//! then found the archive held. A reader opening an unsealed store copies
//! it and scans the journal, which a writer starting or closing at that
//! moment changes (a reader then saw journal segments go missing and
//! called the archive damaged). Two files in the archive directory, each
//! locked by the kernel (a process that dies leaves no lock behind):
//!
//! - `reel.writer` ([`CLAIM_FILE`]): a writer holds it exclusively from
//!   before it touches the store until after it sealed it. A second writer
//!   finds it held and is refused with [`ArchiveError::Locked`] (after
//!   [`CLAIM_GRACE`], so that a reader's look at it never reads as a
//!   writer).
//! - `reel.readers` ([`READERS_FILE`]): a reader holds it shared while it
//!   opens, and looks at the claim under it: a claimed archive is the
//!   writer's ([`ArchiveError::Locked`]: read it through the writer's live
//!   socket, which [`crate::live::Source::open`] waits for). A writer,
//!   once it holds the claim, takes it exclusively for a moment: the
//!   readers that were opening have opened, and no new one will.
//!
//! A reader that opened a sealed store in place still holds sled's lock
//! while it reads; the writer, holding the claim, waits for it up to
//! [`WRITER_WAIT`] (no new reader can take it meanwhile).

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::{ArchiveError, Result};

/// The claim file's name in the archive directory.
pub const CLAIM_FILE: &str = "reel.writer";

/// How long a writer retries a held claim before it says the archive is
/// another writer's.
pub(crate) const CLAIM_GRACE: Duration = Duration::from_millis(1500);

/// The file readers hold shared while they open.
pub const READERS_FILE: &str = "reel.readers";

/// How long a writer that holds the claim waits for the readers opening
/// the archive, then for sled's lock (readers that opened the store in
/// place before the claim was taken).
pub(crate) const WRITER_WAIT: Duration = Duration::from_secs(30);

fn lock_file(dir: &Path, name: &str) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(name))
}

/// What [`crate::Archive::open`] holds while it opens: a writer's claim
/// (held for the archive's life), or a reader's turn (held while it
/// opens).
pub(crate) fn at_open(dir: &Path, read_only: bool) -> Result<(Option<File>, Option<File>)> {
    Ok(match read_only {
        false => (Some(claim(dir)?), None),
        true => (None, reading(dir)?),
    })
}

/// Claims `dir` for this writer (creating the directory when absent);
/// the claim holds until the returned file is dropped.
///
/// # Errors
/// [`ArchiveError::Locked`] when another writer holds the claim.
pub(crate) fn claim(dir: &Path) -> Result<File> {
    let storage = |e: std::io::Error| ArchiveError::Storage {
        dir: dir.to_path_buf(),
        source: sled::Error::Io(std::io::Error::new(
            e.kind(),
            format!("claiming the archive for this writer ({CLAIM_FILE}): {e}"),
        )),
    };
    std::fs::create_dir_all(dir).map_err(storage)?;
    let file = lock_file(dir, CLAIM_FILE).map_err(storage)?;
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < CLAIM_GRACE => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(ArchiveError::Locked {
                    dir: dir.to_path_buf(),
                })
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(storage(e)),
        }
    }
    // The readers opening now finish opening; later ones see the claim.
    let readers = lock_file(dir, READERS_FILE).map_err(storage)?;
    let started = Instant::now();
    while started.elapsed() < WRITER_WAIT {
        match readers.try_lock() {
            Ok(()) => {
                let _ = readers.unlock();
                break;
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(storage(e)),
        }
    }
    Ok(file)
}

/// A reader's turn to open `dir`: held while it opens (see the module
/// docs). `None` when there is nothing to hold (no archive directory, or
/// one this process cannot write the lock file in: no writer there
/// either).
///
/// # Errors
/// [`ArchiveError::Locked`] when a writer has claimed the archive.
pub(crate) fn reading(dir: &Path) -> Result<Option<File>> {
    if !dir.is_dir() {
        return Ok(None);
    }
    let Ok(readers) = lock_file(dir, READERS_FILE).or_else(|_| File::open(dir.join(READERS_FILE)))
    else {
        return Ok(None);
    };
    // A writer holds it only for a moment (see `claim`).
    if readers.lock_shared().is_err() {
        return Ok(None);
    }
    if claimed(dir) {
        return Err(ArchiveError::Locked {
            dir: dir.to_path_buf(),
        });
    }
    Ok(Some(readers))
}

/// Whether a writer holds (or is taking) the claim on `dir`. A directory
/// without a claim file has no writer that claimed it.
pub fn claimed(dir: &Path) -> bool {
    let Ok(file) = File::open(dir.join(CLAIM_FILE)) else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(std::fs::TryLockError::Error(_)) => false,
    }
}

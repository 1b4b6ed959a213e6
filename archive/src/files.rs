//! Artifact bytes as content-addressed files, outside sled's trees.
//!
//! An artifact is a claim check (seed 000): the fact records its id, size,
//! media type and digest; the bytes are written once, to
//! `artifacts/<2 hex>/<62 hex>` under the archive directory, named by
//! their sha-256 digest, and indexed in sled's `artifact_files` tree
//! (digest -> size). sled copied each value into its log and again into
//! its nodes, and rewrote leaves that held it; a file costs one write.
//!
//! Durability: a file is written into a temporary name and renamed, but
//! not synced when it is put. The archive's flush syncs every file put
//! since the last one (and the directories that got new names) after
//! sled's flush and before the `fdatasync` of sled's log, which is where a
//! flush becomes durable (see `durable`): an index entry made durable by a
//! flush has its file durable too. (As for sled's own blob files, a file
//! put while a flush runs may be indexed by that flush's log sync and
//! synced only by the next flush: after a power loss within that window,
//! a run's last facts, never acknowledged, can name an artifact whose file
//! is short; reading it is then damage, reported, never silent.)
//!
//! Reading hashes the bytes and compares them with the name: a flipped
//! byte is damage ([`crate::ArchiveError::Damaged`]), as sled's own
//! checksums make it for what sled holds. Archives written before this
//! keep their artifacts in sled's `artifacts` tree, which is still read.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest as _, Sha256};

use reel_core::codec::Digest;

/// The bytes of the artifact `digest` (`sha256:<hex>`) as a file of the
/// archive in `dir`, read without opening the archive (a recorder may hold
/// it): `Ok(None)` when no file holds them (an older reel kept them in
/// sled, or there are none), [`ArchiveError::Damaged`] when the file does
/// not hold the bytes it is named by. Artifact files are written once and
/// never changed, so reading one beside a writer is safe.
///
/// [`ArchiveError::Damaged`]: crate::ArchiveError::Damaged
pub fn read_artifact_file(dir: &Path, digest: &str) -> crate::Result<Option<Vec<u8>>> {
    let Some(raw) = reel_core::codec::parse_digest(digest) else {
        return Ok(None);
    };
    let files = Files::new(dir);
    let io = |e: io::Error| crate::ArchiveError::Storage {
        dir: dir.to_path_buf(),
        source: sled::Error::Io(io::Error::new(
            e.kind(),
            format!("reading {}: {e}", files.path(&raw).display()),
        )),
    };
    match files.read(&raw).map_err(io)? {
        Ok(bytes) => Ok(bytes),
        Err(detail) => Err(crate::ArchiveError::Damaged {
            dir: dir.to_path_buf(),
            detail,
        }),
    }
}

/// The folder under the archive directory.
pub(crate) const DIR: &str = "artifacts";

/// The artifact files of one archive.
pub(crate) struct Files {
    root: PathBuf,
    /// Files put since the last sync (synced by the next flush).
    pending: Mutex<Vec<Digest>>,
}

impl Files {
    /// The files of the archive in `dir`.
    pub(crate) fn new(dir: &Path) -> Files {
        Files {
            root: dir.join(DIR),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// The root folder, `artifacts/`.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Where the bytes of `digest` live.
    pub(crate) fn path(&self, digest: &Digest) -> PathBuf {
        let hex = hex::encode(digest);
        self.root.join(&hex[..2]).join(&hex[2..])
    }

    /// Writes `bytes` (whose digest is `digest`) to their file, through a
    /// temporary name, unsynced; the next [`Files::sync`] syncs it.
    pub(crate) fn write(&self, digest: &Digest, bytes: &[u8]) -> io::Result<()> {
        let path = self.path(digest);
        let folder = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(folder)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".put-")
            .tempfile_in(folder)?;
        tmp.write_all(bytes)?;
        tmp.persist(&path).map_err(|e| e.error)?;
        reel_core::lock::lock(&self.pending).push(*digest);
        Ok(())
    }

    /// Syncs every file written since the last sync, then each folder that
    /// got a new name, then the root (new folders). A file removed since
    /// (a prune) is skipped.
    pub(crate) fn sync(&self) -> io::Result<()> {
        let pending = std::mem::take(&mut *reel_core::lock::lock(&self.pending));
        if pending.is_empty() {
            return Ok(());
        }
        let mut folders = BTreeSet::new();
        for digest in &pending {
            let path = self.path(digest);
            match File::open(&path) {
                Ok(f) => f.sync_all()?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    // Synced by the next flush, which fails the same way
                    // unless the cause is gone.
                    reel_core::lock::lock(&self.pending).extend(pending.iter().copied());
                    return Err(e);
                }
            }
            if let Some(folder) = path.parent() {
                folders.insert(folder.to_path_buf());
            }
        }
        for folder in folders {
            File::open(&folder)?.sync_all()?;
        }
        File::open(&self.root)?.sync_all()?;
        Ok(())
    }

    /// The bytes of `digest`, checked against it: `Ok(None)` when there is
    /// no file, `Err` with what is wrong when the file's bytes do not hash
    /// to its name (damage).
    pub(crate) fn read(&self, digest: &Digest) -> io::Result<Result<Option<Vec<u8>>, String>> {
        let path = self.path(digest);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Ok(None)),
            Err(e) => return Err(e),
        };
        let actual: Digest = Sha256::digest(&bytes).into();
        if &actual != digest {
            return Ok(Err(format!(
                "artifact file {} does not hold the bytes it is named by ({} bytes hash to sha256:{})",
                path.display(),
                bytes.len(),
                hex::encode(actual)
            )));
        }
        Ok(Ok(Some(bytes)))
    }

    /// Removes the file of `digest` (a prune); a missing one is not an
    /// error.
    pub(crate) fn remove(&self, digest: &Digest) -> io::Result<()> {
        match std::fs::remove_file(self.path(digest)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every artifact file under `root` (an archive's `artifacts/`, which
    /// may be damaged): the digest its name gives, and its path. Names that
    /// are no digest (a temporary file a crash left) are skipped.
    pub(crate) fn list(root: &Path) -> Vec<(Digest, PathBuf)> {
        let mut found = Vec::new();
        let Ok(folders) = std::fs::read_dir(root) else {
            return found;
        };
        for folder in folders.filter_map(|e| e.ok()) {
            let prefix = folder.file_name().to_string_lossy().into_owned();
            let Ok(files) = std::fs::read_dir(folder.path()) else {
                continue;
            };
            for file in files.filter_map(|e| e.ok()) {
                let name = format!("{prefix}{}", file.file_name().to_string_lossy());
                let mut digest = [0u8; 32];
                if name.len() == 64 && hex::decode_to_slice(&name, &mut digest).is_ok() {
                    found.push((digest, file.path()));
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_of(bytes: &[u8]) -> Digest {
        Sha256::digest(bytes).into()
    }

    #[test]
    fn a_file_is_named_by_its_digest_and_read_back_checked() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files::new(dir.path());
        let d = digest_of(b"hello");
        files.write(&d, b"hello").unwrap();
        files.sync().unwrap();
        let hex = hex::encode(d);
        assert!(dir
            .path()
            .join(DIR)
            .join(&hex[..2])
            .join(&hex[2..])
            .is_file());
        assert_eq!(files.read(&d).unwrap(), Ok(Some(b"hello".to_vec())));
        assert_eq!(Files::list(files.root()), vec![(d, files.path(&d))]);
        // One flipped byte: damage, not the wrong bytes.
        std::fs::write(files.path(&d), b"hellp").unwrap();
        let damaged = files.read(&d).unwrap();
        assert!(damaged.is_err(), "{damaged:?}");
        files.remove(&d).unwrap();
        assert_eq!(files.read(&d).unwrap(), Ok(None));
        files.remove(&d).unwrap();
    }

    #[test]
    fn a_sync_skips_what_a_prune_removed() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files::new(dir.path());
        let d = digest_of(b"gone");
        files.write(&d, b"gone").unwrap();
        files.remove(&d).unwrap();
        files.sync().unwrap();
    }
}

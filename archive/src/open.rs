//! Opening an archive: the directory checks, sled's lock, the format
//! stamp, the fingerprint key and recovery.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::{
    fingerprint, keys, Archive, ArchiveError, FingerprintKey, Inner, Result, Trees, FORMAT_VERSION,
};

/// How to open an archive.
#[derive(Debug, Clone, Default)]
pub struct ArchiveConfig {
    /// sled's page cache size in bytes; `None` keeps sled's default.
    pub cache_capacity: Option<u64>,
    /// sled's background flush interval in milliseconds; `None` keeps sled's
    /// default (500 ms). `Some(0)` turns background flushing off.
    pub flush_every_ms: Option<u64>,
    /// Where the key of [`Archive::fingerprint`] comes from; never from the
    /// archive (default: [`crate::KEY_ENV`], else the user's key file).
    pub fingerprint_key: FingerprintKey,
}

impl Archive {
    /// Opens the archive in `dir`, creating it when absent. Runs left running
    /// by a writer that stopped are marked [`reel::run::RunState::Incomplete`].
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
        // The format stamp: a new archive gets this reel's; an older one
        // keeps its own until this reel first writes a run into it
        // (`Archive::stamp_format`), so that opening an archive only to read
        // it leaves it readable by the reel that wrote it; a newer one is
        // refused before anything is read or recovered.
        let format = match meta.get(keys::META_FORMAT).map_err(storage)? {
            None => {
                meta.insert(keys::META_FORMAT, &keys::format_value(FORMAT_VERSION))
                    .map_err(storage)?;
                FORMAT_VERSION
            }
            Some(v) => {
                let found = keys::format_from(&v).ok_or_else(|| ArchiveError::Format {
                    dir: dir.clone(),
                    detail: "its format marker is damaged".into(),
                })?;
                if found > FORMAT_VERSION {
                    return Err(ArchiveError::NewerFormat {
                        dir,
                        found,
                        supported: FORMAT_VERSION,
                    });
                }
                found
            }
        };
        // The fingerprint key lives outside the archive (see `fingerprint`).
        // An archive written by an older reel holds its own: it is removed,
        // so that a copy of the archive made from now on cannot be used to
        // test guesses against its fingerprints.
        if meta.remove(keys::META_KEY).map_err(storage)?.is_some() {
            meta.flush().map_err(storage)?;
            tracing::warn!(
                archive = %dir.display(),
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
            meta,
            run_ids: tree(keys::T_RUN_IDS)?,
            runs: tree(keys::T_RUNS)?,
            events: tree(keys::T_EVENTS)?,
            artifacts: tree(keys::T_ARTIFACTS)?,
            by_time: tree(keys::T_BY_TIME)?,
            by_tenant: tree(keys::T_BY_TENANT)?,
            by_tool: tree(keys::T_BY_TOOL)?,
            by_status: tree(keys::T_BY_STATUS)?,
            salvaged: tree(keys::T_SALVAGED)?,
            pruned: tree(keys::T_PRUNED)?,
        };
        let (appended, _) = tokio::sync::watch::channel(0);
        let durable = crate::durable::Durable::new(&dir);
        let archive = Archive {
            inner: Arc::new(Inner {
                durable,
                dir,
                db,
                trees,
                key,
                live: Mutex::new(HashMap::new()),
                appended,
                format: AtomicU32::new(format),
            }),
        };
        archive.recover()?;
        archive.finish_prunes()?;
        Ok(archive)
    }

    /// The format the archive is stamped with.
    pub fn format_version(&self) -> u32 {
        self.inner.format.load(Ordering::Relaxed)
    }

    /// Raises the archive's format stamp to [`FORMAT_VERSION`] before this
    /// reel writes a run into it (its blocks may be of a version an older
    /// reel cannot read: that reel then says "upgrade", not "damaged").
    pub(crate) fn stamp_format(&self) -> Result<()> {
        if self.inner.format.load(Ordering::Relaxed) >= FORMAT_VERSION {
            return Ok(());
        }
        let meta = &self.trees().meta;
        meta.insert(keys::META_FORMAT, &keys::format_value(FORMAT_VERSION))
            .map_err(|e| self.storage(e))?;
        meta.flush().map_err(|e| self.storage(e))?;
        self.inner.format.store(FORMAT_VERSION, Ordering::Relaxed);
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
        // sled's corruption is damage on disk, never a version problem;
        // so is an "unsupported" store, which is what sled says of a
        // damaged `conf` (every reel archive is sled 0.34.7's: reel's own
        // format version is checked after open, and says "newer reel").
        sled::Error::Corruption { .. } | sled::Error::Unsupported(_) => ArchiveError::Damaged {
            dir: dir.to_path_buf(),
            detail: e.to_string(),
        },
        source => ArchiveError::Storage {
            dir: dir.to_path_buf(),
            source,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An archive as reel format 1 wrote it (every block plain, version
    /// 1, the hash chain over those bytes; stamped 1) reads and verifies,
    /// and keeps its stamp while only read.
    #[test]
    fn a_format_1_archive_with_only_version_1_blocks_reads() {
        an_old_archive_reads(1, crate::block::BLOCK_PLAIN);
    }

    /// The same for format 2: its blocks lz4-compressed (version 2), as
    /// reel wrote them before zstd.
    #[test]
    fn a_format_2_archive_with_lz4_blocks_reads() {
        an_old_archive_reads(2, crate::block::BLOCK_LZ4);
    }

    /// Writes a run, rewrites every block as reel format `format` wrote it
    /// (block version `version`, chained anew), stamps `format`, and checks
    /// the run reads back the same, verifies, and the stamp is kept.
    fn an_old_archive_reads(format: u32, version: u8) {
        use crate::block;
        use reel::fact::{FactKind, NewFact, Producer, Progress, RunEnded, RunStarted, RunStatus};
        let dir = tempfile::tempdir().expect("tempdir");
        let config = || ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([1; 32]),
            ..ArchiveConfig::default()
        };
        let archive = Archive::open(dir.path(), config()).expect("open");
        let fact = |kind| NewFact {
            at: 1,
            offset: 0,
            call: None,
            kind,
        };
        let progress = |i: u64| {
            fact(FactKind::Progress(Progress {
                payload: serde_json::json!({"message": format!("step {i} of 300"), "done": i}),
                count: i + 1,
            }))
        };
        let mut first = vec![fact(FactKind::RunStarted(RunStarted {
            run_id: "old".into(),
            session_id: None,
            identity: None,
            producer: Producer {
                name: "format-1".into(),
                version: "0".into(),
            },
            labels: Default::default(),
            teardown_scopes: vec![],
        }))];
        first.extend((0..100).map(progress));
        archive.append("old", first).expect("append");
        archive
            .append("old", (100..200).map(progress).collect())
            .expect("append");
        archive
            .append(
                "old",
                vec![fact(FactKind::RunEnded(RunEnded {
                    status: RunStatus::Completed,
                }))],
            )
            .expect("append");
        let want: Vec<_> = archive
            .facts("old", ..)
            .unwrap()
            .map(|f| f.unwrap())
            .collect();
        // Rewrite every block as that format wrote it, chained anew.
        let t = archive.trees();
        let blocks: Vec<_> = t.events.iter().map(|kv| kv.unwrap()).collect();
        assert!(
            blocks.iter().any(|(_, v)| v[0] == block::BLOCK_ZSTD),
            "some block is compressed"
        );
        let mut prev = [0u8; 32];
        for (key, value) in blocks {
            let (_, seq) = keys::split_event_key(&key).unwrap();
            let opened = block::open(&value).unwrap();
            let facts = block::decode_facts(&opened, seq).unwrap();
            let mut payload = Vec::new();
            for f in &facts {
                block::push_fact(&mut payload, f).unwrap();
            }
            let mut plain = vec![version];
            // The count, as the block held it.
            plain.extend_from_slice(&value[1..5]);
            plain.extend_from_slice(&prev);
            plain.extend_from_slice(&[0; 32]);
            if version == block::BLOCK_LZ4 {
                plain.extend_from_slice(&lz4_flex::block::compress_prepend_size(&payload));
            } else {
                plain.extend_from_slice(&payload);
            }
            let digest = block::digest_of(&plain);
            plain[37..block::HEADER_LEN].copy_from_slice(&digest);
            prev = digest;
            t.events.insert(key, plain).unwrap();
        }
        t.meta
            .insert(keys::META_FORMAT, &keys::format_value(format))
            .unwrap();
        archive.flush().unwrap();
        drop(archive);
        let archive = loop {
            match Archive::open(dir.path(), config()) {
                Err(ArchiveError::Locked { .. }) => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                other => break other.expect("an old archive opens"),
            }
        };
        assert_eq!(archive.format_version(), format);
        assert!(archive
            .trees()
            .events
            .iter()
            .all(|kv| kv.unwrap().1[0] == version));
        let got: Vec<_> = archive
            .facts("old", ..)
            .unwrap()
            .map(|f| f.unwrap())
            .collect();
        assert_eq!(got, want);
        let report = archive.verify().expect("verify");
        assert!(report.is_ok(), "{:?}", report.problems);
        assert_eq!(archive.format_version(), format);
    }

    /// What sled reports of damage is damage (exit code 2 in `reel`),
    /// never "not an archive this version can read".
    #[test]
    fn sled_corruption_is_damage_not_a_version_problem() {
        let dir = Path::new("/archive");
        let corrupt = sled::Error::Corruption { at: None, bt: () };
        for e in [corrupt, sled::Error::Unsupported("bad conf".into())] {
            let err = open_error(dir, e);
            assert!(err.is_damage(), "{err:?}");
            let text = err.to_string();
            assert!(text.contains("is damaged on disk"), "{text}");
            assert!(!text.contains("version"), "{text}");
        }
        let io = sled::Error::Io(io::Error::other("disk on fire"));
        assert!(!open_error(dir, io).is_damage());
    }
}

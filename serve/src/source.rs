//! The archive the console reads, opened again when it changes.
//!
//! A read-only open reads a checked scratch copy of the store
//! ([`ArchiveConfig::read_only`]), so runs written after it are not in it.
//! Every writer's flush rewrites the archive's control record
//! (`reel.control`); [`Console::watch`] looks at its modification time and
//! length, opens the archive again when they change, swaps the new copy in
//! (requests in flight keep the old one, dropped with their last handle)
//! and bumps the generation the `/events` stream announces.
//!
//! While a recorder holds the archive (sled's lock), it cannot be opened:
//! the console keeps the copy it has and says so on every page. Reading
//! through the recorder's live socket instead is not done yet.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use reel::RunState;
use reel_archive::{Archive, ArchiveConfig, ArchiveError};
use tokio::sync::watch;

use crate::security::Security;
use crate::{ServeConfig, ServeError};

/// The control record's name in the archive directory (written by every
/// flush of every writer).
const CONTROL_FILE: &str = "reel.control";

/// The console's state: the archive copy it reads, the generation of that
/// copy, and the security settings.
pub struct Console {
    dir: PathBuf,
    poll: Duration,
    current: RwLock<Current>,
    generation: watch::Sender<u64>,
    pub(crate) security: Security,
}

struct Current {
    archive: Archive,
    /// Runs per state in this copy (empty when they could not be counted).
    counts: Vec<(RunState, u64)>,
    stamp: Option<Stamp>,
    /// Why the newest state of the archive is not shown, when it is not.
    stale: Option<String>,
}

/// What identifies a state of the control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: SystemTime,
    len: u64,
}

fn stamp(dir: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(dir.join(CONTROL_FILE)).ok()?;
    Some(Stamp {
        modified: meta.modified().ok()?,
        len: meta.len(),
    })
}

/// A read-only copy and its runs per state.
fn open_read_only(dir: &Path) -> Result<(Archive, Vec<(RunState, u64)>), ArchiveError> {
    let archive = Archive::open(
        dir,
        ArchiveConfig {
            read_only: true,
            ..ArchiveConfig::default()
        },
    )?;
    let counts = archive.count_by_status().unwrap_or_default();
    Ok((archive, counts))
}

impl Console {
    /// Opens the archive in `config.archive` (read-only) for serving.
    /// The directory must hold an archive.
    pub async fn open(config: ServeConfig) -> Result<Arc<Console>, ServeError> {
        let dir = config.archive.clone();
        if !dir.join("db").exists() {
            return Err(ServeError::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "no archive at {}: record one with `reel demo --archive {}`, or pass --archive DIR",
                    dir.display(),
                    dir.display()
                ),
            )));
        }
        let security = Security::new(&config)?;
        let opened = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || {
                let before = stamp(&dir);
                open_read_only(&dir).map(|a| (a, before))
            })
            .await
            .map_err(|e| ServeError::Io(std::io::Error::other(e)))??
        };
        Ok(Arc::new(Console {
            dir,
            poll: config.poll,
            current: RwLock::new(Current {
                archive: (opened.0).0,
                counts: (opened.0).1,
                stamp: opened.1,
                stale: None,
            }),
            generation: watch::channel(0).0,
            security,
        }))
    }

    /// The archive copy to read now (cheap: a handle).
    pub fn archive(&self) -> Archive {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .archive
            .clone()
    }

    /// Runs per state in the copy read now (counted once per copy).
    pub fn counts(&self) -> Vec<(RunState, u64)> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .counts
            .clone()
    }

    /// Why the pages may not show the archive's newest state, if so.
    pub fn stale(&self) -> Option<String> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .stale
            .clone()
    }

    /// The archive directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A receiver of the generation: it changes each time the archive is
    /// opened again.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Opens the archive again whenever its control record changes; runs
    /// until dropped.
    pub async fn watch(self: Arc<Console>) {
        let mut tick = tokio::time::interval(self.poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let this = self.clone();
            let _ = tokio::task::spawn_blocking(move || this.refresh()).await;
        }
    }

    /// One look at the control record; reopens when it changed. Returns
    /// whether a new copy was swapped in.
    pub fn refresh(&self) -> bool {
        let now = stamp(&self.dir);
        let seen = self.current.read().unwrap_or_else(|e| e.into_inner()).stamp;
        if now == seen {
            return false;
        }
        match open_read_only(&self.dir) {
            Ok((archive, counts)) => {
                // A flush between the stamp and the copy is caught by the
                // next look: the stamp read before the open is kept.
                let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
                *current = Current {
                    archive,
                    counts,
                    stamp: now,
                    stale: None,
                };
                drop(current);
                self.generation.send_modify(|g| *g += 1);
                true
            }
            Err(e) => {
                let why = match e {
                    ArchiveError::Locked { .. } => format!(
                        "a recorder is writing into {} (it holds the archive): this page shows the \
                         archive as it was when the console last opened it, and updates once the \
                         recorder closes it",
                        self.dir.display()
                    ),
                    e => format!(
                        "the archive changed but could not be opened again ({e}): this page shows \
                         it as it was"
                    ),
                };
                let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
                if current.stale.as_deref() != Some(why.as_str()) {
                    tracing::warn!("{why}");
                }
                current.stale = Some(why);
                false
            }
        }
    }
}

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
//! While a recorder holds the archive (sled's lock) and serves its live
//! socket, the console reads through the socket instead (the archive's one
//! reader, [`Source`], is then [`Source::Live`]), and tells the pages when
//! the first page of runs changed (ids, states, fact counts); once the
//! recorder is gone it opens the archive again.
//! Held by a process that serves no socket, the archive cannot be read:
//! the console keeps the copy it has and says so on every page.

use std::any::Any;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use reel_archive::live::{Asked, Client, Item, Source, SourceError, TapeAsked};
use reel_archive::{ArchiveConfig, ArchiveError, RunFilter};
use reel_core::lock::{lock, read, write};
use reel_core::RunState;

use reel_viewer::timeline::Timeline;
use tokio::sync::watch;

use crate::security::Security;
use crate::{ServeConfig, ServeError};

mod access;
mod runs;
pub(crate) use access::{Access, Admitted};
pub(crate) use runs::{Counts, Listed, RunQuery};
/// What the pages beyond a run's own read through `Console`: a whole run,
/// an artifact, replay reports.
mod reading;

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
    /// Timelines of closed runs read from this copy of the archive, so
    /// that paging a big run reads only the page's facts after the first.
    timelines: Mutex<HashMap<String, Arc<Timeline>>>,
    /// The runs table's anomalies and counts (`runs.rs`).
    kept: Mutex<runs::Kept>,
    /// Runs whose whole timeline is being built (`Access::build_timeline_later`).
    building: Mutex<std::collections::HashSet<String>>,
    /// Other views of closed runs built from this copy (a run page's
    /// lanes), by what they are and the run; cleared with the timelines.
    views: Mutex<HashMap<(&'static str, String), View>>,
    /// Where replay reports are looked for (`reel serve --reports DIR`).
    reports: Option<PathBuf>,
    pub(crate) security: Security,
}

/// A kept view of a run (downcast to its type where it is used).
type View = Arc<dyn Any + Send + Sync>;

/// The most timelines kept (dropped all at once past it).
const TIMELINES_KEPT: usize = 64;

/// Why a read failed.
pub(crate) enum ReadError {
    UnknownRun(String),
    BadRequest(String),
    Other(String),
}

impl From<ArchiveError> for ReadError {
    fn from(e: ArchiveError) -> ReadError {
        match e {
            ArchiveError::UnknownRun { .. } => ReadError::UnknownRun(e.to_string()),
            ArchiveError::BadCursor { .. } => ReadError::BadRequest(e.to_string()),
            e => ReadError::Other(e.to_string()),
        }
    }
}

impl From<SourceError> for ReadError {
    fn from(e: SourceError) -> ReadError {
        match e {
            SourceError::Archive(e) => e.into(),
            SourceError::Live(e) => e.into(),
        }
    }
}

impl From<TapeAsked> for ReadError {
    fn from(e: TapeAsked) -> ReadError {
        match e {
            TapeAsked::Asked(e) => e.into(),
            TapeAsked::Archive(e) => e.into(),
            e => ReadError::Other(e.to_string()),
        }
    }
}

impl From<Asked> for ReadError {
    fn from(e: Asked) -> ReadError {
        match e {
            Asked::UnknownRun(m) => ReadError::UnknownRun(m),
            e @ Asked::Interrupted { .. } => ReadError::Other(format!("{e}: reload the page")),
            Asked::Gone(m) => ReadError::Other(format!("{m}: reload the page")),
            Asked::Failed(m) => ReadError::Other(m),
        }
    }
}

/// The run's facts with seqs in `seqs`, each handed to `each`.
fn each_fact(
    reader: &Source,
    run_id: &str,
    seqs: std::ops::Range<u64>,
    mut each: impl FnMut(Item),
) -> Result<(), ReadError> {
    // Dropping the stream past the range closes a live connection.
    for item in reader.facts(run_id, seqs, false)? {
        each(item?);
    }
    Ok(())
}

/// What the runs table's first page shows: changes here are news.
fn signature(reader: &Source) -> Vec<(String, RunState, u64)> {
    let filter = RunFilter {
        limit: Some(50),
        ..RunFilter::default()
    };
    reader
        .list_runs(&filter)
        .map(|p| {
            p.runs
                .into_iter()
                .map(|r| (r.run_id, r.state, r.facts))
                .collect()
        })
        .unwrap_or_default()
}

struct Current {
    /// Where the pages read from: a read-only copy of the archive, or the
    /// live socket of the recorder that holds it. Private to this module:
    /// handlers read through [`Access`], which holds the grant.
    reader: Source,
    /// The first page's runs, while reading through the live socket.
    signature: Vec<(String, RunState, u64)>,
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

/// The archive's live socket while a recorder holds it, else a read-only
/// copy; and what to read from it.
fn open_current(dir: &Path, stamp: Option<Stamp>) -> Result<Current, ArchiveError> {
    let config = ArchiveConfig {
        read_only: true,
        // Never the store's lock: a recorder may start beside the
        // console.
        copy: true,
        ..ArchiveConfig::default()
    };
    Ok(match Source::open(dir, config)? {
        Source::Archive(archive) => Current {
            counts: archive.count_by_status().unwrap_or_default(),
            reader: Source::Archive(archive),
            signature: Vec::new(),
            stamp,
            stale: None,
        },
        live @ Source::Live { .. } => Current::live(live, stamp),
    })
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
        let current = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || -> Result<Current, ServeError> {
                Ok(open_current(&dir, stamp(&dir))?)
            })
            .await
            .map_err(|e| ServeError::Io(std::io::Error::other(e)))??
        };
        Ok(Arc::new(Console {
            dir,
            poll: config.poll,
            current: RwLock::new(current),
            generation: watch::channel(0).0,
            timelines: Mutex::new(HashMap::new()),
            kept: Mutex::new(runs::Kept::default()),
            building: Mutex::default(),
            views: Mutex::new(HashMap::new()),
            reports: config.reports.clone(),
            security,
        }))
    }

    /// Where to read now (cheap: a handle); only [`Access`] asks.
    fn reader(&self) -> Source {
        read(&self.current).reader.clone()
    }

    /// Whether the pages read through a recorder's live socket.
    pub fn is_live(&self) -> bool {
        matches!(read(&self.current).reader, Source::Live { .. })
    }

    /// Runs per state in the copy read now (counted once per copy, every
    /// tenant's: [`Access`] asks only for a grant that reaches all).
    fn counts(&self) -> Vec<(RunState, u64)> {
        read(&self.current).counts.clone()
    }

    /// What the pages say of where they read from, when it is not a
    /// closed archive's latest copy.
    pub fn stale(&self) -> Option<String> {
        let c = read(&self.current);
        match (&c.stale, &c.reader) {
            (Some(why), _) => Some(why.clone()),
            (None, Source::Live { .. }) => Some(
                "a recorder holds this archive: the console reads through its live socket".into(),
            ),
            (None, Source::Archive(_)) => None,
        }
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

    /// One look at the archive: reopens when its control record changed
    /// (or, while a recorder holds it, asks the recorder whether the first
    /// page of runs changed). Returns whether the pages were told.
    pub fn refresh(&self) -> bool {
        let now = stamp(&self.dir);
        let (reader, seen) = {
            let c = read(&self.current);
            (c.reader.clone(), c.stamp)
        };
        if let Source::Live { client, .. } = &reader {
            if Client::answers(&client.socket) {
                let signature = signature(&reader);
                let mut c = write(&self.current);
                if c.signature == signature {
                    return false;
                }
                c.signature = signature;
                drop(c);
                self.generation.send_modify(|g| *g += 1);
                return true;
            }
            // The recorder is gone: read the archive again.
        } else if now == seen {
            return false;
        }
        match open_current(&self.dir, now) {
            Ok(current) => {
                // A flush between the stamp and the copy is caught by the
                // next look: the stamp read before the open is kept.
                self.swap(current);
                true
            }
            Err(e) => {
                if matches!(reader, Source::Live { .. }) {
                    // The recorder is closing: the archive opens soon.
                    return false;
                }
                let why = match e {
                    ArchiveError::Locked { .. } => format!(
                        "a process that serves no live socket holds {}: this page shows the \
                         archive as it was when the console last opened it, and updates once \
                         that process closes it",
                        self.dir.display()
                    ),
                    e => format!(
                        "the archive changed but could not be opened again ({e}): this page shows \
                         it as it was"
                    ),
                };
                let mut current = write(&self.current);
                if current.stale.as_deref() != Some(why.as_str()) {
                    tracing::warn!("{why}");
                }
                current.stale = Some(why);
                false
            }
        }
    }

    /// The timeline of a closed run read from the current copy, if kept.
    fn timeline(&self, run_id: &str) -> Option<Arc<Timeline>> {
        lock(&self.timelines).get(run_id).cloned()
    }

    /// Keeps the timeline of a closed run read from the archive.
    fn keep_timeline(&self, run_id: &str, timeline: Arc<Timeline>) {
        let mut kept = lock(&self.timelines);
        if kept.len() >= TIMELINES_KEPT {
            kept.clear();
        }
        kept.insert(run_id.to_owned(), timeline);
    }

    /// A view (`what`) of a closed run kept from the current copy.
    pub(crate) fn view<T: Any + Send + Sync>(
        &self,
        what: &'static str,
        run_id: &str,
    ) -> Option<Arc<T>> {
        let kept = lock(&self.views);
        kept.get(&(what, run_id.to_owned()))
            .cloned()
            .and_then(|v| v.downcast::<T>().ok())
    }

    /// Keeps a view (`what`) of a closed run read from the archive.
    pub(crate) fn keep_view<T: Any + Send + Sync>(
        &self,
        what: &'static str,
        run_id: &str,
        view: Arc<T>,
    ) {
        let mut kept = lock(&self.views);
        if kept.len() >= TIMELINES_KEPT * 4 {
            kept.clear();
        }
        kept.insert((what, run_id.to_owned()), view);
    }

    /// How often the archive is looked at (a run page's live updates
    /// look as often).
    pub fn poll(&self) -> Duration {
        self.poll
    }

    fn swap(&self, new: Current) {
        *write(&self.current) = new;
        lock(&self.timelines).clear();
        lock(&self.views).clear();
        self.generation.send_modify(|g| *g += 1);
    }
}

impl Current {
    fn live(reader: Source, stamp: Option<Stamp>) -> Current {
        Current {
            signature: signature(&reader),
            reader,
            counts: Vec::new(),
            stamp,
            stale: None,
        }
    }
}

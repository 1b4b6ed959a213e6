//! Where the `reel` binary reads an archive from: the archive itself, or —
//! when a running recorder holds it — that recorder's live socket. Both
//! give a run's facts as one stream of [`Item`]s, damage as a
//! [`Gap`](reel::gap::Gap).

use std::path::{Path, PathBuf};

use reel::tape::Tape;
use reel::RunRecord;
use reel_archive::live::{Asked, Client, TapeAsked, SOCKET_NAME};
use reel_archive::{
    Archive, ArchiveConfig, ArchiveError, ArchiveStats, RunFilter, RunPage, TapeExt,
};

use crate::failure::Failure;

/// One item of a run's fact stream: a fact, or facts that could not be
/// read (the live client's, which the archive's reads are mapped to).
pub use reel_archive::live::Item;

/// An archive to read.
pub enum Source {
    /// Opened directly (no other process holds it).
    Local(Archive),
    /// Held by a recorder that serves its socket.
    Live { dir: PathBuf, client: Client },
}

impl Source {
    /// Opens `dir` for reading: directly, or through the live socket when a
    /// recorder holds it. Reading never writes the store: a store its last
    /// closer did not seal whole is read from a checked scratch copy
    /// ([`ArchiveConfig::read_only`]).
    pub fn open(dir: &Path) -> Result<Source, Failure> {
        Source::open_with(dir, true)
    }

    /// Opens `dir` for a verb that writes to it (prune).
    pub fn open_to_write(dir: &Path) -> Result<Source, Failure> {
        Source::open_with(dir, false)
    }

    fn open_with(dir: &Path, read_only: bool) -> Result<Source, Failure> {
        if !dir.join("db").exists() {
            return Err(Failure::msg(no_archive(dir)));
        }
        // A recorder that answers on its socket holds the archive: ask it
        // (a stale socket left by a crashed recorder refuses connections).
        let socket = dir.join(SOCKET_NAME);
        if Client::answers(&socket) {
            return Ok(Source::Live {
                dir: dir.to_path_buf(),
                client: Client::new(socket),
            });
        }
        let config = ArchiveConfig {
            read_only,
            ..ArchiveConfig::default()
        };
        match Archive::open(dir, config) {
            Ok(a) => Ok(Source::Local(a)),
            Err(ArchiveError::Locked { .. }) => {
                // The recorder may have started serving meanwhile.
                match Client::answers(&socket) {
                    true => Ok(Source::Live {
                        dir: dir.to_path_buf(),
                        client: Client::new(socket),
                    }),
                    false => Err(Failure::msg(format!(
                        "archive {} is held open by another process that serves no live socket ({}): \
                         stop that process, or record with `RecorderConfig::serve_live` on to inspect it while it runs",
                        dir.display(),
                        socket.display()
                    ))),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The local archive, for verbs that need one (verify, import, export).
    pub fn local(self, verb: &str) -> Result<Archive, Failure> {
        match self {
            Source::Local(a) => Ok(a),
            Source::Live { dir, .. } => Err(Failure::msg(format!(
                "`reel {verb}` needs the archive itself, but a running recorder holds {}: stop the recorder first (runs, show and tail work while it runs)",
                dir.display()
            ))),
        }
    }

    /// The run as a tape, as `reel export` writes it. While a recorder
    /// holds the archive, the record and the facts come through its socket
    /// and the artifacts from their files (written once, never changed);
    /// an artifact an older reel kept inside the store cannot be read
    /// then, and is said so. A run with a gap is damage, as for `export`
    /// of a closed archive.
    pub fn tape(&self, run_id: &str) -> Result<Tape, Failure> {
        match self {
            Source::Local(a) => Ok(Tape::export(a, run_id)?),
            Source::Live { dir, client } => client.tape(dir, run_id).map_err(|e| match e {
                TapeAsked::Asked(e) => asked(e),
                TapeAsked::Archive(e) => e.into(),
                e @ TapeAsked::Gap { .. } => Failure::damaged(e.to_string()),
                e @ TapeAsked::InStore { .. } => Failure::msg(e.to_string()),
            }),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        match self {
            Source::Local(a) => a.dir(),
            Source::Live { dir, .. } => dir,
        }
    }

    /// Lists runs.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<RunPage, Failure> {
        match self {
            Source::Local(a) => Ok(a.list_runs(filter)?),
            Source::Live { client, .. } => Ok(client.list_runs(filter).map_err(asked)?),
        }
    }

    /// One run's record; `Ok(None)` when there is no such run.
    pub fn run(&self, run_id: &str) -> Result<Option<RunRecord>, Failure> {
        match self {
            Source::Local(a) => match a.run(run_id) {
                Ok(r) => Ok(Some(r)),
                Err(ArchiveError::UnknownRun { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            },
            Source::Live { client, .. } => match client.run(run_id) {
                Ok(r) => Ok(Some(r)),
                Err(Asked::UnknownRun(_)) => Ok(None),
                Err(e) => Err(asked(e)),
            },
        }
    }

    /// Every run id.
    pub fn run_ids(&self) -> Result<Vec<String>, Failure> {
        match self {
            Source::Local(a) => Ok(a.run_ids().filter_map(Result::ok).collect()),
            Source::Live { client, .. } => client.run_ids().map_err(asked),
        }
    }

    /// Archive figures.
    pub fn stats(&self) -> Result<ArchiveStats, Failure> {
        match self {
            Source::Local(a) => Ok(a.stats()?),
            Source::Live { client, .. } => client.stats().map_err(asked),
        }
    }

    /// A run's facts from `from` on. With `follow` (live only) the stream
    /// goes on as facts land, until the run ends.
    pub fn facts(
        &self,
        run_id: &str,
        from: u64,
        follow: bool,
    ) -> Result<Box<dyn Iterator<Item = Result<Item, Failure>> + '_>, Failure> {
        match self {
            Source::Local(a) => Ok(Box::new(a.facts(run_id, from..)?.map(|item| match item {
                Ok(f) => Ok(Item::Fact(f)),
                Err(ArchiveError::Corrupt { gap, .. }) => Ok(Item::Gap(gap)),
                Err(e) => Err(e.into()),
            }))),
            Source::Live { client, .. } => Ok(Box::new(
                client
                    .facts(run_id, from, follow)
                    .map_err(asked)?
                    .map(|item| item.map_err(asked)),
            )),
        }
    }
}

/// What the live client's error says, with what to do when the recorder
/// stopped mid-stream.
fn asked(e: Asked) -> Failure {
    match e {
        e @ Asked::Interrupted { .. } => Failure::msg(format!(
            "{e}: run the command again (the archive is then read directly)"
        )),
        e => Failure::msg(e.to_string()),
    }
}

/// What to say of `dir`, which holds no archive, with advice that works:
/// `reel demo` records into a directory that is new or empty, never into
/// a file or a directory of other files, so for those it names another.
fn no_archive(dir: &Path) -> String {
    let usable = |d: &Path| {
        !d.exists()
            || d.join("db").exists()
            || d.read_dir()
                .is_ok_and(|mut entries| entries.next().is_none())
    };
    if usable(dir) {
        return format!(
            "no archive at {}: record one with `reel demo --archive {}`, or pass --archive DIR (or set REEL_ARCHIVE)",
            dir.display(),
            dir.display()
        );
    }
    let what = if dir.is_dir() {
        "a directory of other files"
    } else {
        "a file"
    };
    // A new directory beside it (or the default's name, when free).
    let parent = dir.parent().unwrap_or(Path::new(""));
    let fresh = std::iter::once("reel-archive".to_owned())
        .chain((2..100).map(|n| format!("reel-archive-{n}")))
        .map(|name| parent.join(name))
        .find(|d| d.as_path() != dir && usable(d))
        .unwrap_or_else(|| parent.join("reel-archive"));
    format!(
        "{} is not a reel archive ({what}): pass an archive's directory with --archive DIR (or set REEL_ARCHIVE), or record one into a new directory with `reel demo --archive {}`",
        dir.display(),
        fresh.display()
    )
}

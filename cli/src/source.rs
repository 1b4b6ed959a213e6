//! Where the `reel` binary reads an archive from: the archive itself, or —
//! when a running recorder holds it — that recorder's live socket. Both
//! give a run's facts as one stream of [`Item`]s, damage as a
//! [`Gap`].

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use reel::gap::Gap;
use reel::{Fact, RunRecord};
use reel_archive::live::{Reply, Request, SOCKET_NAME};
use reel_archive::{Archive, ArchiveConfig, ArchiveError, ArchiveStats, RunFilter, RunPage};

use crate::failure::Failure;

/// One item of a run's fact stream.
// Facts are the common case; boxing them would cost an allocation each.
#[allow(clippy::large_enum_variant)]
pub enum Item {
    /// A fact.
    Fact(Fact),
    /// Facts that could not be read.
    Gap(Gap),
}

/// An archive to read.
pub enum Source {
    /// Opened directly (no other process holds it).
    Local(Archive),
    /// Held by a recorder that serves its socket.
    Live { dir: PathBuf, socket: PathBuf },
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
        if UnixStream::connect(&socket).is_ok() {
            return Ok(Source::Live {
                dir: dir.to_path_buf(),
                socket,
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
                match UnixStream::connect(&socket) {
                    Ok(_) => Ok(Source::Live {
                        dir: dir.to_path_buf(),
                        socket,
                    }),
                    Err(_) => Err(Failure::msg(format!(
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

    /// The directory.
    pub fn dir(&self) -> &Path {
        match self {
            Source::Local(a) => a.dir(),
            Source::Live { dir, .. } => dir,
        }
    }

    fn ask(&self, request: &Request) -> Result<Replies, Failure> {
        let Source::Live { socket, .. } = self else {
            unreachable!("only live sources are asked")
        };
        let mut stream = UnixStream::connect(socket).map_err(|e| {
            Failure::msg(format!(
                "cannot reach the recorder at {}: {e}",
                socket.display()
            ))
        })?;
        let mut line = serde_json::to_vec(request)?;
        line.push(b'\n');
        stream.write_all(&line)?;
        Ok(Replies {
            lines: BufReader::new(stream),
        })
    }

    fn one(&self, request: &Request) -> Result<Reply, Failure> {
        self.ask(request)?.next().unwrap_or_else(|| {
            Err(Failure::msg(
                "the recorder closed the connection without answering",
            ))
        })
    }

    /// Lists runs.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<RunPage, Failure> {
        match self {
            Source::Local(a) => Ok(a.list_runs(filter)?),
            Source::Live { .. } => match self.one(&Request::Runs {
                filter: filter.clone(),
            })? {
                Reply::Runs(p) => Ok(p),
                other => Err(unexpected(other)),
            },
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
            Source::Live { .. } => match self.one(&Request::Run {
                run_id: run_id.into(),
            })? {
                Reply::Run(r) => Ok(Some(r)),
                Reply::Error {
                    unknown_run: true, ..
                } => Ok(None),
                other => Err(unexpected(other)),
            },
        }
    }

    /// Every run id.
    pub fn run_ids(&self) -> Result<Vec<String>, Failure> {
        match self {
            Source::Local(a) => Ok(a.run_ids().filter_map(Result::ok).collect()),
            Source::Live { .. } => match self.one(&Request::RunIds)? {
                Reply::RunIds(ids) => Ok(ids),
                other => Err(unexpected(other)),
            },
        }
    }

    /// Archive figures.
    pub fn stats(&self) -> Result<ArchiveStats, Failure> {
        match self {
            Source::Local(a) => Ok(a.stats()?),
            Source::Live { .. } => match self.one(&Request::Stats)? {
                Reply::Stats(s) => Ok(s),
                other => Err(unexpected(other)),
            },
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
            Source::Live { .. } => {
                let replies = self.ask(&Request::Facts {
                    run_id: run_id.into(),
                    from,
                    follow,
                })?;
                // The stream ends with `End`; a connection that closes
                // before it (the recorder stopped) is said, not taken for
                // the end of the run.
                let mut replies = replies;
                let mut over = false;
                let run_id = run_id.to_owned();
                Ok(Box::new(std::iter::from_fn(move || {
                    if over {
                        return None;
                    }
                    let item = match replies.next() {
                        Some(Ok(Reply::Fact(f))) => Ok(Item::Fact(f)),
                        Some(Ok(Reply::Gap(gap))) => Ok(Item::Gap(gap)),
                        Some(Ok(Reply::End)) => return None,
                        Some(Ok(other)) => Err(unexpected(other)),
                        Some(Err(e)) => Err(e),
                        None => Err(Failure::msg(format!(
                            "the recorder stopped before it sent all of run {run}'s facts: run the command again (the archive is then read directly)",
                            run = run_id
                        ))),
                    };
                    over = item.is_err();
                    Some(item)
                })))
            }
        }
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

fn unexpected(reply: Reply) -> Failure {
    match reply {
        Reply::Error { message, .. } => Failure::msg(message),
        other => Failure::msg(format!(
            "the recorder answered something unexpected: {other:?}"
        )),
    }
}

/// Reply lines from the recorder.
struct Replies {
    lines: BufReader<UnixStream>,
}

impl Iterator for Replies {
    type Item = Result<Reply, Failure>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut line = String::new();
        match self.lines.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(serde_json::from_str(&line).map_err(|e| {
                Failure::msg(format!("the recorder sent a line reel cannot read: {e}"))
            })),
            Err(e) => Some(Err(Failure::msg(format!(
                "reading from the recorder failed: {e}"
            )))),
        }
    }
}

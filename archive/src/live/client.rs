//! The client of a running recorder's live socket: one connection per
//! request, one JSON request line, reply lines until the answer is whole.
//! The `reel` binary's `source.rs` and the console (`reel-serve`) both ask
//! through it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Reply, Request};
use crate::{ArchiveStats, RunFilter, RunPage};
use reel_core::gap::Gap;
use reel_core::tape::Tape;
use reel_core::{Fact, RunRecord};

/// How long a reply line may take before the client gives up (a recorder
/// that stopped answering without closing its socket).
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The socket of a recorder that holds an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// The socket's path ([`SOCKET_NAME`](super::SOCKET_NAME) in the
    /// archive directory).
    pub socket: PathBuf,
}

/// Why asking failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Asked {
    /// The run asked for does not exist (the recorder's words).
    #[error("{0}")]
    UnknownRun(String),
    /// The recorder stopped before it sent all of a run's facts: the
    /// caller says what to do (run the command again, reload the page).
    #[error("the recorder stopped before it sent all of run {run_id}'s facts")]
    Interrupted {
        /// The run.
        run_id: String,
    },
    /// The recorder stopped serving between the reader's choice of its
    /// socket and this request (its socket is gone or refuses): the
    /// archive can now be read directly.
    #[error("{0}")]
    Gone(String),
    /// Anything else, said.
    #[error("{0}")]
    Failed(String),
}

/// Why a run could not be taken as a tape through the socket.
#[derive(Debug, thiserror::Error)]
pub enum TapeAsked {
    /// Asking failed.
    #[error(transparent)]
    Asked(#[from] Asked),
    /// Facts of the run could not be read: damage.
    #[error("run {run_id}: {gap}: a run with a gap cannot be exported whole (`reel salvage` recovers what can be read)")]
    Gap {
        /// The run.
        run_id: String,
        /// What could not be read.
        gap: Gap,
    },
    /// An artifact an older reel kept inside the store, which the
    /// recorder holds.
    #[error("run {run_id}: artifact {digest} is kept inside the store (written by an older reel), which a running recorder holds: export the run once the recorder stops")]
    InStore {
        /// The run.
        run_id: String,
        /// The artifact.
        digest: String,
    },
    /// An artifact file that does not hold its bytes: damage.
    #[error(transparent)]
    Archive(#[from] crate::ArchiveError),
}

/// One item of a run's fact stream.
// Facts are the common case; boxing them would cost an allocation each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A fact.
    Fact(Fact),
    /// Facts that could not be read.
    Gap(Gap),
}

impl Client {
    /// The client of the socket at `socket`.
    pub fn new(socket: PathBuf) -> Client {
        Client { socket }
    }

    /// Whether a recorder answers on `socket` (a stale socket left by a
    /// crashed recorder refuses connections).
    pub fn answers(socket: &Path) -> bool {
        UnixStream::connect(socket).is_ok()
    }

    fn ask(&self, request: &Request) -> Result<Replies, Asked> {
        let failed = |e: std::io::Error| {
            Asked::Failed(format!(
                "cannot reach the recorder at {}: {e}",
                self.socket.display()
            ))
        };
        let mut stream = UnixStream::connect(&self.socket).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                Asked::Gone(format!(
                    "the recorder at {} stopped while this command read through it ({e})",
                    self.socket.display()
                ))
            }
            _ => failed(e),
        })?;
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .map_err(failed)?;
        let mut line = serde_json::to_vec(request).map_err(|e| Asked::Failed(e.to_string()))?;
        line.push(b'\n');
        stream.write_all(&line).map_err(failed)?;
        Ok(Replies(BufReader::new(stream)))
    }

    /// One reply line: an error reply is the error.
    fn one(&self, request: &Request) -> Result<Reply, Asked> {
        match self.ask(request)?.next() {
            Some(Ok(reply @ Reply::Error { .. })) => Err(unexpected(reply)),
            Some(r) => r,
            None => Err(Asked::Failed(
                "the recorder closed the connection without answering".into(),
            )),
        }
    }

    /// A page of runs.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<RunPage, Asked> {
        match self.one(&Request::Runs {
            filter: filter.clone(),
        })? {
            Reply::Runs(page) => Ok(page),
            other => Err(unexpected(other)),
        }
    }

    /// One run's record ([`Asked::UnknownRun`] when there is none).
    pub fn run(&self, run_id: &str) -> Result<RunRecord, Asked> {
        match self.one(&Request::Run {
            run_id: run_id.into(),
        })? {
            Reply::Run(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// Every run id.
    pub fn run_ids(&self) -> Result<Vec<String>, Asked> {
        match self.one(&Request::RunIds)? {
            Reply::RunIds(ids) => Ok(ids),
            other => Err(unexpected(other)),
        }
    }

    /// The overview of the runs `filter` selects, in `buckets` time
    /// buckets.
    pub fn overview(
        &self,
        filter: &RunFilter,
        buckets: u32,
    ) -> Result<reel_core::summary::Overview, Asked> {
        self.ask_overview(filter, buckets, false)
    }

    /// The runs per state over time only (see
    /// [`Archive::runs_over_time`](crate::Archive::runs_over_time)).
    pub fn runs_over_time(
        &self,
        filter: &RunFilter,
        buckets: u32,
    ) -> Result<reel_core::summary::Overview, Asked> {
        self.ask_overview(filter, buckets, true)
    }

    fn ask_overview(
        &self,
        filter: &RunFilter,
        buckets: u32,
        runs_only: bool,
    ) -> Result<reel_core::summary::Overview, Asked> {
        match self.one(&Request::Overview {
            filter: filter.clone(),
            buckets,
            runs_only,
        })? {
            Reply::Overview(o) => Ok(o),
            other => Err(unexpected(other)),
        }
    }

    /// The archive's figures.
    pub fn stats(&self) -> Result<ArchiveStats, Asked> {
        match self.one(&Request::Stats)? {
            Reply::Stats(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    /// The run `run_id` of the archive in `dir` as a tape: its record and
    /// facts through the socket, its artifacts from their files (written
    /// once, never changed: safe to read beside the recorder). A run still
    /// being recorded gives its facts so far.
    pub fn tape(&self, dir: &Path, run_id: &str) -> Result<Tape, TapeAsked> {
        let record = self.run(run_id)?;
        let mut facts = Vec::new();
        for item in self.facts(run_id, 0, false)? {
            match item? {
                Item::Fact(f) => facts.push(f),
                Item::Gap(gap) => {
                    return Err(TapeAsked::Gap {
                        run_id: run_id.into(),
                        gap,
                    })
                }
            }
        }
        let mut artifacts = Vec::new();
        for digest in reel_core::tape::referenced_digests(&facts) {
            match crate::read_artifact_file(dir, &digest)? {
                Some(bytes) => artifacts.push((digest, bytes)),
                None => {
                    return Err(TapeAsked::InStore {
                        run_id: run_id.into(),
                        digest,
                    })
                }
            }
        }
        Ok(Tape::new(record, facts, artifacts))
    }

    /// A run's facts from seq `from` on, in order; with `follow`, the
    /// stream goes on as facts land, until the run ends. The stream ends
    /// with the recorder's `End`; a connection that closes before it is
    /// [`Asked::Interrupted`], never taken for the end of the run. After
    /// an error the iterator ends. Dropping it closes the connection.
    pub fn facts(
        &self,
        run_id: &str,
        from: u64,
        follow: bool,
    ) -> Result<impl Iterator<Item = Result<Item, Asked>> + Send + 'static, Asked> {
        let mut replies = self.ask(&Request::Facts {
            run_id: run_id.into(),
            from,
            follow,
        })?;
        if follow {
            // A followed run may be quiet for longer than a read timeout.
            let _ = replies.0.get_ref().set_read_timeout(None);
        }
        let run_id = run_id.to_owned();
        let mut over = false;
        Ok(std::iter::from_fn(move || {
            if over {
                return None;
            }
            let item = match replies.next() {
                Some(Ok(Reply::Fact(f))) => Ok(Item::Fact(f)),
                Some(Ok(Reply::Gap(g))) => Ok(Item::Gap(g)),
                Some(Ok(Reply::End)) => return None,
                Some(Ok(other)) => Err(unexpected(other)),
                Some(Err(e)) => Err(e),
                None => Err(Asked::Interrupted {
                    run_id: run_id.clone(),
                }),
            };
            over = item.is_err();
            Some(item)
        }))
    }
}

fn unexpected(reply: Reply) -> Asked {
    match reply {
        Reply::Error {
            message,
            unknown_run: true,
        } => Asked::UnknownRun(message),
        Reply::Error { message, .. } => Asked::Failed(message),
        other => Asked::Failed(format!(
            "the recorder answered something unexpected: {}",
            reply_name(&other)
        )),
    }
}

/// A reply's kind, for an error message (never its recorded contents).
fn reply_name(reply: &Reply) -> &'static str {
    match reply {
        Reply::Runs(_) => "runs",
        Reply::Run(_) => "run",
        Reply::RunIds(_) => "run_ids",
        Reply::Fact(_) => "fact",
        Reply::Gap(_) => "gap",
        Reply::End => "end",
        Reply::Stats(_) => "stats",
        Reply::Overview(_) => "overview",
        Reply::Error { .. } => "error",
    }
}

/// Reply lines from the recorder.
struct Replies(BufReader<UnixStream>);

impl Iterator for Replies {
    type Item = Result<Reply, Asked>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut line = String::new();
        match self.0.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(serde_json::from_str(&line).map_err(|e| {
                Asked::Failed(format!("the recorder sent a line reel cannot read: {e}"))
            })),
            Err(e) => Some(Err(Asked::Failed(format!(
                "reading from the recorder failed: {e}"
            )))),
        }
    }
}

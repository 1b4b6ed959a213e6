//! Reading an archive a recorder holds, through the recorder's live socket
//! (`reel_archive::live`: one JSON request line, reply lines until the
//! answer is whole). The `reel` binary's `source.rs` asks the same way.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reel::gap::Gap;
use reel::{Fact, RunRecord};
use reel_archive::live::{Reply, Request};
use reel_archive::{RunFilter, RunPage};

/// The socket of a recorder that holds an archive.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub(crate) socket: PathBuf,
}

/// Why asking failed: the run is unknown, or something else (said).
pub(crate) enum Asked {
    UnknownRun(String),
    Failed(String),
}

/// One item of a run's facts.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Item {
    Fact(Fact),
    Gap(Gap),
}

impl Live {
    /// Whether a recorder answers on `socket`.
    pub(crate) fn answers(socket: &Path) -> bool {
        UnixStream::connect(socket).is_ok()
    }

    fn ask(&self, request: &Request) -> Result<Replies, Asked> {
        let failed = |e: std::io::Error| {
            Asked::Failed(format!(
                "cannot reach the recorder at {}: {e}",
                self.socket.display()
            ))
        };
        let mut stream = UnixStream::connect(&self.socket).map_err(failed)?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(failed)?;
        let mut line = serde_json::to_vec(request).map_err(|e| Asked::Failed(e.to_string()))?;
        line.push(b'\n');
        stream.write_all(&line).map_err(failed)?;
        Ok(Replies(BufReader::new(stream)))
    }

    fn one(&self, request: &Request) -> Result<Reply, Asked> {
        match self.ask(request)?.next() {
            Some(Ok(Reply::Error {
                message,
                unknown_run: true,
            })) => Err(Asked::UnknownRun(message)),
            Some(Ok(Reply::Error { message, .. })) => Err(Asked::Failed(message)),
            Some(r) => r,
            None => Err(Asked::Failed(
                "the recorder closed the connection without answering".into(),
            )),
        }
    }

    pub(crate) fn list_runs(&self, filter: &RunFilter) -> Result<RunPage, Asked> {
        match self.one(&Request::Runs {
            filter: filter.clone(),
        })? {
            Reply::Runs(page) => Ok(page),
            other => Err(unexpected(other)),
        }
    }

    pub(crate) fn run(&self, run_id: &str) -> Result<RunRecord, Asked> {
        match self.one(&Request::Run {
            run_id: run_id.into(),
        })? {
            Reply::Run(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// A run's facts as they stand (not followed).
    pub(crate) fn facts(
        &self,
        run_id: &str,
    ) -> Result<impl Iterator<Item = Result<Item, Asked>>, Asked> {
        let mut replies = self.ask(&Request::Facts {
            run_id: run_id.into(),
            from: 0,
            follow: false,
        })?;
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
                None => Err(Asked::Failed(
                    "the recorder stopped before it sent all of the run's facts: reload the page"
                        .into(),
                )),
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
        _ => Asked::Failed("the recorder answered something unexpected".into()),
    }
}

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

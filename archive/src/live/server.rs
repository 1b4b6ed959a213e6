//! The server of the live socket: the process that holds an archive serves
//! reads of it on a Unix socket inside the archive directory (owner-only),
//! so that `reel runs`, `reel show`, `reel tail` and the console work while
//! it writes. The protocol is the parent module's.
//!
//! A recorder starts its [`LiveServer`] itself (`RecorderConfig::serve_live`
//! in `reel-recorder`); any other process that holds an archive and keeps
//! appending to it (`reel sync --follow`, projecting a cluster's stream)
//! starts one the same way. A writer that holds runs before it writes them
//! (`reel collect`, holding a trace until it has ended) starts it with
//! [`LiveServer::start_holding`], so that a listing shows those runs as
//! running meanwhile.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use reel_core::lock::lock;
use reel_core::{Fact, RunRecord};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::{JoinHandle, JoinSet};

use super::{Reply, Request, SOCKET_NAME};
use crate::{Archive, ArchiveError, RunFilter, RunPage};

/// The runs a writer holds and has not written yet, as running records
/// (no facts stored): asked for on each listing.
pub type Held = Arc<dyn Fn() -> Vec<RunRecord> + Send + Sync>;

/// A running socket server; stops and removes the socket on drop.
pub struct LiveServer {
    path: PathBuf,
    task: JoinHandle<()>,
    /// Connections being served.
    connections: Arc<Mutex<JoinSet<()>>>,
}

impl LiveServer {
    /// Binds `<archive>/reel.sock` (replacing a stale one: this process holds
    /// the archive lock, so no other recorder serves it) and serves in the
    /// background on the current tokio runtime.
    ///
    /// # Errors
    /// When the socket cannot be bound in the archive's directory.
    pub fn start(archive: Archive) -> std::io::Result<LiveServer> {
        LiveServer::serve(archive, None)
    }

    /// As [`LiveServer::start`], and a listing's first page (no cursor)
    /// also shows the runs `held` gives that its filter selects, newest
    /// first, before the archive's page (besides its limit): runs being
    /// held are running, though none of their facts is stored yet.
    ///
    /// # Errors
    /// When the socket cannot be bound in the archive's directory.
    pub fn start_holding(archive: Archive, held: Held) -> std::io::Result<LiveServer> {
        LiveServer::serve(archive, Some(held))
    }

    fn serve(archive: Archive, held: Option<Held>) -> std::io::Result<LiveServer> {
        let path = archive.dir().join(SOCKET_NAME);
        let _ = std::fs::remove_file(&path);
        let listener = bind_private(&path)?;
        let connections = Arc::new(Mutex::new(JoinSet::new()));
        let served = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (archive, held) = (archive.clone(), held.clone());
                let mut set = lock(&served);
                // Reap what has finished, so the set holds live ones only.
                while set.try_join_next().is_some() {}
                set.spawn(async move {
                    let _ = serve(archive, held, stream).await;
                });
            }
        });
        Ok(LiveServer {
            path,
            task,
            connections,
        })
    }

    /// Stops taking connections and removes the socket, then gives the
    /// connections being served up to `grace` to finish (a follower of an
    /// ended run gets its last facts and the end of the stream) before
    /// dropping them.
    pub async fn stop(self, grace: Duration) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
        let mut set = std::mem::take(&mut *lock(&self.connections));
        let _ =
            tokio::time::timeout(grace, async { while set.join_next().await.is_some() {} }).await;
        set.abort_all();
    }
}

impl Drop for LiveServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the socket in a fresh owner-only directory, restricts it to its
/// owner, then moves it to `path`: a socket bound in place would be
/// reachable with the umask's wider permissions until restricted.
fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::DirBuilderExt;
    let staging = path.with_file_name(format!(".{SOCKET_NAME}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::DirBuilder::new().mode(0o700).create(&staging)?;
    let staged = staging.join(SOCKET_NAME);
    let bound = UnixListener::bind(&staged).and_then(|listener| {
        restrict(&staged)?;
        std::fs::rename(&staged, path)?;
        Ok(listener)
    });
    let _ = std::fs::remove_dir_all(&staging);
    bound
}

#[cfg(unix)]
fn restrict(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

async fn send(stream: &mut (impl AsyncWriteExt + Unpin), reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line).await
}

fn error(e: ArchiveError) -> Reply {
    Reply::Error {
        unknown_run: matches!(e, ArchiveError::UnknownRun { .. }),
        message: e.to_string(),
    }
}

/// A page of runs: with `held`, a first page has the held runs the filter
/// selects before the archive's.
fn list_runs(
    archive: &Archive,
    held: Option<&Held>,
    filter: &RunFilter,
) -> Result<RunPage, ArchiveError> {
    let mut page = archive.list_runs(filter)?;
    if let (Some(held), None) = (held, &filter.cursor) {
        let mut runs: Vec<RunRecord> = held()
            .into_iter()
            .filter(|r| crate::list::matches(filter, r))
            .collect();
        runs.sort_by_key(|r| std::cmp::Reverse(r.started_at));
        runs.append(&mut page.runs);
        page.runs = runs;
    }
    Ok(page)
}

async fn serve(archive: Archive, held: Option<Held>, stream: UnixStream) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let Some(line) = lines.next_line().await? else {
        return Ok(());
    };
    let request: Request = match serde_json::from_str(&line) {
        Ok(r) => r,
        Err(e) => {
            let reply = Reply::Error {
                message: format!("bad request: {e}"),
                unknown_run: false,
            };
            return send(&mut write, &reply).await;
        }
    };
    match request {
        Request::Runs { filter } => {
            let reply = list_runs(&archive, held.as_ref(), &filter)
                .map(Reply::Runs)
                .unwrap_or_else(error);
            send(&mut write, &reply).await
        }
        Request::Run { run_id } => {
            let reply = archive.run(&run_id).map(Reply::Run).unwrap_or_else(error);
            send(&mut write, &reply).await
        }
        Request::RunIds => {
            let ids = archive.run_ids().filter_map(Result::ok).collect();
            send(&mut write, &Reply::RunIds(ids)).await
        }
        Request::Stats => {
            let reply = archive.stats().map(Reply::Stats).unwrap_or_else(error);
            send(&mut write, &reply).await
        }
        Request::Overview {
            filter,
            buckets,
            runs_only,
        } => {
            // Many runs' summaries: read on a blocking thread.
            let reply = tokio::task::spawn_blocking(move || {
                if runs_only {
                    archive.runs_over_time(&filter, buckets)
                } else {
                    archive.overview(&filter, buckets)
                }
                .map(Reply::Overview)
                .unwrap_or_else(error)
            })
            .await
            .map_err(std::io::Error::other)?;
            send(&mut write, &reply).await
        }
        Request::Facts {
            run_id,
            from,
            follow,
        } => {
            if let Err(e) = archive.run(&run_id) {
                return send(&mut write, &error(e)).await;
            }
            if follow {
                let mut stream = Box::pin(archive.follow(&run_id, from));
                while let Some(item) = stream.next().await {
                    send(&mut write, &fact_reply(item)).await?;
                }
            } else {
                let facts = match archive.facts(&run_id, from..) {
                    Ok(f) => f,
                    Err(e) => return send(&mut write, &error(e)).await,
                };
                // Read on a blocking thread in chunks: sled reads are sync.
                let mut facts = facts;
                loop {
                    let (chunk, rest) = tokio::task::spawn_blocking(move || {
                        let chunk: Vec<_> = facts.by_ref().take(1024).collect();
                        (chunk, facts)
                    })
                    .await
                    .map_err(std::io::Error::other)?;
                    facts = rest;
                    if chunk.is_empty() {
                        break;
                    }
                    for item in chunk {
                        send(&mut write, &fact_reply(item)).await?;
                    }
                }
            }
            send(&mut write, &Reply::End).await
        }
    }
}

fn fact_reply(item: Result<Fact, ArchiveError>) -> Reply {
    match item {
        Ok(f) => Reply::Fact(f),
        Err(ArchiveError::Corrupt { gap, .. }) => Reply::Gap(gap),
        Err(e) => error(e),
    }
}

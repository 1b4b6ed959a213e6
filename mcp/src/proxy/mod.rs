//! A recording proxy for any MCP server (`reel mcp record -- CMD ARGS...`).
//!
//! [`StdioProxy`] starts the server command and sits on stdio between the
//! client (the proxy's own standard input and output) and the server (the
//! child's). Every newline-delimited JSON-RPC line passes through
//! unchanged: each line is parsed and linked to its call (synchronously,
//! no await), then forwarded, so a message is known before the other side
//! can answer it; recording never alters the traffic, and what it costs a
//! line is one parse. The server's standard error is the proxy's.
//!
//! ## How a proxied session is recorded
//!
//! One client connection is one run (`mcp-` and 32 random hex digits,
//! labels `mcp.transport` = `stdio` and `mcp.command` = the server's
//! command line), whose tool calls are calls: a tape is one stream, and a
//! cassette (`reel mcp mock`) and a regression check (`reel mcp verify`)
//! need the whole session in one tape, in order.
//!
//! - `initialize` is the call `mcp:initialize` (args: the client's params,
//!   result: the server's), the first `tools/list` the call
//!   `mcp:tools/list` (args: its params or `{}`): recorded once per session,
//!   so a tape knows what the server offered.
//! - Each `tools/call` is a call of the MCP tool's name, protocol `mcp`,
//!   with the client's `clientInfo`; its args are the request's
//!   `arguments` exactly (`{}` when absent), its result the whole
//!   `CallToolResult` the server sent; one with `isError: true` ends it
//!   with the error `tool error: <its text>` and the result kept whole, a
//!   JSON-RPC error response with `json-rpc error <code>: <message>` and
//!   the error object kept whole, `data` included ([`crate::outcome`]).
//!   `resources/list` and `prompts/list` are recorded as
//!   `initialize` is (`mcp:resources/list`, `mcp:prompts/list`, each page).
//! - A response is matched only to a request forwarded the other way and
//!   still unanswered; anything else (a response out of turn, progress on
//!   no token in flight) is the call `mcp:unmatched` (args `from` and
//!   `message`, ended `error`), never an answer. Progress on the token of
//!   a call already answered names that call (`after_result_of`), and a
//!   notification that carries an id is kept the same way (its id is
//!   still remembered, so an answer to it is no stray answer): what
//!   `reel mcp check` reads.
//! - What belongs to a call is filed through its context, as ordinary
//!   facts: `notifications/progress` (linked by `progressToken`) is a
//!   `progress` fact of the params without the token;
//!   `notifications/message` a `log` fact (level, logger, data);
//!   `elicitation/create` an `elicit.requested` answered by the client's
//!   response to that request (accept, decline, cancel; a JSON-RPC error is
//!   outcome `error`); the client's `notifications/cancelled` (linked by
//!   `requestId`) a `cancel.requested`; the call still files what the
//!   server sends for it (the client was sent it) until the server
//!   answers or the session ends, and ends cancelled.
//!   On 2026-07-28 a `tools/call` answered `resultType: "input_required"`
//!   stays one call across its rounds: each `elicitation/create` of its
//!   `inputRequests` is an `elicit.requested`, answered from the
//!   `inputResponses` of the client's next round (the one echoing its
//!   `requestState`), whose response goes on the same call.
//!   A `tools/call` answered `resultType: "task"` (SEP-2663) stays one
//!   call across the `tasks/get`, `tasks/update` and `tasks/cancel`
//!   requests naming its `taskId`: each exchange a `call.output` at the
//!   stage of its method, the call ended by the `tasks/get` answering a
//!   terminal status (`link/task.rs` says the shapes).
//!   On stdio a server's log message and elicitation carry no request id:
//!   they belong to the call in flight, the newest one when several are.
//! - Redaction is the recorder's: secret-named keys everywhere, and the
//!   values given to [`StdioProxy::secret`] scrubbed from every fact.
//! - The run ends `completed` when the client closes the connection,
//!   `failed` when the server went away first, `cancelled` when the
//!   proxy was stopped (Ctrl-C or SIGTERM). Once the session is over the server's stdin is
//!   closed and it gets [`EXIT_GRACE`] (or [`StdioProxy::exit_grace`]) to
//!   exit; a server still running then is killed
//!   ([`ProxyOutcome::killed`]).
//!
//! The proxy's own failures never break the session: a run that cannot
//! start is reported through `tracing` (the operator's standard error)
//! and the traffic still flows. A line that is not JSON (a server's
//! banner on its stdout, say) is forwarded, recorded as the call
//! `mcp:unmatched` holding it (which the viewer counts as an anomaly of
//! the run), and said through `tracing` with the line, its declared
//! secrets scrubbed, cut to 200 characters.

pub(crate) mod http;
pub(crate) mod line;
pub(crate) mod link;

pub use http::{
    BoundHttpProxy, HttpOutcome, HttpProxy, DEFAULT_IDLE_CLOSE, DEFAULT_MAX_BODY, MIN_TOKEN_LEN,
    TOKEN_HEADER,
};
pub use link::task::{
    CLIENT_CANCELLED, SERVER_CANCELLED, TASK_CANCEL, TASK_CREATED, TASK_GET, TASK_UPDATE,
};

use std::ffi::OsString;
use std::future::Future;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use reel::context::Secret;
use reel::fact::RunStatus;
use reel_recorder::{Durability, Recorder, RecorderConfig, RunStart};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::Command;

use link::{Dir, Router};

/// The recorder configuration a recording proxy opens its archive with
/// (what `reel mcp record` uses): the defaults, but buffered durability.
///
/// A proxy never holds a message back for its recording (the server's
/// answer is forwarded the moment it is read), so call-boundary
/// durability would promise the client nothing: it would only add one
/// flush (`sync_file_range` plus `fdatasync`) per `tools/call`, off the
/// forwarding path but on the same CPUs as the client and the server.
/// The `mcp-record` bench row's profile showed those flushes as the
/// largest part of the proxy's CPU. Buffered, sled flushes in the
/// background (every 500 ms), and everything is durable when the
/// recorder shuts down at the end of the session (a crash of the proxy
/// may lose the last moments, as it could lose the facts of a call whose
/// answer was already forwarded).
pub fn recorder_config() -> RecorderConfig {
    RecorderConfig {
        durability: Durability::Buffered,
        ..RecorderConfig::default()
    }
}

/// A byte stream the proxy reads the client from.
pub type ClientIn = Box<dyn AsyncRead + Unpin + Send>;
/// A byte stream the proxy writes the client to.
pub type ClientOut = Box<dyn AsyncWrite + Unpin + Send>;

/// This process's standard input and output as the client's side of a
/// proxied session (what `reel mcp record` passes to [`StdioProxy::run`]).
///
/// When they are pipes (as a client that starts the proxy makes them),
/// each is read and written directly through the runtime's reactor, made
/// non-blocking; otherwise (a terminal, a file, a socket) through tokio's
/// `stdin()`/`stdout()`, which hand every read and write to a blocking
/// thread and back: two thread hand-offs per message each way, which the
/// `mcp-record` bench row showed in the proxy's round trip. The blocking
/// mode is given back when each is dropped: a pipe's mode belongs to the
/// open pipe, which this process may share with the one that started it
/// (a script's next command writing the same pipe would get `EAGAIN`).
/// Must be called inside a tokio runtime with IO enabled.
pub fn client_stdio() -> (ClientIn, ClientOut) {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use tokio::net::unix::pipe;
        // Read before the pipes are made non-blocking below.
        let (stdin_mode, stdout_mode) = (nonblocking(0), nonblocking(1));
        let input = std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .and_then(pipe::Receiver::from_owned_fd);
        let output = std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .and_then(pipe::Sender::from_owned_fd);
        let input: ClientIn = match input {
            Ok(r) => Box::new(Blocking::restored(r, stdin_mode)),
            Err(_) => Box::new(tokio::io::stdin()),
        };
        let output: ClientOut = match output {
            Ok(w) => Box::new(Blocking::restored(w, stdout_mode)),
            Err(_) => Box::new(tokio::io::stdout()),
        };
        (input, output)
    }
    #[cfg(not(unix))]
    {
        (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
    }
}

/// Whether `fd` is in non-blocking mode now (`None`: it cannot be read).
#[cfg(unix)]
fn nonblocking(fd: std::os::fd::RawFd) -> Option<bool> {
    // SAFETY: F_GETFL reads a descriptor's flags; a bad descriptor is an
    // error return, not undefined behaviour.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    (flags >= 0).then_some(flags & libc::O_NONBLOCK != 0)
}

/// A pipe end made non-blocking for the reactor, put back into blocking
/// mode when dropped if it was in blocking mode before.
#[cfg(unix)]
struct Blocking<T: std::os::fd::AsRawFd> {
    inner: T,
    restore: bool,
}

#[cfg(unix)]
impl<T: std::os::fd::AsRawFd> Blocking<T> {
    /// `was_nonblocking`: the mode before `inner` was made.
    fn restored(inner: T, was_nonblocking: Option<bool>) -> Blocking<T> {
        Blocking {
            inner,
            restore: was_nonblocking == Some(false),
        }
    }
}

#[cfg(unix)]
impl<T: std::os::fd::AsRawFd> Drop for Blocking<T> {
    fn drop(&mut self) {
        if !self.restore {
            return;
        }
        let fd = self.inner.as_raw_fd();
        // SAFETY: the descriptor is open (`inner` is dropped after this);
        // F_GETFL/F_SETFL only change its status flags.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
    }
}

#[cfg(unix)]
impl<T: std::os::fd::AsRawFd + AsyncRead + Unpin> AsyncRead for Blocking<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

#[cfg(unix)]
impl<T: std::os::fd::AsRawFd + AsyncWrite + Unpin> AsyncWrite for Blocking<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// What a proxied session came to.
#[derive(Debug)]
pub struct ProxyOutcome {
    /// The run recorded, when one could be started.
    pub run_id: Option<String>,
    /// How the run ended.
    pub status: RunStatus,
    /// How the server exited (`None` when it could not be waited for).
    pub exit: Option<ExitStatus>,
    /// The server had not exited within the grace
    /// ([`StdioProxy::exit_grace`]) after its input was closed, and was
    /// killed.
    pub killed: bool,
}

/// A recording proxy in front of an MCP server started on stdio.
#[derive(Debug, Clone)]
pub struct StdioProxy {
    program: OsString,
    args: Vec<OsString>,
    secrets: Vec<Secret>,
    exit_grace: Duration,
    max_message: usize,
}

/// How long a server may take to exit after its input was closed, unless
/// [`StdioProxy::exit_grace`] says otherwise.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);

impl StdioProxy {
    /// A proxy in front of `program` started with `args`.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> StdioProxy {
        StdioProxy {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            secrets: Vec::new(),
            exit_grace: EXIT_GRACE,
            max_message: DEFAULT_MAX_BODY,
        }
    }

    /// The longest message (a line, its newline aside) the proxy holds in
    /// memory, either way ([`DEFAULT_MAX_BODY`] unless set). A longer line
    /// is passed through whole, as it comes, but not recorded (a warning
    /// says so), so a peer cannot make the proxy hold an unbounded line.
    pub fn max_message(mut self, bytes: usize) -> StdioProxy {
        self.max_message = bytes.max(1);
        self
    }

    /// How long the server may take to exit once the session is over
    /// (its standard input closed) before it is killed; [`EXIT_GRACE`]
    /// unless set.
    pub fn exit_grace(mut self, grace: Duration) -> StdioProxy {
        self.exit_grace = grace;
        self
    }

    /// A value scrubbed from every fact of the session (a token the
    /// server is given in its environment, say).
    pub fn secret(mut self, secret: Secret) -> StdioProxy {
        self.secrets.push(secret);
        self
    }

    /// The server's command line, as the run's `mcp.command` label has it.
    pub fn command_line(&self) -> String {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Starts the server and carries one client session between
    /// `client_in`/`client_out` and the server until the client closes
    /// `client_in` (then the server's stdin is closed and the server
    /// waited for), the server closes its stdout, or `stop` resolves (then
    /// the server is killed). Records into `recorder` when given; never
    /// fails because of recording. Fails only when the server cannot be
    /// started.
    pub async fn run<R, W>(
        self,
        recorder: Option<&Recorder>,
        client_in: R,
        client_out: W,
        stop: impl Future<Output = ()>,
    ) -> std::io::Result<ProxyOutcome>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the server's stdio is not piped"));
        };
        let run = match recorder {
            None => None,
            Some(recorder) => {
                let mut start = RunStart::new(format!("mcp-{:032x}", rand::random::<u128>()))
                    .label("mcp.transport", "stdio")
                    .label("mcp.command", self.command_line());
                for secret in &self.secrets {
                    start = start.secret(secret.clone());
                }
                match recorder.start_run(start).await {
                    Ok(run) => Some(run),
                    Err(e) => {
                        tracing::warn!("the MCP session is not recorded: {e}");
                        None
                    }
                }
            }
        };
        let run_id = run.as_ref().map(|r| r.id().to_owned());
        let router = Arc::new(Router::new(run.clone()).scrubbing(&self.secrets));
        let max = self.max_message;
        let mut up = tokio::spawn(pump(
            client_in,
            child_in,
            Dir::ClientToServer,
            router.clone(),
            max,
        ));
        let mut down = tokio::spawn(pump(
            child_out,
            client_out,
            Dir::ServerToClient,
            router.clone(),
            max,
        ));
        tokio::pin!(stop);
        // A pump's handle is awaited once: polling a finished JoinHandle
        // again panics (a server closing its stdout first did that).
        let mut down_done = false;
        let status = tokio::select! {
            // When both have ended by the time this looks, the client
            // hung up first: the session is complete.
            biased;
            // The client is done: the server's stdin is closed (the pump
            // dropped it).
            _ = &mut up => RunStatus::Completed,
            _ = &mut down => {
                down_done = true;
                // Aborting the pump drops (closes) the server's stdin.
                up.abort();
                RunStatus::Failed
            }
            _ = &mut stop => {
                up.abort();
                router.stop("reel: the proxy was stopped (Ctrl-C or SIGTERM) before the server answered");
                let _ = child.start_kill();
                RunStatus::Cancelled
            }
        };
        // Let the server finish writing and exit, within the grace; then
        // it is killed.
        let mut killed = false;
        let exit = match tokio::time::timeout(self.exit_grace, async {
            if !down_done {
                let _ = (&mut down).await;
                down_done = true;
            }
            child.wait().await
        })
        .await
        {
            Ok(exit) => exit.ok(),
            Err(_) => {
                killed = true;
                let _ = child.start_kill();
                let exit = child.wait().await.ok();
                if !down_done {
                    let _ = down.await;
                }
                exit
            }
        };
        router.close().await;
        if let Some(run) = run {
            if let Err(e) = run.end(status).await {
                tracing::warn!("the MCP session's run did not end cleanly: {e}");
            }
        }
        Ok(ProxyOutcome {
            run_id,
            status,
            exit,
            killed,
        })
    }
}

/// Copies `read` to `write` line by line: the router sees each line (a
/// parse and a few channel sends, no await) just before it is forwarded
/// and flushed unchanged, so a message is always linked before the other
/// side can answer it (a server's elicitation can come back before a
/// forward-then-parse proxy has seen the `tools/call` it belongs to: CI's
/// load showed it). A line longer than `max` is forwarded as it comes,
/// never held whole, and not recorded. Ends at end of input or when the
/// other side no longer takes lines; dropping `write` closes it.
async fn pump<R, W>(read: R, mut write: W, dir: Dir, router: Arc<Router>, max: usize)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut read = BufReader::new(read);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        let forwarded = match next_line(&mut read, &mut line, max).await {
            Ok(Piece::End) => break,
            Ok(Piece::Line) => {
                router.observe(dir, &line);
                async {
                    write.write_all(&line).await?;
                    write.flush().await
                }
                .await
            }
            Ok(Piece::Over) => {
                tracing::warn!(
                    "a message from the {} over {max} bytes was passed through unrecorded (--max-body)",
                    dir.source()
                );
                pass_rest(&mut read, &line, &mut write).await
            }
            Err(e) => {
                tracing::warn!("reading the {} failed: {e}", dir.source());
                break;
            }
        };
        if let Err(e) = forwarded {
            tracing::warn!("forwarding to the {} failed: {e}", dir.sink());
            break;
        }
    }
    if dir == Dir::ServerToClient {
        // A stopped proxy answers what the server never will.
        for line in router.farewells() {
            if write.write_all(&line).await.is_err() {
                break;
            }
        }
        let _ = write.flush().await;
    }
    let _ = write.shutdown().await;
}

/// What [`next_line`] read.
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    /// A whole line (the input's last may lack its newline).
    Line,
    /// The first bytes of a line longer than the limit (the rest is still
    /// to be read).
    Over,
    /// The end of the input, nothing read.
    End,
}

/// Reads one line into `line`, holding at most `max` bytes besides its
/// newline.
async fn next_line<R: AsyncBufRead + Unpin>(
    read: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Piece> {
    loop {
        let buf = read.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if line.is_empty() {
                Piece::End
            } else {
                Piece::Line
            });
        }
        let room = max - line.len();
        let (take, piece) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) if i <= room => (i + 1, Some(Piece::Line)),
            _ if buf.len() <= room => (buf.len(), None),
            _ => (room, Some(Piece::Over)),
        };
        line.extend_from_slice(&buf[..take]);
        read.consume(take);
        if let Some(piece) = piece {
            return Ok(piece);
        }
    }
}

/// Forwards `held`, then the rest of its line as it comes, through its
/// newline (or the end of the input).
async fn pass_rest<R, W>(read: &mut R, held: &[u8], write: &mut W) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    write.write_all(held).await?;
    loop {
        let buf = read.fill_buf().await?;
        if buf.is_empty() {
            break;
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        write.write_all(&buf[..take]).await?;
        read.consume(take);
        if done {
            break;
        }
    }
    write.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<(Piece, Vec<u8>)> {
        // A reader that hands out 3 bytes at a time: lines cross reads.
        let mut read = BufReader::with_capacity(3, input);
        let mut out = Vec::new();
        loop {
            let mut line = Vec::new();
            match next_line(&mut read, &mut line, max).await.unwrap() {
                Piece::End => return out,
                Piece::Over => {
                    let mut rest = Vec::new();
                    pass_rest(&mut read, &line, &mut rest).await.unwrap();
                    out.push((Piece::Over, rest));
                }
                Piece::Line => out.push((Piece::Line, line)),
            }
        }
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_passed_whole_and_the_next_is_read_again() {
        let got = lines(b"abc\nabcdefgh\nab\nabcd\nabcde", 4).await;
        assert_eq!(
            got,
            vec![
                (Piece::Line, b"abc\n".to_vec()),
                (Piece::Over, b"abcdefgh\n".to_vec()),
                (Piece::Line, b"ab\n".to_vec()),
                // At the limit, newline aside: held.
                (Piece::Line, b"abcd\n".to_vec()),
                // The last, without its newline, over the limit.
                (Piece::Over, b"abcde".to_vec()),
            ]
        );
        // Every byte forwarded, in order.
        let all: Vec<u8> = got.into_iter().flat_map(|(_, l)| l).collect();
        assert_eq!(all, b"abc\nabcdefgh\nab\nabcd\nabcde");
    }
}

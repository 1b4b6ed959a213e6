//! The `mcp-http` row's programs: the recording proxy over streamable HTTP
//! (`reel mcp record --listen ADDR --upstream URL`, the real `reel`
//! binary) against the same server directly, each driven over one
//! kept-alive connection, as an MCP client's HTTP library keeps one.
//!
//! - The server is [`crate::mcp::Plain`] (the stdio rows' server) served
//!   by rmcp's streamable HTTP service in a `reel-bench --mcp-http-server`
//!   process: stateless, answering each POST with `application/json`,
//!   `TCP_NODELAY` on every accepted socket.
//! - The client is plain HTTP/1.1 over one `TcpStream` (`TCP_NODELAY`, as
//!   hyper, reqwest and httpx set it): `initialize` once (untimed), then
//!   each `tools/call` of [`TOOL`] a POST on the same connection, timed
//!   from its first byte written until its answer is read whole, and
//!   checked (the echoed text).
//!
//! The proxy's kept-alive cost was 44 ms a request (issue 41: the
//! accepted socket without `TCP_NODELAY`, Nagle against delayed ACKs),
//! which a new connection per request never shows.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};

use crate::mcp::{Plain, TEXT_BYTES, TOOL};

/// `reel-bench --mcp-http-server`: serves [`Plain`] over streamable HTTP
/// at `127.0.0.1` on a free port, says `listening http://ADDR/mcp` on
/// standard output, and serves until its standard input closes.
pub fn server_main() -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let served = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let mut config = StreamableHttpServerConfig::default();
        config.legacy_session_mode = false;
        config.json_response = true;
        config.allowed_hosts.push(addr.ip().to_string());
        config.allowed_hosts.push(addr.to_string());
        let service = TowerToHyperService::new(StreamableHttpService::new(
            || Ok(Plain),
            Arc::new(LocalSessionManager::default()),
            config,
        ));
        println!("listening http://{addr}/mcp");
        io::stdout().flush()?;
        // Until the bench closes our standard input.
        let stdin_closed = tokio::task::spawn_blocking(|| {
            let _ = io::copy(&mut io::stdin(), &mut io::sink());
        });
        tokio::pin!(stdin_closed);
        loop {
            let (stream, _) = tokio::select! {
                accepted = listener.accept() => accepted?,
                _ = &mut stdin_closed => return Ok::<(), io::Error>(()),
            };
            stream.set_nodelay(true)?;
            let service = service.clone();
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    rt.shutdown_background();
    served
}

/// `reel-bench --mcp-http-relay URL`: the floor of any HTTP proxy, for
/// the row's bound: listens at `127.0.0.1` on a free port, says
/// `listening http://ADDR/PATH` on standard output, and relays each
/// accepted connection's requests over one upstream connection of its
/// own (hyper both ways, `TCP_NODELAY`, one thread as reel's proxy), no
/// parse, no line, no recording, until its standard input closes.
pub fn relay_main(upstream: &str) -> io::Result<()> {
    let rest = upstream
        .strip_prefix("http://")
        .ok_or_else(|| io::Error::other(format!("{upstream}: not an http:// URL")))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let authority = authority.to_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let relayed = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("listening http://{}/{path}", listener.local_addr()?);
        io::stdout().flush()?;
        let stdin_closed = tokio::task::spawn_blocking(|| {
            let _ = io::copy(&mut io::stdin(), &mut io::sink());
        });
        tokio::pin!(stdin_closed);
        loop {
            let (client, _) = tokio::select! {
                accepted = listener.accept() => accepted?,
                _ = &mut stdin_closed => return Ok::<(), io::Error>(()),
            };
            client.set_nodelay(true)?;
            let server = tokio::net::TcpStream::connect(&authority).await?;
            server.set_nodelay(true)?;
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(server))
                .await
                .map_err(io::Error::other)?;
            tokio::spawn(connection);
            let sender = Arc::new(tokio::sync::Mutex::new(sender));
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        let sender = sender.clone();
                        async move { sender.lock().await.send_request(request).await }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(client), service)
                    .await;
            });
        }
    });
    rt.shutdown_background();
    relayed
}

/// A child process of the row, killed on drop, with the URL it serves.
pub struct Served {
    child: Child,
    /// Its MCP endpoint, `http://ADDR/mcp`.
    pub url: String,
    /// What it said on standard error (the proxy's), read on a thread.
    said: Option<std::thread::JoinHandle<String>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(said) = self.said.take() {
            let _ = said.join();
        }
    }
}

/// Starts `bench --mcp-http-server`.
pub fn upstream(bench: &Path) -> io::Result<Served> {
    served(Command::new(bench).arg("--mcp-http-server"))
}

/// Starts `bench --mcp-http-relay UPSTREAM` (see [`relay_main`]).
pub fn relay(bench: &Path, upstream: &str) -> io::Result<Served> {
    served(Command::new(bench).args(["--mcp-http-relay", upstream]))
}

/// Starts `command`, which says `listening URL` first on standard output.
fn served(command: &mut Command) -> io::Result<Served> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut line = String::new();
    let stdout = child.stdout.take().expect("piped");
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line
        .trim()
        .strip_prefix("listening ")
        .map(str::to_owned)
        .ok_or_else(|| {
            io::Error::other(format!(
                "the HTTP server said {line:?}, not where it listens"
            ))
        })?;
    Ok(Served {
        child,
        url,
        said: None,
    })
}

/// Starts `reel --archive ARCHIVE mcp record --listen 127.0.0.1:0
/// --upstream UPSTREAM` and reads where it listens from its standard
/// error (the rest of which a thread drains).
pub fn proxy(reel: &Path, archive: &Path, upstream: &str) -> io::Result<Served> {
    let mut child = Command::new(reel)
        .arg("--archive")
        .arg(archive)
        .args([
            "mcp",
            "record",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            upstream,
        ])
        .env("REEL_CONFIG_DIR", archive.with_extension("config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
    let mut said = String::new();
    let url = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line)? == 0 {
            let _ = child.kill();
            return Err(io::Error::other(format!(
                "`reel mcp record --listen` ended before it listened: {said}"
            )));
        }
        said.push_str(&line);
        if line.starts_with("reel: recording MCP traffic") {
            let at = line.split(" at ").nth(1).unwrap_or_default();
            break at.split_whitespace().next().unwrap_or_default().to_owned();
        }
    };
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    Ok(Served {
        child,
        url,
        said: Some(drain),
    })
}

/// One kept-alive HTTP/1.1 connection to an MCP endpoint.
pub struct KeptAlive {
    stream: BufReader<TcpStream>,
    host: String,
    path: String,
    next_id: u64,
    text: String,
}

impl KeptAlive {
    /// Connects to `url` (`http://HOST:PORT/PATH`) and opens the session
    /// (`initialize`, then `notifications/initialized`).
    pub fn open(url: &str) -> io::Result<KeptAlive> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| io::Error::other(format!("{url}: not an http:// URL")))?;
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let stream = TcpStream::connect(host)?;
        stream.set_nodelay(true)?;
        let mut client = KeptAlive {
            stream: BufReader::new(stream),
            host: host.to_owned(),
            path: format!("/{path}"),
            next_id: 1,
            text: "x".repeat(TEXT_BYTES),
        };
        let init = client.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "reel-bench-http", "version": env!("CARGO_PKG_VERSION")}}),
        )?;
        if init.get("result").is_none() {
            return Err(io::Error::other(format!("initialize answered {init}")));
        }
        client.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(client)
    }

    /// A request; its response message.
    fn request(&mut self, method: &str, params: Value) -> io::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let answer =
            self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        match answer {
            Some(m) if m["id"] == id => Ok(m),
            other => Err(io::Error::other(format!(
                "{method} (id {id}) was answered {other:?}"
            ))),
        }
    }

    /// POSTs one message; the JSON message of the response body, if any
    /// (`202 Accepted` for a notification has none).
    fn post(&mut self, message: &Value) -> io::Result<Option<Value>> {
        let body = message.to_string();
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
             Content-Length: {}\r\n\r\n",
            self.path,
            self.host,
            body.len()
        );
        let stream = self.stream.get_mut();
        stream.write_all(format!("{head}{body}").as_bytes())?;
        let (status, body) = read_response(&mut self.stream)?;
        if !(200..300).contains(&status) {
            return Err(io::Error::other(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
        let text = String::from_utf8_lossy(&body);
        // application/json, or an event stream's `data:` lines.
        let json = text
            .lines()
            .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
            .find(|l| l.starts_with('{'));
        json.map(serde_json::from_str)
            .transpose()
            .map_err(|e| io::Error::other(format!("a response that is not JSON ({e}): {text}")))
    }

    /// One `tools/call` of [`TOOL`], its answer checked; how long it took.
    pub fn call(&mut self) -> io::Result<Duration> {
        let started = Instant::now();
        let text = self.text.clone();
        let answer = self.request(
            "tools/call",
            json!({"name": TOOL, "arguments": {"text": text}}),
        )?;
        let took = started.elapsed();
        if answer["result"]["content"][0]["text"] != json!(self.text) {
            return Err(io::Error::other(format!(
                "tools/call answered {answer}, not the text back"
            )));
        }
        Ok(took)
    }
}

/// An HTTP/1.1 response: its status and body (by `Content-Length`, or
/// chunked).
fn read_response(r: &mut impl BufRead) -> io::Result<(u16, Vec<u8>)> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("not an HTTP status line: {line:?}")))?;
    let (mut length, mut chunked) = (None, false);
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "content-length" {
                length = value.parse().ok();
            } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|e| io::Error::other(format!("a chunk size {line:?}: {e}")))?;
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            line.clear();
            r.read_line(&mut line)?;
            if size == 0 {
                break;
            }
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    }
    Ok((status, body))
}

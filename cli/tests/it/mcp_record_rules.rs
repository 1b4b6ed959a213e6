//! `reel mcp record` against peers that send what they should not, or what
//! the record must keep apart (issue 29): a bare JSON-RPC server on stdio
//! (tests/raw_mcp_server.py) and this test as the client, writing lines
//! itself. Each test says what it tries to break.

use crate::support::{self, reel_json, require_python, Killed};

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

const REEL: &str = env!("CARGO_BIN_EXE_reel");

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// `reel mcp record -- python3 tests/raw_mcp_server.py`, spoken to as
/// lines.
struct Proxied {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    archive: PathBuf,
}

impl Proxied {
    fn start(dir: &Path) -> Proxied {
        let archive = dir.join("archive");
        let mut child = Command::new(REEL)
            .arg("--archive")
            .arg(&archive)
            .args(["mcp", "record", "--", "python3"])
            .arg(tests_dir().join("raw_mcp_server.py"))
            .env("REEL_CONFIG_DIR", dir.join("config"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut proxied = Proxied {
            child,
            stdin,
            stdout,
            archive,
        };
        proxied.send(json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "rules-test", "version": "0"},
            },
        }));
        assert_eq!(proxied.next()["id"], 1);
        proxied.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        proxied
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn call(&mut self, id: u64, tool: &str, meta: Value) {
        self.send(json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {}, "_meta": meta},
        }));
    }

    /// The next line the client is sent.
    fn next(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.stdout.read_line(&mut line).unwrap() > 0,
            "the proxy closed stdout"
        );
        serde_json::from_str(&line).unwrap()
    }

    /// The client hangs up; the proxy's stderr; the run, as `reel show`
    /// gives it.
    fn finish(mut self) -> (String, Value) {
        drop(self.stdin.take());
        let out = self.child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{}: {stderr}", out.status);
        let shown = reel_json(&self.archive, &["show", "--last", "--json"]);
        (stderr, shown)
    }
}

fn facts<'a>(shown: &'a Value, kind: &str) -> Vec<&'a Value> {
    shown["facts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

/// The `call.started` facts of `tool`.
fn started<'a>(shown: &'a Value, tool: &str) -> Vec<&'a Value> {
    facts(shown, "call.started")
        .into_iter()
        .filter(|f| f["data"]["tool_name"] == tool)
        .collect()
}

/// The one call of `tool`: its id.
fn only_call(shown: &Value, tool: &str) -> String {
    let calls = started(shown, tool);
    assert_eq!(calls.len(), 1, "one call of {tool}: {calls:?}");
    calls[0]["call"].as_str().unwrap().to_owned()
}

fn of_call<'a>(shown: &'a Value, call: &str, kind: &str) -> Vec<&'a Value> {
    facts(shown, kind)
        .into_iter()
        .filter(|f| f["call"] == call)
        .collect()
}

fn outcome(shown: &Value, call: &str) -> Value {
    of_call(shown, call, "call.ended")[0]["data"]["outcome"].clone()
}

/// Tries to make a response sent out of turn count as an answer: the
/// client answers an elicitation (server id 0) before the server asked
/// anything, with a forged `accept`; the server answers call 3 with a
/// response to id 4 before the client sent id 4. Before the fix the forged
/// accept was the recorded `elicit.answered` and `FORGED` call 4's result.
/// Now each is recorded as what it is (a call `mcp:unmatched`, with the
/// message and where it came from), and the real answers are the answers.
#[test]
fn a_response_out_of_turn_is_recorded_unmatched_and_never_as_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Proxied::start(dir.path());
    let forged = json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {"name": "FORGED"}}});
    p.send(forged.clone());
    p.call(2, "ask", json!({}));
    let asked = p.next();
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["id"], 0);
    p.send(json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "decline"}}));
    let answered = p.next();
    assert_eq!(answered["id"], 2);
    assert!(answered["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("decline"));

    p.call(3, "forge_next", json!({}));
    let early = p.next();
    assert_eq!(early["id"], 4, "the server's response out of turn: {early}");
    assert_eq!(p.next()["id"], 3);
    p.call(4, "echo", json!({}));
    let genuine = p.next();
    assert_eq!(genuine["result"]["content"][0]["text"], "genuine 4");
    // Requests that are no calls are matched all the same: their
    // responses and progress are no unmatched messages.
    p.send(request(5, "ping", json!({})));
    assert_eq!(p.next()["id"], 5);
    p.send(request(
        6,
        "resources/read",
        json!({"uri": "file:///notes.txt", "_meta": {"progressToken": "r-6"}}),
    ));
    assert_eq!(p.next()["method"], "notifications/progress");
    assert_eq!(p.next()["id"], 6);
    let (stderr, shown) = p.finish();

    let ask = only_call(&shown, "ask");
    let answer = of_call(&shown, &ask, "elicit.answered");
    assert_eq!(answer.len(), 1);
    assert_eq!(
        answer[0]["data"]["outcome"],
        json!({"outcome": "decline"}),
        "the forged accept was taken as the answer"
    );
    let echo = only_call(&shown, "echo");
    assert_eq!(
        outcome(&shown, &echo)["result"]["content"][0]["text"],
        "genuine 4",
        "the response sent before the request was taken as its result"
    );

    let unmatched = started(&shown, "mcp:unmatched");
    let messages: Vec<(Value, Value)> = unmatched
        .iter()
        .map(|f| {
            (
                f["data"]["args"]["from"].clone(),
                f["data"]["args"]["message"].clone(),
            )
        })
        .collect();
    assert_eq!(
        messages,
        [
            (json!("client"), forged),
            (
                json!("server"),
                json!({"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "FORGED"}]}})
            ),
        ]
    );
    for f in &unmatched {
        let ended = outcome(&shown, f["call"].as_str().unwrap());
        assert_eq!(ended["status"], "error");
        assert!(
            ended["error"]
                .as_str()
                .unwrap()
                .contains("which no forwarded"),
            "{ended}"
        );
    }
    assert!(
        stderr.contains("recorded as an anomaly of the run (mcp:unmatched)"),
        "{stderr}"
    );
}

/// Tries to make a tool's own failure read as a success: a result with
/// `isError: true` was recorded `ok`, indistinguishable in `reel show`
/// from an answer. Now it is `error`, `tool error: ` with the whole result
/// (so the mock can still serve it), and a JSON-RPC error stays `json-rpc
/// error CODE: MESSAGE`, its error object kept whole beside it: both
/// failed, and told apart.
#[test]
fn a_tool_error_reads_as_an_error_apart_from_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Proxied::start(dir.path());
    p.call(2, "fail", json!({}));
    assert_eq!(p.next()["result"]["isError"], true);
    p.call(3, "broken", json!({}));
    assert_eq!(p.next()["error"]["code"], -32000);
    let archive = p.archive.clone();
    let (_, shown) = p.finish();

    let fail = outcome(&shown, &only_call(&shown, "fail"));
    assert_eq!(fail["status"], "error", "{fail}");
    // The message says it is the tool's error; the result is kept whole,
    // structured, as the client received it.
    assert_eq!(fail["error"], "tool error: the tool failed", "{fail}");
    assert_eq!(
        fail["result"],
        json!({"content": [{"type": "text", "text": "the tool failed"}],
               "structuredContent": {"why": "on purpose"}, "isError": true})
    );
    // The JSON-RPC error kept whole, its data redacted as any fact's
    // (a secret-named key), the value in no file of the archive.
    let broken = outcome(&shown, &only_call(&shown, "broken"));
    let key = broken["result"]["data"]["api_key"]
        .as_str()
        .unwrap_or_default();
    assert!(key.starts_with("[REDACTED"), "{broken}");
    assert_eq!(
        broken,
        json!({"status": "error", "error": "json-rpc error -32000: the server broke",
               "result": {"code": -32000, "message": "the server broke",
                          "data": {"api_key": key}}})
    );
    assert_absent(&archive, "sk-broken-4c1d9e7a2b6f8e3d");
    // The terminal view: both calls listed as errors.
    let out = Command::new(REEL)
        .arg("--archive")
        .arg(&archive)
        .args(["show", "--last"])
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for tool in ["fail", "broken"] {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>()[..]
                    .starts_with(&["c2", tool, "error"])
                    || l.split_whitespace().collect::<Vec<_>>()[..]
                        .starts_with(&["c3", tool, "error"])),
            "{tool} is not listed as an error:\n{text}"
        );
    }
}

/// Tries to make the record scrub what was really sent: rmcp's client puts
/// a numeric `_meta.progressToken` in a call's arguments, and the rule
/// `token` named it a secret, so each call's token joined the run's known
/// secrets and every later number like it was scrubbed ("genuine 3"
/// recorded as "genuine [REDACTED]", a client version "0.1.0" as
/// "[REDACTED].1.[REDACTED]"), the scrubber rebuilt at every call. A
/// progress token correlates notifications with a request; it is recorded
/// as sent, and so is everything after it.
#[test]
fn a_progress_token_is_recorded_as_sent_and_scrubs_nothing_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Proxied::start(dir.path());
    for (id, token) in [(2u64, 3u64), (3, 9)] {
        p.send(json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"_meta": {"progressToken": token}, "note": "v0.1.3"},
                       "_meta": {"progressToken": token}},
        }));
        assert_eq!(
            p.next()["result"]["content"][0]["text"],
            format!("genuine {id}")
        );
    }
    let (_, shown) = p.finish();
    let calls = started(&shown, "echo");
    assert_eq!(calls.len(), 2);
    let tokens: Vec<Value> = calls
        .iter()
        .map(|c| c["data"]["args"]["_meta"]["progressToken"].clone())
        .collect();
    assert_eq!(tokens, [json!(3), json!(9)]);
    for c in &calls {
        assert_eq!(c["data"]["args"]["note"], "v0.1.3");
    }
    let second = calls[1]["call"].as_str().unwrap();
    let result = &outcome(&shown, second)["result"];
    assert_eq!(result["content"][0]["text"], "genuine 3", "{result}");
    let text = shown.to_string();
    assert!(
        !text.contains("[REDACTED"),
        "nothing here is a secret: {text}"
    );
}

/// Tries to lose what the client was sent after it cancelled: the server
/// sends two progress notifications, the client cancels, the server (slow
/// to notice) sends four more and never answers. The client saw six; the
/// record kept two (the call ended at the cancellation). Now the call
/// files everything forwarded for it until the server answers or the
/// session ends, and still ends cancelled.
#[test]
fn progress_forwarded_after_a_cancellation_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Proxied::start(dir.path());
    p.call(2, "count", json!({"progressToken": "t-2"}));
    let mut seen = vec![p.next(), p.next()];
    p.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 2, "reason": "enough"}}),
    );
    for _ in 0..4 {
        seen.push(p.next());
    }
    let counts: Vec<Value> = seen
        .iter()
        .map(|m| m["params"]["progress"].clone())
        .collect();
    assert_eq!(counts, [1, 2, 3, 4, 5, 6]);
    let (_, shown) = p.finish();
    let count = only_call(&shown, "count");
    let recorded: Vec<Value> = of_call(&shown, &count, "progress")
        .iter()
        .map(|f| f["data"]["payload"]["progress"].clone())
        .collect();
    assert_eq!(recorded, counts, "every progress the client was sent");
    assert_eq!(of_call(&shown, &count, "cancel.requested").len(), 1);
    assert_eq!(outcome(&shown, &count)["status"], "aborted");
}

/// `kill -TERM PID`.
fn terminate(child: &Child) {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// `reel runs --json`'s runs.
fn runs(archive: &Path) -> Vec<Value> {
    reel_json(archive, &["runs", "--json"])["runs"]
        .as_array()
        .unwrap()
        .clone()
}

/// Tries to leave a run `incomplete` by stopping the proxy the way a
/// service manager does (SIGTERM, which killed it outright). It ends the
/// run as Ctrl-C does: `cancelled`, its calls filed.
#[test]
fn sigterm_ends_a_stdio_session_as_ctrl_c_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Proxied::start(dir.path());
    p.call(2, "echo", json!({}));
    assert_eq!(p.next()["result"]["content"][0]["text"], "genuine 2");
    terminate(&p.child);
    let out = p.child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("reel: recorded MCP session"),
        "{}: {stderr}",
        out.status
    );
    // 128 + SIGTERM, as a shell expects; the server reel stopped is not
    // reported as failing.
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(!stderr.contains("ended by a signal"), "{stderr}");
    let runs = runs(&p.archive);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["state"], "cancelled", "{runs:?}");
    let shown = reel_json(&p.archive, &["show", "--last", "--json"]);
    let echo = only_call(&shown, "echo");
    assert_eq!(outcome(&shown, &echo)["status"], "ok");
}

/// Tries to leave a client with a bare end of stream: the proxy is
/// stopped (SIGTERM, as Ctrl-C) while a call is in flight. The client is
/// answered for it with a JSON-RPC error that says why (before, its
/// stream just ended), and the call is recorded as cancelled (outcome
/// `aborted`) with that reason (before, an `error`: "the MCP session
/// ended before the server answered").
#[test]
fn a_stopped_proxy_answers_the_calls_in_flight_and_records_them_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Proxied::start(dir.path());
    p.call(2, "count", json!({"progressToken": "t-2"}));
    for _ in 0..2 {
        assert_eq!(p.next()["method"], "notifications/progress");
    }
    terminate(&p.child);
    let answer = p.next();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("the proxy was stopped"), "{message}");
    let out = p.child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    let shown = reel_json(&p.archive, &["show", "--last", "--json"]);
    let count = only_call(&shown, "count");
    let ended = outcome(&shown, &count);
    assert_eq!(ended["status"], "aborted", "{ended}");
    assert!(
        ended["reason"]
            .as_str()
            .unwrap_or("")
            .contains("the proxy was stopped"),
        "{ended}"
    );
}

/// The FastMCP server (tests/fastmcp_server.py) over streamable HTTP on a
/// free port: its guard against DNS rebinding is the SDK's default
/// (loopback `Host` names only). Its endpoint.
pub(crate) fn fastmcp_http() -> (Killed, String) {
    require_python();
    let port = crate::support::free_port();
    let mut server = Killed(
        Command::new("python3")
            .arg(tests_dir().join("fastmcp_server.py"))
            .args(["http", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    crate::support::wait_listening(port, &mut server, "the FastMCP HTTP server");
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// tests/raw_http_server.py on a free port, once it listens; its port.
fn raw_http_upstream() -> (Killed, u16) {
    raw_http_upstream_with(&[])
}

/// [`raw_http_upstream`] with `extra` arguments (a file it writes the
/// `Mcp-*` headers it got to).
pub(crate) fn raw_http_upstream_with(extra: &[&str]) -> (Killed, u16) {
    let port = crate::support::free_port();
    let mut server = Killed(
        Command::new("python3")
            .arg(tests_dir().join("raw_http_server.py"))
            .arg(port.to_string())
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    crate::support::wait_listening(port, &mut server, "tests/raw_http_server.py");
    (server, port)
}

/// `reel mcp record --listen 127.0.0.1:0 --upstream UPSTREAM EXTRA...`;
/// the address it listens at (`127.0.0.1:PORT`).
pub(crate) fn http_proxy(archive: &Path, upstream: &str, extra: &[&str]) -> (Killed, String) {
    let mut child = Killed(
        Command::new(REEL)
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
            .args(extra)
            .env("REEL_CONFIG_DIR", archive.with_file_name("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stderr = BufReader::new(child.0.stderr.take().unwrap());
    let (url, _) = support::proxy_url(&mut stderr);
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    // The rest of its stderr is drained, so it never blocks.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, addr)
}

/// One `POST /mcp` of `body` to `addr`, naming `host` (and `origin`);
/// the status and the response text up to its first JSON-RPC message (an
/// SSE stream may stay open after it), or its whole body.
fn post(addr: &str, host: &str, origin: Option<&str>, body: &Value) -> (u16, String) {
    let origin = origin
        .map(|o| format!("Origin: {o}\r\n"))
        .unwrap_or_default();
    post_with(addr, host, &origin, body)
}

/// [`post`] with `headers` (whole lines, each ending in CRLF) added.
fn post_with(addr: &str, host: &str, headers: &str, body: &Value) -> (u16, String) {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let body = body.to_string();
    let origin = headers;
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        response.push_str(&String::from_utf8_lossy(&buf[..n]));
        let Some((head, rest)) = response.split_once("\r\n\r\n") else {
            continue;
        };
        let length = head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        });
        let done = match length {
            Some(n) => rest.len() >= n,
            None => rest.contains("\"jsonrpc\"") && rest.contains("}\n\n"),
        };
        if done {
            break;
        }
    }
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {response:?}"));
    (status, response)
}

fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "rules-test", "version": "0"},
        },
    })
}

/// Tries DNS rebinding through the proxy: a request naming a host the
/// proxy does not answer for (in `Host`, or a page's `Origin`) reached the
/// upstream, the proxy even rewriting `Host` to the upstream's so that the
/// upstream's own guard passed it. Now the proxy refuses it (403, saying
/// why and what to do), answers loopback names on any port, more with
/// `--allow-host`, and forwards `Host` as sent: a name allowed at the
/// proxy is still checked by the upstream (FastMCP answers 421).
#[test]
fn the_http_proxy_refuses_foreign_hosts_and_origins_and_forwards_host_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, upstream) = fastmcp_http();
    let archive = dir.path().join("archive");
    let (_proxy, addr) = http_proxy(&archive, &upstream, &["--allow-host", "rebind.test"]);
    let port = addr.rsplit(':').next().unwrap();

    let (status, text) = post(&addr, &format!("evil.test:{port}"), None, &initialize());
    assert_eq!(status, 403, "{text}");
    assert!(
        text.contains("refused the Host \"evil.test:") && text.contains("--allow-host NAME"),
        "{text}"
    );
    let (status, text) = post(&addr, &addr, Some("http://evil.test"), &initialize());
    assert_eq!(status, 403, "{text}");
    assert!(
        text.contains("refused the Origin \"http://evil.test\""),
        "{text}"
    );

    for host in [addr.clone(), format!("localhost:{port}")] {
        let (status, text) = post(&addr, &host, Some(&format!("http://{host}")), &initialize());
        assert_eq!(status, 200, "{host}: {text}");
        assert!(text.contains("serverInfo"), "{text}");
    }
    // Allowed at the proxy, refused by the upstream's own guard: the Host
    // went through unchanged.
    let (status, text) = post(&addr, &format!("rebind.test:{port}"), None, &initialize());
    assert_eq!(status, 421, "{text}");
    assert!(text.contains("Invalid Host header"), "{text}");
}

/// Tries to leave the HTTP proxy's open session `incomplete` with SIGTERM
/// (it killed the proxy outright). It ends it as Ctrl-C does: the open
/// session's run `cancelled`, nothing incomplete.
#[test]
fn sigterm_ends_the_http_proxy_as_ctrl_c_does() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, upstream) = fastmcp_http();
    let archive = dir.path().join("archive");
    let (mut proxy, addr) = http_proxy(&archive, &upstream, &[]);
    let (status, text) = post(&addr, &addr, None, &initialize());
    assert_eq!(status, 200, "{text}");
    terminate(&proxy.0);
    let exit = proxy.0.wait().unwrap();
    assert!(exit.success(), "{exit}");
    let runs = runs(&archive);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["state"], "cancelled", "{runs:?}");
    let shown = reel_json(&archive, &["show", "--last", "--json"]);
    let init = only_call(&shown, "mcp:initialize");
    assert_eq!(outcome(&shown, &init)["status"], "ok");
}

/// A child speaking newline-delimited JSON-RPC on its stdio.
struct Lines {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Lines {
    fn spawn(mut command: Command) -> Lines {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Lines {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends a request; its response (anything before it is skipped).
    fn ask(&mut self, request: Value) -> Value {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "closed");
            let m: Value = serde_json::from_str(&line).unwrap();
            if request.get("id").is_none() || m.get("id") == request.get("id") {
                return m;
            }
        }
    }

    fn tell(&mut self, notification: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{notification}").unwrap();
        stdin.flush().unwrap();
    }

    fn close(mut self) {
        drop(self.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Tries to make the mock serve something else than was recorded: it
/// answered through rmcp's typed models, which dropped what this version
/// does not know (`capabilities.tasks`, a tool's `execution`, any member
/// it has no field for), and `resources/list`/`prompts/list` with `[]`
/// whatever the record held. Now every recorded answer goes out field for
/// field.
#[test]
fn the_mock_serves_what_was_recorded_field_for_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Proxied::start(dir.path());
    let mut seen = Vec::new();
    for (id, method, params) in [
        (2, "tools/list", json!({})),
        (3, "resources/list", json!({})),
        (4, "prompts/list", json!({})),
        (5, "tools/call", json!({"name": "echo", "arguments": {}})),
        (6, "tools/call", json!({"name": "fail", "arguments": {}})),
    ] {
        p.send(request(id, method, params));
        seen.push(p.next()["result"].clone());
    }
    assert_eq!(seen[0]["tools"][1]["execution"]["taskSupport"], "optional");
    let archive = p.archive.clone();
    let (_, shown) = p.finish();
    let run = shown["run"]["run_id"].as_str().unwrap().to_owned();
    let init_recorded = outcome(&shown, &only_call(&shown, "mcp:initialize"))["result"].clone();
    assert!(init_recorded["capabilities"]["tasks"].is_object());

    let mut mock = Command::new(REEL);
    mock.arg("--archive")
        .arg(&archive)
        .args(["mcp", "mock", &run])
        .env("REEL_CONFIG_DIR", dir.path().join("config"));
    let mut mock = Lines::spawn(mock);
    let init = mock.ask(request(
        1,
        "initialize",
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "rules-test", "version": "0"},
        }),
    ));
    assert_eq!(init["result"], init_recorded, "initialize as recorded");
    mock.tell(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut served = Vec::new();
    for (id, method, params) in [
        (2, "tools/list", json!({})),
        (3, "resources/list", json!({})),
        (4, "prompts/list", json!({})),
        (5, "tools/call", json!({"name": "echo", "arguments": {}})),
        (6, "tools/call", json!({"name": "fail", "arguments": {}})),
    ] {
        let answer = mock.ask(request(id, method, params));
        served.push(answer["result"].clone());
    }
    mock.close();
    for (method, (got, recorded)) in [
        "tools/list",
        "resources/list",
        "prompts/list",
        "echo",
        "fail",
    ]
    .iter()
    .zip(served.iter().zip(&seen))
    {
        assert_eq!(got, recorded, "{method} as recorded");
    }
}

/// Tries to make `verify` replay a recorded elicitation answer other than
/// it was: the client answered the server's question with a JSON-RPC
/// error, which `verify` sent back as `cancel` (the server then answered
/// otherwise than recorded: a false divergence). Now it answers with that
/// error, and the unchanged server verifies.
#[test]
fn verify_replays_an_elicitation_answered_with_an_error_as_that_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Proxied::start(dir.path());
    p.call(2, "ask", json!({}));
    let asked = p.next();
    assert_eq!(asked["method"], "elicitation/create");
    p.send(json!({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32603, "message": "no UI here"}}));
    let answered = p.next();
    assert_eq!(
        answered["result"]["content"][0]["text"],
        "{\"code\": -32603, \"message\": \"no UI here\"}"
    );
    let archive = p.archive.clone();
    let (_, shown) = p.finish();
    let ask = only_call(&shown, "ask");
    assert_eq!(
        of_call(&shown, &ask, "elicit.answered")[0]["data"]["outcome"],
        json!({"outcome": "error", "message": "json-rpc error -32603: no UI here"})
    );
    let run = shown["run"]["run_id"].as_str().unwrap();
    let out = Command::new(REEL)
        .arg("--archive")
        .arg(&archive)
        .args(["mcp", "verify", run, "--", "python3"])
        .arg(tests_dir().join("raw_mcp_server.py"))
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("matched"), "{stdout}");
}

/// Without a session (2026-07-28), what tells clients apart is how each
/// names itself in every request's `_meta` (`clientInfo`, name and
/// version). Tries to file two clients' calls in one run (every
/// sessionless exchange went into the proxy's one run): each client now
/// has its own, labelled `mcp.client`.
#[test]
fn sessionless_clients_are_recorded_in_runs_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = raw_http_upstream();
    let archive = dir.path().join("archive");
    let upstream = format!("http://127.0.0.1:{port}/mcp");
    let (mut proxy, addr) = http_proxy(&archive, &upstream, &[]);
    let call = |id: u64, name: &str, tool: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1.0"},
            },
        }})
    };
    // Both number their requests from 1.
    for (id, name, tool) in [(1, "alpha", "a1"), (1, "beta", "b1"), (2, "alpha", "a2")] {
        let (status, text) = post(&addr, &addr, None, &call(id, name, tool));
        assert_eq!(status, 200, "{text}");
        assert!(text.contains(&format!("hello {name}")), "{text}");
    }
    // Ctrl-C (SIGINT) stops it.
    let sent = Command::new("kill")
        .args(["-INT", &proxy.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    assert!(proxy.0.wait().unwrap().success());
    let mut clients: Vec<(String, Vec<String>)> = runs(&archive)
        .iter()
        .map(|run| {
            let shown = reel_json(
                &archive,
                &["show", run["run_id"].as_str().unwrap(), "--json"],
            );
            assert_eq!(shown["run"]["state"], "completed");
            let tools = facts(&shown, "call.started")
                .iter()
                .map(|f| f["data"]["tool_name"].as_str().unwrap().to_owned())
                .collect();
            (
                shown["run"]["labels"]["mcp.client"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                tools,
            )
        })
        .collect();
    clients.sort();
    assert_eq!(
        clients,
        [
            (
                "alpha 1.0".to_owned(),
                vec!["a1".to_owned(), "a2".to_owned()]
            ),
            ("beta 1.0".to_owned(), vec!["b1".to_owned()]),
        ]
    );
}

/// Tries to use the listener off loopback as an open door: `--listen
/// 0.0.0.0:0` without a token is refused at start (exit 64, saying why and
/// what to do); with `--token-file`, a request without `Reel-Token` is
/// refused (403, never 401, which would start a client's OAuth flow), and
/// one with it goes through.
#[test]
fn off_loopback_the_proxy_needs_a_token_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let open = Command::new(REEL)
        .arg("--archive")
        .arg(&archive)
        .args([
            "mcp",
            "record",
            "--listen",
            "0.0.0.0:0",
            "--upstream",
            "http://127.0.0.1:9/mcp",
        ])
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&open.stderr);
    assert_eq!(open.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("without a token") && stderr.contains("--token-file"),
        "{stderr}"
    );
    let short = dir.path().join("short");
    std::fs::write(&short, "tiny\n").unwrap();
    let weak = Command::new(REEL)
        .arg("--archive")
        .arg(&archive)
        .args([
            "mcp",
            "record",
            "--listen",
            "0.0.0.0:0",
            "--upstream",
            "http://127.0.0.1:9/mcp",
        ])
        .arg("--token-file")
        .arg(&short)
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&weak.stderr);
    assert_eq!(weak.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("at least 16") && !stderr.contains("tiny"),
        "{stderr}"
    );

    let (_upstream, url) = fastmcp_http();
    let token = "tok-3f9a0c1d2e4b5a6978";
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# the proxy's\n{token}\n")).unwrap();
    let (_proxy, addr) = http_proxy(&archive, &url, &["--token-file", tokens.to_str().unwrap()]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }});
    let (status, text) = post(&addr, &addr, None, &init);
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("Reel-Token"), "{text}");
    let (status, text) = post_with(&addr, &addr, "Reel-Token: not-the-token-at-all\r\n", &init);
    assert_eq!(status, 403, "{text}");
    let (status, text) = post_with(&addr, &addr, &format!("Reel-Token: {token}\r\n"), &init);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("protocolVersion"), "{text}");
}

/// Tries to make two agent runs one: a client without a session sends a
/// call, goes quiet, and sends another. With `--idle-close 0.5` its first
/// run is ended `completed` while the proxy still runs (it stayed
/// `running` until the proxy stopped), and the second call is a run of
/// its own.
#[test]
fn a_sessionless_client_idle_past_the_bound_gets_a_new_run() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = raw_http_upstream();
    let archive = dir.path().join("archive");
    let upstream = format!("http://127.0.0.1:{port}/mcp");
    let (mut proxy, addr) = http_proxy(&archive, &upstream, &["--idle-close", "0.5"]);
    let call = |id: u64, tool: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "alpha", "version": "1.0"},
            },
        }})
    };
    let (status, text) = post(&addr, &addr, None, &call(1, "a1"));
    assert_eq!(status, 200, "{text}");
    // The first run ends on its own once the client has been idle.
    let mut first_ended = false;
    for _ in 0..400 {
        let listed = runs(&archive);
        if listed.len() == 1 && listed[0]["state"] == "completed" {
            first_ended = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(first_ended, "{:?}", runs(&archive));
    let (status, text) = post(&addr, &addr, None, &call(2, "a2"));
    assert_eq!(status, 200, "{text}");
    terminate(&proxy.0);
    assert!(proxy.0.wait().unwrap().success());
    let mut tools: Vec<Vec<String>> = runs(&archive)
        .iter()
        .map(|run| {
            let shown = reel_json(
                &archive,
                &["show", run["run_id"].as_str().unwrap(), "--json"],
            );
            assert_eq!(shown["run"]["state"], "completed");
            facts(&shown, "call.started")
                .iter()
                .map(|f| f["data"]["tool_name"].as_str().unwrap().to_owned())
                .collect()
        })
        .collect();
    tools.sort();
    assert_eq!(tools, [vec!["a1".to_owned()], vec!["a2".to_owned()]]);
}

/// Tries to reorder what one client sends: a GET stream opened before a
/// POST must reach the server first (the server sends a session's
/// requests on the open stream). The proxy served its connections
/// concurrently and forwarded through a pooled client, which sends on
/// whichever upstream connection is ready first; now each request takes
/// its place in line where it enters the proxy (a connection's first at
/// its accept) and keeps it until its first bytes are in the upstream's
/// socket. The upstream here notes the order requests arrive on the wire;
/// ten GET-then-POST pairs, sent back to back. (A race: the previous
/// binary failed it in two of three runs here, not every time.)
#[test]
fn the_http_proxy_forwards_requests_in_the_order_it_got_them() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let port = crate::support::free_port();
    let mut server = Killed(
        Command::new("python3")
            .arg(tests_dir().join("order_http_server.py"))
            .arg(port.to_string())
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let probe = loop {
        if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            break s;
        }
        assert!(server.0.try_wait().unwrap().is_none(), "the server exited");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // The probe's connection is read by the server as a request: close it
    // empty (it notes nothing for it).
    drop(probe);
    let archive = dir.path().join("archive");
    let (_proxy, addr) = http_proxy(&archive, &format!("http://127.0.0.1:{port}/mcp"), &[]);
    let mut streams = Vec::new();
    for i in 0..10 {
        let mut get = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            get,
            "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: s-1\r\n\r\n"
        )
        .unwrap();
        // No wait for the GET's answer: the POST follows at once.
        let (status, text) = post(&addr, &addr, None, &request(i + 2, "ping", json!({})));
        assert_eq!(status, 200, "{text}");
        streams.push(get);
    }
    let (_, text) = post(&addr, &addr, None, &request(99, "order", json!({})));
    let body = &text[text.find("{\"jsonrpc\"").expect("a JSON answer")..];
    let answer: Value = serde_json::from_str(body.trim()).unwrap();
    let expected: Vec<&str> = (0..10).flat_map(|_| ["GET", "POST"]).collect();
    assert_eq!(answer["result"]["order"], json!(expected));
    for mut s in streams {
        let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(1)));
        let _ = s.read(&mut [0; 64]);
    }
}

/// No file under `dir` holds `secret`.
fn assert_absent(dir: &Path, secret: &str) {
    let mut stack = vec![dir.to_path_buf()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            files += 1;
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret} is in {}",
                path.display()
            );
        }
    }
    assert!(files > 0, "the archive has no files");
}

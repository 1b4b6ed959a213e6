//! `reel mcp mock --listen`: a recorded session served over MCP
//! streamable HTTP to the official Python `mcp` client, sessions as the
//! record had them; and the streamable HTTP rules the proxy and the mock
//! both keep (batches refused, SEP-2243 headers checked against the
//! body), tried by a raw HTTP peer.

use std::io::{BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::mcp_cassette::{dirs, mock_report, record_mock_session};
use crate::mcp_record_rules::{fastmcp_http, http_proxy, raw_http_upstream_with};
use crate::support::{self, reel_json, require_python, Killed};

const REEL: &str = env!("CARGO_BIN_EXE_reel");

fn tests_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// `reel mcp mock SESSION --listen 127.0.0.1:0` on `archive`.
pub(crate) struct Mock {
    child: Killed,
    pub(crate) url: String,
    pub(crate) addr: String,
    /// What it said up to where it listens.
    said: String,
    rest: std::thread::JoinHandle<String>,
}

impl Mock {
    pub(crate) fn start(archive: &Path, session: &str) -> Mock {
        Mock::start_with(archive, session, &[])
    }

    /// [`Mock::start`] with `extra` arguments.
    fn start_with(archive: &Path, session: &str, extra: &[&str]) -> Mock {
        let mut child = Killed(
            Command::new(REEL)
                .arg("--archive")
                .arg(archive)
                .args(["mcp", "mock", session, "--listen", "127.0.0.1:0"])
                .args(extra)
                .env("REEL_CONFIG_DIR", archive.with_file_name("config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut stderr = BufReader::new(child.0.stderr.take().unwrap());
        let (url, said) = support::proxy_url(&mut stderr);
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            rest
        });
        Mock {
            child,
            url,
            addr,
            said,
            rest,
        }
    }

    /// Interrupts it (SIGINT); asserts it exited 0; what it said after.
    pub(crate) fn stop(mut self) -> String {
        interrupt(&mut self.child);
        self.rest.join().unwrap()
    }

    /// [`Mock::stop`] for a mock a client missed: it exits 1, saying so.
    pub(crate) fn stop_missed(mut self) -> String {
        let status = interrupted(&mut self.child);
        let said = self.rest.join().unwrap();
        assert_eq!(status.code(), Some(1), "{said}");
        assert!(said.contains("matched no recorded call"), "{said}");
        said
    }
}

fn interrupt(child: &mut Killed) {
    let status = interrupted(child);
    assert!(status.success(), "exited {status}");
}

/// Sends SIGINT to `child` and waits for it.
fn interrupted(child: &mut Killed) -> std::process::ExitStatus {
    let sent = Command::new("kill")
        .args(["-INT", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    child.0.wait().unwrap()
}

/// One request to `addr`'s `/mcp`, with `headers` (whole lines, CRLF
/// each): the status, the head (lower-cased names) and the body up to its
/// first JSON-RPC message (an SSE stream may stay open), or whole.
pub(crate) fn raw(
    addr: &str,
    method: &str,
    headers: &str,
    body: Option<&Value>,
) -> (u16, String, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).unwrap_or(0);
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
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let head = head.to_ascii_lowercase();
    let body = if head.contains("transfer-encoding: chunked") {
        dechunked(body)
    } else {
        body.to_owned()
    };
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {response:?}"));
    (status, head, body)
}

/// A chunked body's content (as far as it came).
fn dechunked(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            out.push_str(&rest[..n.min(rest.len())]);
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The JSON-RPC message of a response body (JSON, or the first SSE
/// event's data).
pub(crate) fn message(body: &str) -> Value {
    let json = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(body);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"))
}

/// The Python client of mcp_mock_client.py against `url`, in `mode`.
fn mock_client(url: &str, mode: &str) -> Value {
    let out = Command::new("python3")
        .arg(tests_dir().join("mcp_mock_client.py"))
        .arg(url)
        .env("MCP_MODE", mode)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The Python client of mcp_proxy_client.py (the `fastmcp` scenario)
/// against `url`, in `mode`.
fn fastmcp_client(url: &str, mode: &str) -> Value {
    let out = Command::new("python3")
        .env("MCP_MODE", mode)
        .arg(tests_dir().join("mcp_proxy_client.py"))
        .args(["fastmcp", "not-a-secret-here", url])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client failed ({}):\n{}\n{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the client's report is not JSON ({e}): {stdout}"))
}

/// `report` with its notifications of `count` as two lists, progress and
/// log messages, each in the order it came. Over HTTP the Python client
/// once saw a log message ahead of the progress recorded before it; which
/// side reorders the two kinds is not settled yet, so only each kind's
/// own order is held here.
fn by_kind(report: &Value) -> Value {
    let mut report = report.clone();
    let seen = report["count_notifications"].take();
    let of = |method: &str| -> Vec<Value> {
        seen.as_array()
            .into_iter()
            .flatten()
            .filter(|n| n["method"] == method)
            .cloned()
            .collect()
    };
    report["count_notifications"] = json!({
        "progress": of("notifications/progress"),
        "log": of("notifications/message"),
    });
    report
}

/// The mock over HTTP answers the Python client exactly as over stdio, in
/// both protocol versions: recorded results, progress and log messages,
/// the recorded question asked (2025-11-25) or an input-required round
/// (2026-07-28), identical calls in recorded order, and every miss a
/// JSON-RPC error naming the closest call. A session recorded with
/// `initialize` keeps its session ids.
#[test]
fn the_http_mock_answers_the_python_client_as_the_stdio_mock_does() {
    require_python();
    let d = dirs();
    record_mock_session(&d);
    let tape = d.tape.to_str().unwrap();
    for mode in ["legacy", "2026-07-28"] {
        let (stdio, _) = mock_report(&d, mode);
        let report = d.archive.with_file_name(format!("report-{mode}.json"));
        let extra = ["--report", report.to_str().unwrap(), "--json"];
        let mock = Mock::start_with(&d.archive, tape, &extra);
        assert!(!mock.said.contains("sessionless"), "{}", mock.said);
        let http = mock_client(&mock.url, mode);
        assert_eq!(
            by_kind(&http),
            by_kind(&stdio),
            "{mode}: over HTTP as over stdio"
        );
        assert_eq!(http["changed"]["code"], -32602, "{http}");
        let said = mock.stop_missed();
        assert!(
            said.contains("reel: mock: the record has no call of `"),
            "{said}"
        );
        // What it did, written when it stopped.
        let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(
            report["tools_discovered"],
            json!(["add", "confirm", "count", "next"])
        );
        assert_eq!(report["tools_uncovered"], json!([]), "{report}");
        assert_eq!(report["calls_missed"], 3, "{report}");
        assert_eq!(report["requests_refused"], 0, "{report}");
        if mode == "legacy" {
            assert_eq!(report["calls_served"], 5, "{report}");
        }
    }
    let mock = Mock::start(&d.archive, tape);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, head, body) = raw(&mock.addr, "POST", "", Some(&init));
    assert_eq!(status, 200, "{head}{body}");
    assert!(head.contains("\r\nmcp-session-id: "), "{head}");
    assert_eq!(
        message(&body)["result"]["serverInfo"]["name"],
        "recorded-server"
    );
    mock.stop();
}

/// FastMCP's sessions recorded through `reel mcp record --listen`, one of
/// each protocol version, served back by `reel mcp mock RUN --listen`:
/// the Python client gets what it got from the live server. The 2026-07-28
/// run is served sessionless: no `Mcp-Session-Id`, and `GET` and `DELETE`
/// answered `405` (`Allow: POST`), as that version says of a server with
/// no stream and no session.
#[test]
fn recorded_http_sessions_are_served_back_over_http_by_their_protocol_version() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let (_server, upstream) = fastmcp_http();
    let direct = [
        fastmcp_client(&upstream, "legacy"),
        fastmcp_client(&upstream, "2026-07-28"),
    ];
    let (mut proxy, addr) = http_proxy(&archive, &upstream, &[]);
    let proxied = format!("http://{addr}/mcp");
    for (mode, direct) in ["legacy", "2026-07-28"].into_iter().zip(&direct) {
        assert_eq!(&fastmcp_client(&proxied, mode), direct, "{mode} proxied");
    }
    interrupt(&mut proxy);

    let runs = reel_json(&archive, &["runs", "--json"]);
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    for run in runs {
        let id = run["run_id"].as_str().unwrap();
        let shown = reel_json(&archive, &["show", id, "--json"]);
        let session = shown["run"]["labels"]["mcp.session"].is_string();
        let (mode, direct) = if session {
            ("legacy", &direct[0])
        } else {
            ("2026-07-28", &direct[1])
        };
        let mock = Mock::start(&archive, id);
        assert_eq!(mock.said.contains("sessionless"), !session, "{}", mock.said);
        let served = fastmcp_client(&mock.url, mode);
        for key in [
            "protocol",
            "tools",
            "count",
            "count_progress",
            "shout",
            "echo",
            "fail",
        ] {
            assert_eq!(served[key], direct[key], "{mode}: {key}");
        }
        // (`cancel`: the recorded call was aborted; the mock answers it
        // right after its progress, before or after the client cancels.)
        assert_eq!(served["after_cancel"], direct["after_cancel"], "{mode}");
        if session {
            assert_eq!(served["confirm"], direct["confirm"], "{mode}");
            // The questions as asked (rmcp adds the call's `progressToken`
            // to the `_meta` of a request it sends within the call).
            let asked = |report: &Value| {
                let mut questions = report["questions"].clone();
                for q in questions.as_array_mut().unwrap() {
                    q.as_object_mut().unwrap().remove("_meta");
                }
                questions
            };
            assert_eq!(asked(&served), asked(direct), "{mode}");
        } else {
            sessionless_rules(&mock.addr);
        }
        mock.stop();
    }
}

/// A sessionless mock: a POST is answered without a session id; GET and
/// DELETE are 405 with `Allow: POST`.
fn sessionless_rules(addr: &str) {
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let version = "MCP-Protocol-Version: 2026-07-28\r\n";
    let named = format!("{version}Mcp-Method: tools/list\r\n");
    let (status, head, body) = raw(addr, "POST", &named, Some(&list));
    assert_eq!(status, 200, "{head}{body}");
    assert!(!head.contains("mcp-session-id"), "{head}");
    assert!(message(&body)["result"]["tools"].is_array(), "{body}");
    for method in ["GET", "DELETE"] {
        let (status, head, _) = raw(addr, method, version, None);
        assert_eq!(status, 405, "{method}: {head}");
        assert!(head.contains("\r\nallow: post"), "{method}: {head}");
    }
}

/// A raw peer's batch and mismatched SEP-2243 headers, at the proxy and
/// at the mock: each refused with 400 and a JSON-RPC error (`-32600` for
/// the batch, `-32020` for the headers, the request's id echoed), never
/// forwarded nor served; the proxy records each as a call `mcp:refused`
/// ending with that error. A request whose headers agree goes through
/// with its `Mcp-Param-*` headers, whose values the record never keeps
/// (the body's copy of the argument is redacted as arguments are). The
/// mock of that run says it serves a redacted value.
#[test]
fn batches_and_headers_that_disagree_with_the_body_are_refused_and_recorded_so() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let forwarded = dir.path().join("forwarded.jsonl");
    let (_server, port) = raw_http_upstream_with(&[forwarded.to_str().unwrap()]);
    let (mut proxy, addr) = http_proxy(&archive, &format!("http://127.0.0.1:{port}/mcp"), &[]);
    let key = "sk-live-7d1e4c0b9a2f8e6d5c4b3a29";
    let call = |id: u64, tool: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": args, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}}}})
    };
    let refusals = refused_at(&addr, &call);
    let good = format!(
        "Mcp-Method: tools/call\r\nMcp-Name: greet\r\nMcp-Param-Api-Key: {key}\r\n\
         Mcp-Param-Region: eu\r\n"
    );
    let greet = call(5, "greet", json!({"api_key": key, "region": "eu"}));
    let (status, _, body) = raw(&addr, "POST", &good, Some(&greet));
    assert_eq!(status, 200, "{body}");
    assert_eq!(message(&body)["result"]["content"][0]["text"], "hello raw");
    interrupt(&mut proxy);

    // Only the request that agreed reached the upstream, its headers whole.
    let seen: Vec<Value> = std::fs::read_to_string(&forwarded)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["mcp-param-api-key"], key);
    assert_eq!(seen[0]["mcp-name"], "greet");

    let runs = reel_json(&archive, &["runs", "--json"]);
    let id = runs["runs"][0]["run_id"].as_str().unwrap().to_owned();
    let shown = reel_json(&archive, &["show", &id, "--json"]);
    let ended: Vec<(String, String)> = shown["facts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "call.ended")
        .map(|f| {
            let call = f["call"].as_str().unwrap_or_default();
            let tool = shown["facts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["kind"] == "call.started" && s["call"] == call)
                .map(|s| s["data"]["tool_name"].as_str().unwrap().to_owned())
                .unwrap_or_default();
            let error = f["data"]["outcome"]["error"].as_str().unwrap_or_default();
            (tool, error.to_owned())
        })
        .collect();
    let refused: Vec<&(String, String)> =
        ended.iter().filter(|(t, _)| t == "mcp:refused").collect();
    assert_eq!(refused.len(), refusals.len(), "{ended:?}");
    for ((_, error), code) in refused.iter().zip(&refusals) {
        assert!(
            error.starts_with(&format!("json-rpc error {code}: ")),
            "{error}"
        );
    }
    assert!(
        ended.iter().any(|(t, e)| t == "greet" && e.is_empty()),
        "{ended:?}"
    );
    let text = shown.to_string();
    assert!(!text.contains(key), "the key is in the record: {text}");
    for file in support::files_under(&archive) {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
            "the key is in {}",
            file.display()
        );
    }

    // Mocked, the run says it serves a redacted value, and the miss of the
    // real key says why and how to match it anyway.
    let mock = Mock::start(&archive, &id);
    assert!(
        mock.said
            .contains("1 recorded call holds redacted values ([REDACTED])")
            && mock.said.contains("`greet`"),
        "{}",
        mock.said
    );
    let named = "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: greet\r\n";
    let (status, _, body) = raw(&mock.addr, "POST", named, Some(&greet));
    assert_eq!(status, 200, "{body}");
    let miss = message(&body);
    assert_eq!(miss["error"]["code"], -32602, "{body}");
    let why = miss["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("the recorded value was redacted")
            && why.contains("--ignore call.started:/args/api_key"),
        "{why}"
    );
    mock.stop_missed();

    // The mock keeps the same rules, and a refused call answers nothing.
    let d = dirs();
    record_mock_session(&d);
    let report = d.archive.with_file_name("report.txt");
    let extra = ["--report", report.to_str().unwrap()];
    let mock = Mock::start_with(&d.archive, d.tape.to_str().unwrap(), &extra);
    refused_at(&mock.addr, &call);
    // (rmcp asks a 2026-07-28 request for its version in a header too.)
    let named = "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: add\r\n";
    let add = call(6, "add", json!({"a": 2, "b": 3}));
    let (status, _, body) = raw(&mock.addr, "POST", named, Some(&add));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        message(&body)["result"]["structuredContent"],
        json!({"result": 5})
    );
    mock.stop();
    let report = std::fs::read_to_string(&report).unwrap();
    assert!(
        report.contains("calls served: 1\n") && report.contains("requests refused: 4\n"),
        "{report}"
    );
}

/// Sends the refused requests to `addr`: a batch, then `tools/call`s of
/// `add` {a: 2, b: 3} with a wrong `Mcp-Method`, a wrong `Mcp-Name`, a
/// wrong Base64 `Mcp-Name`; asserts each answer; their error codes.
fn refused_at(addr: &str, call: &impl Fn(u64, &str, Value) -> Value) -> Vec<i64> {
    let add = |id| call(id, "add", json!({"a": 2, "b": 3}));
    let batch = json!([add(1), add(2)]);
    let (status, _, body) = raw(addr, "POST", "", Some(&batch));
    assert_eq!(status, 400, "{body}");
    let refused = message(&body);
    assert_eq!(refused["error"]["code"], -32600, "{body}");
    assert_eq!(refused["id"], Value::Null, "{body}");
    let mut codes = vec![-32600];
    for (id, headers) in [
        (3, "Mcp-Method: tools/list\r\n"),
        (4, "Mcp-Method: tools/call\r\nMcp-Name: sub\r\n"),
        (7, "Mcp-Name: =?base64?c3Vi?=\r\n"),
    ] {
        let (status, _, body) = raw(addr, "POST", headers, Some(&add(id)));
        assert_eq!(status, 400, "{headers}: {body}");
        let refused = message(&body);
        assert_eq!(refused["error"]["code"], -32020, "{body}");
        assert_eq!(refused["id"], id, "{body}");
        codes.push(-32020);
    }
    codes
}

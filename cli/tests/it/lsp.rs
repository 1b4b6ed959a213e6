//! The tape language server (`reel lsp`), spoken to as an editor would:
//! real `Content-Length` framing through `tower_lsp_server::Server` over an
//! in-process pipe, and the built `reel lsp` binary over stdio.
//!
//! Snapshots live in the workspace's `snapshots/` (`it__lsp__*.snap`).

use std::collections::HashMap;
use std::io::{BufRead as _, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reel::tape::Tape;

use reel_archive::TapeExt;
use reel_lsp::document::Document;
use reel_lsp::position::Encoding;
use reel_lsp::{self as lsp, Probe};
use reel_recorder::{Recorder, RecorderConfig};
use reel_viewer::render::text::duration;
use reel_viewer::timeline::Timeline;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, DuplexStream, WriteHalf};
use tokio::sync::mpsc;
use tower_lsp_server::ls_types::{Position, Range, Uri};

const TIMEOUT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------
// An editor, in process
// ---------------------------------------------------------------------------

/// A client speaking to the server through real framing over a pipe.
struct Lsp {
    out: WriteHalf<DuplexStream>,
    inbox: mpsc::UnboundedReceiver<Value>,
    backlog: Vec<Value>,
    next_id: i64,
    probe: Probe,
    server: tokio::task::JoinHandle<()>,
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

async fn read_frames(input: impl AsyncRead + Unpin, tx: mpsc::UnboundedSender<Value>) {
    let mut r = tokio::io::BufReader::new(input);
    loop {
        let mut len = None;
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    len = value.trim().parse::<usize>().ok();
                }
            }
        }
        let Some(len) = len else { return };
        let mut body = vec![0; len];
        if r.read_exact(&mut body).await.is_err() {
            return;
        }
        let Ok(msg) = serde_json::from_slice(&body) else {
            return;
        };
        if tx.send(msg).is_err() {
            return;
        }
    }
}

impl Lsp {
    /// Starts a server, initializes it with `capabilities` and says
    /// `initialized`. Returns the initialize result too.
    async fn start_with(capabilities: Value) -> (Lsp, Value) {
        let (service, socket) = lsp::service();
        let probe = service.inner().probe();
        let (client_end, server_end) = tokio::io::duplex(1 << 16);
        let (server_in, server_out) = tokio::io::split(server_end);
        let server = tokio::spawn(lsp::serve_service(service, socket, server_in, server_out));
        let (client_in, client_out) = tokio::io::split(client_end);
        let (tx, inbox) = mpsc::unbounded_channel();
        tokio::spawn(read_frames(client_in, tx));
        let mut lsp = Lsp {
            out: client_out,
            inbox,
            backlog: Vec::new(),
            next_id: 1,
            probe,
            server,
        };
        let init = lsp
            .result(
                "initialize",
                json!({ "processId": null, "rootUri": null, "capabilities": capabilities }),
            )
            .await;
        lsp.notify("initialized", json!({})).await;
        (lsp, init)
    }

    async fn start() -> Lsp {
        Lsp::start_with(json!({})).await.0
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.out.write_all(bytes).await.unwrap();
        self.out.flush().await.unwrap();
    }

    async fn send(&mut self, msg: Value) {
        self.send_raw(&frame(msg.to_string().as_bytes())).await;
    }

    async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }))
            .await;
    }

    async fn next_message(&mut self) -> Value {
        tokio::time::timeout(TIMEOUT, self.inbox.recv())
            .await
            .expect("the server answers in time")
            .expect("the server is still there")
    }

    /// The whole response to a request.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        loop {
            let msg = self.next_message().await;
            if msg.get("method").is_none() && msg["id"] == json!(id) {
                return msg;
            }
            self.backlog.push(msg);
        }
    }

    /// The result of a request (which must not fail).
    async fn result(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params).await;
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// The diagnostics published for `uri` at `version` (older ones are
    /// skipped).
    async fn diagnostics(&mut self, uri: &str, version: Option<i64>) -> Value {
        let wanted = |m: &Value| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && version.is_none_or(|v| m["params"]["version"] == json!(v))
        };
        if let Some(i) = self.backlog.iter().position(wanted) {
            let m = self.backlog.remove(i);
            return m["params"]["diagnostics"].clone();
        }
        loop {
            let m = self.next_message().await;
            if wanted(&m) {
                return m["params"]["diagnostics"].clone();
            }
            self.backlog.push(m);
        }
    }

    async fn open(&mut self, uri: &str, text: &str) -> Value {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "reel-tape", "version": 1, "text": text } }),
        )
        .await;
        self.diagnostics(uri, Some(1)).await
    }

    async fn change(&mut self, uri: &str, version: i64, changes: Value) -> Value {
        self.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": changes }),
        )
        .await;
        self.diagnostics(uri, Some(version)).await
    }

    async fn at(&mut self, method: &str, uri: &str, line: u32, character: u32) -> Value {
        self.result(
            method,
            json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character } }),
        )
        .await
    }

    async fn symbols(&mut self, uri: &str) -> Value {
        self.result(
            "textDocument/documentSymbol",
            json!({ "textDocument": { "uri": uri } }),
        )
        .await
    }

    async fn folding(&mut self, uri: &str) -> Value {
        self.result(
            "textDocument/foldingRange",
            json!({ "textDocument": { "uri": uri } }),
        )
        .await
    }

    /// shutdown, exit, and the server returns.
    async fn stop(mut self) {
        let r = self.result("shutdown", Value::Null).await;
        assert_eq!(r, Value::Null);
        self.notify("exit", Value::Null).await;
        tokio::time::timeout(TIMEOUT, self.server)
            .await
            .expect("the server returns after exit")
            .expect("the server did not panic");
    }
}

fn tapes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tapes")
}

fn tape(name: &str) -> String {
    std::fs::read_to_string(tapes_dir().join(name)).unwrap()
}

/// The facts of a committed tape (its lines after the header).
fn tape_facts(name: &str) -> Vec<reel::Fact> {
    Tape::read(tape(name).as_bytes()).unwrap().facts
}

/// How long call `call` of `facts` took, as the viewer writes it.
fn took(facts: &[reel::Fact], call: &str) -> String {
    let ns = facts
        .iter()
        .find_map(|f| match &f.kind {
            reel::FactKind::CallEnded(e) if f.call.as_deref() == Some(call) => Some(e.duration_ns),
            _ => None,
        })
        .unwrap();
    duration(ns)
}

/// The offset of fact `seq`, and of the `call.started` of its call.
fn offsets(facts: &[reel::Fact], seq: u64) -> (u64, u64) {
    let fact = &facts[seq as usize];
    let started = facts
        .iter()
        .find(|f| matches!(f.kind, reel::FactKind::CallStarted(_)) && f.call == fact.call)
        .unwrap();
    (fact.offset, started.offset)
}

/// The hop id (`hop-` and 4 hex digits) on line `line` of `text`: the
/// demo draws them at random, so a regenerated tape has others.
fn hop_on(text: &str, line: usize) -> String {
    let l = text.lines().nth(line).unwrap();
    let at = l.find("hop-").unwrap();
    l[at..at + 8].to_owned()
}

fn uri(name: &str) -> String {
    format!("file:///reel-lsp-test/{name}")
}

fn snapshot(name: &str, value: &Value) {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots"));
    s.set_prepend_module_to_snapshot(true);
    s.bind(|| insta::assert_json_snapshot!(name, value));
}

/// The position of the first `needle` on `line` (0-based), in UTF-16.
fn pos_of(text: &str, line: usize, needle: &str) -> (u32, u32) {
    let l = text.split('\n').nth(line).unwrap();
    let byte = l
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not on line {line}"));
    (line as u32, l[..byte].encode_utf16().count() as u32)
}

/// The symbols' (name, range start line, range end line), flattened with
/// their depth.
fn outline(symbols: &Value) -> Vec<String> {
    fn walk(s: &Value, depth: usize, out: &mut Vec<String>) {
        for sym in s.as_array().into_iter().flatten() {
            out.push(format!(
                "{}{} [{}..{}] {}",
                "  ".repeat(depth),
                sym["name"].as_str().unwrap(),
                sym["range"]["start"]["line"],
                sym["range"]["end"]["line"],
                sym["detail"].as_str().unwrap_or("")
            ));
            walk(&sym["children"], depth + 1, out);
        }
    }
    let mut out = Vec::new();
    walk(symbols, 0, &mut out);
    out
}

fn count_symbols(symbols: &Value) -> usize {
    symbols
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| 1 + count_symbols(&s["children"]))
        .sum()
}

fn hover_text(hover: &Value) -> String {
    hover["contents"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

// ---------------------------------------------------------------------------
// The service, in process
// ---------------------------------------------------------------------------

#[tokio::test]
async fn initialize_announces_what_the_server_does() {
    let (lsp, init) = Lsp::start_with(json!({})).await;
    let mut shown = init.clone();
    shown["serverInfo"]["version"] = json!("[version]");
    snapshot("initialize", &shown);
    assert_eq!(init["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(init["capabilities"]["positionEncoding"], "utf-16");
    assert_eq!(init["capabilities"]["textDocumentSync"]["change"], 2);
    lsp.stop().await;
}

#[tokio::test]
async fn outline_nests_calls_by_dispatch() {
    let mut lsp = Lsp::start().await;
    let u = uri("demo-search.tape.jsonl");
    let diags = lsp.open(&u, &tape("demo-search.tape.jsonl")).await;
    assert_eq!(diags, json!([]), "a clean tape has no diagnostics");
    let symbols = lsp.symbols(&u).await;
    snapshot("outline_search", &symbols);
    let lines = outline(&symbols);
    let facts = tape_facts("demo-search.tape.jsonl");
    let run_took = duration(Timeline::build(&facts).duration_ns());
    assert_eq!(
        lines[0],
        format!("run demo-search [0..26] completed · 24 facts · 3 calls · {run_took}")
    );
    // c2 and c3 were dispatched by c1: nested under it, with their facts.
    let (c1, c2, c3) = (took(&facts, "c1"), took(&facts, "c2"), took(&facts, "c3"));
    assert!(
        lines.contains(&format!("  c1 search [2..23] ok in {c1}")),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&format!("    c2 fetch [4..9] ok in {c2}")),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&format!("      #8 call.ended [9..9] ok in {c2}")),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&format!("    c3 fetch [12..17] ok in {c3}")),
        "{lines:#?}"
    );
    lsp.stop().await;
}

#[tokio::test]
async fn hovers_tell_what_a_fact_is() {
    let mut lsp = Lsp::start().await;
    let u = uri("demo-search.tape.jsonl");
    let text = tape("demo-search.tape.jsonl");
    lsp.open(&u, &text).await;
    let mut hovers = serde_json::Map::new();
    for (line, what) in [
        (0, "header"),
        (2, "call.started c1"),
        (4, "call.started c2 (child)"),
        (5, "progress with a message"),
        (8, "progress without a message"),
        (9, "call.ended c2"),
        (10, "artifact.get"),
        (20, "progress of c1 (no message)"),
        (24, "run.ended"),
        (25, "artifact line"),
    ] {
        let h = lsp.at("textDocument/hover", &u, line, 3).await;
        hovers.insert(format!("{line:02} {what}"), h);
    }
    let progress = hover_text(&hovers["05 progress with a message"]);
    assert!(
        progress.starts_with("**progress** #4 · call `c2` · tool `fetch` · dispatched by `c1`"),
        "{progress}"
    );
    let facts = tape_facts("demo-search.tape.jsonl");
    let (at, call_at) = offsets(&facts, 4);
    assert!(
        progress.contains(&format!(
            "+{} from the run's start (+{} into the call)",
            duration(at),
            duration(at - call_at)
        )),
        "{progress}"
    );
    assert!(
        progress.contains("Shown as: Fetching https://docs.example/search?q=sled block layout"),
        "{progress}"
    );
    let generic = hover_text(&hovers["08 progress without a message"]);
    assert!(
        generic.contains("Shown as: \\`fetch\\` reported progress (2 so far)…"),
        "{generic}"
    );
    let started = hover_text(&hovers["02 call.started c1"]);
    assert!(
        started.contains("**Tool spec** `search` · Search the sources"),
        "{started}"
    );
    assert!(
        started.contains("Mode async · read-only, idempotent, open world"),
        "{started}"
    );
    let child = hover_text(&hovers["04 call.started c2 (child)"]);
    assert!(
        child.contains("**Tool spec** `fetch` · Fetch a page"),
        "{child}"
    );
    let ended = hover_text(&hovers["09 call.ended c2"]);
    assert!(
        ended.contains(&format!(
            "The call took {} and ended ok",
            took(&facts, "c2")
        )),
        "{ended}"
    );
    snapshot("hovers_search", &Value::Object(hovers));

    // Past the last line, past the end of a line: empty answers.
    assert_eq!(lsp.at("textDocument/hover", &u, 27, 0).await, Value::Null);
    assert_eq!(
        lsp.at("textDocument/hover", &u, 9_999, 0).await,
        Value::Null
    );
    let len = text.lines().nth(5).unwrap().encode_utf16().count() as u32;
    assert_ne!(lsp.at("textDocument/hover", &u, 5, len).await, Value::Null);
    assert_eq!(
        lsp.at("textDocument/hover", &u, 5, len + 1).await,
        Value::Null
    );
    lsp.stop().await;
}

/// The spec a tool declared shows where its call starts: title, the
/// description, annotations, mode, needs and the input's members.
#[tokio::test]
async fn hover_on_a_call_started_line_shows_the_tool_spec() {
    let mut lsp = Lsp::start().await;
    let u = uri("demo-deploy.tape.jsonl");
    let text = tape("demo-deploy.tape.jsonl");
    lsp.open(&u, &text).await;
    let line = text
        .lines()
        .position(|l| l.contains(r#""kind":"call.started""#))
        .unwrap() as u32;
    let h = hover_text(&lsp.at("textDocument/hover", &u, line, 3).await);
    for part in [
        "**Tool spec** `deploy` · Deploy a service",
        "Plans a deployment of one service to one environment, asks the user to confirm it, and applies it.",
        "Mode async · not read-only, destructive, not idempotent, open world · needs `github`",
        "Input: `service`, `env` (required: `service`, `env`)",
        "· invocation `inv-",
    ] {
        assert!(h.contains(part), "{part:?} is not in the hover:\n{h}");
    }
    // A tool without a spec says so.
    let u = uri("demo-walk-cancelled.tape.jsonl");
    let text = tape("demo-walk-cancelled.tape.jsonl");
    lsp.open(&u, &text).await;
    let h = hover_text(&lsp.at("textDocument/hover", &u, 2, 3).await);
    assert!(h.contains("No tool spec"), "{h}");
    lsp.stop().await;
}

#[tokio::test]
async fn hover_names_what_was_redacted() {
    let mut lsp = Lsp::start().await;
    let u = uri("demo-audit-degraded.tape.jsonl");
    lsp.open(&u, &tape("demo-audit-degraded.tape.jsonl")).await;
    let h = hover_text(&lsp.at("textDocument/hover", &u, 7, 0).await);
    assert!(
        h.contains("Redacted when recorded (the secret was never stored), shown as `[REDACTED]`: `/data/password`"),
        "{h}"
    );
    assert!(h.contains(r#""password": "[REDACTED]""#), "{h}");
    snapshot("hover_redacted", &json!(h));
    lsp.stop().await;
}

#[tokio::test]
async fn definitions_lead_to_where_things_come_from() {
    let mut lsp = Lsp::start().await;
    let u = uri("demo-search.tape.jsonl");
    let text = tape("demo-search.tape.jsonl");
    lsp.open(&u, &text).await;
    let mut targets = serde_json::Map::new();
    for line in 0..text.lines().count() as u32 {
        let d = lsp.at("textDocument/definition", &u, line, 0).await;
        if !d.is_null() {
            assert_eq!(d["uri"], u);
            targets.insert(format!("{line:02}"), d["range"]["start"]["line"].clone());
        }
    }
    snapshot("definitions_search", &Value::Object(targets.clone()));
    // artifact.get (line 10) -> the artifact.put of c2 (line 7)
    assert_eq!(targets["10"], 7);
    // artifact.get (line 18) -> the artifact.put of c3 (line 15)
    assert_eq!(targets["18"], 15);
    // call.ended of c2 (line 9) -> its call.started (line 4)
    assert_eq!(targets["09"], 4);
    // c2's call.started (line 4) -> c1's call.started (line 2), the dispatcher
    assert_eq!(targets["04"], 2);
    // a log of c1 (line 3) -> c1's call.started
    assert_eq!(targets["03"], 2);
    // run.ended -> run.started
    assert_eq!(targets["24"], 1);
    // A top-level call.started has no definition.
    assert!(!targets.contains_key("02"));
    lsp.stop().await;
}

#[tokio::test]
async fn folding_ranges_span_calls() {
    let mut lsp = Lsp::start().await;
    let u = uri("demo-search.tape.jsonl");
    lsp.open(&u, &tape("demo-search.tape.jsonl")).await;
    let folding = lsp.folding(&u).await;
    snapshot("folding_search", &folding);
    let spans: Vec<(u64, u64)> = folding
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["startLine"].as_u64().unwrap(),
                f["endLine"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(spans, [(2, 23), (4, 9), (12, 17)]);
    lsp.stop().await;
}

#[tokio::test]
async fn diagnostics_follow_edits() {
    let mut lsp = Lsp::start().await;
    let u = uri("demo-walk-cancelled.tape.jsonl");
    let text = tape("demo-walk-cancelled.tape.jsonl");
    let mut steps = serde_json::Map::new();
    steps.insert("1 opened".into(), lsp.open(&u, &text).await);

    // Break line 5 (a progress fact) by deleting its opening brace.
    let d = lsp
        .change(&u, 2, json!([{ "range": { "start": { "line": 4, "character": 0 }, "end": { "line": 4, "character": 1 } }, "text": "" }]))
        .await;
    assert_eq!(d.as_array().unwrap().len(), 3, "{d:#}");
    steps.insert("2 progress line broken".into(), d);

    // Mend it, then delete the call.ended line (line 11): the call never
    // ended, the cancellation after the end is no longer after the end.
    lsp.change(&u, 3, json!([{ "range": { "start": { "line": 4, "character": 0 }, "end": { "line": 4, "character": 0 } }, "text": "{" }]))
        .await;
    let d = lsp
        .change(&u, 4, json!([{ "range": { "start": { "line": 11, "character": 0 }, "end": { "line": 12, "character": 0 } }, "text": "" }]))
        .await;
    steps.insert("3 call.ended deleted".into(), d);

    // Undo by typing it back, in two halves (the first half is invalid).
    let ended = text.lines().nth(11).unwrap();
    let (a, b) = ended.split_at(40);
    let d = lsp
        .change(&u, 5, json!([{ "range": { "start": { "line": 11, "character": 0 }, "end": { "line": 11, "character": 0 } }, "text": format!("{a}\n") }]))
        .await;
    steps.insert("4 half typed".into(), d);
    let d = lsp
        .change(&u, 6, json!([{ "range": { "start": { "line": 11, "character": 40 }, "end": { "line": 11, "character": 40 } }, "text": b }]))
        .await;
    steps.insert("5 typed back".into(), d.clone());
    assert_eq!(d, steps["1 opened"]);
    assert_eq!(lsp.probe.text(&u.parse::<Uri>().unwrap()).unwrap(), text);
    snapshot("diagnostics_after_edits", &Value::Object(steps));
    lsp.stop().await;
}

/// A tape with one of each anomaly, written by hand.
fn anomalous_tape() -> String {
    let header = tape("demo-walk-cancelled.tape.jsonl")
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let fact = |seq: u64, call: Option<&str>, kind: &str, data: Value| {
        json!({ "seq": seq, "at": 1_796_014_069_000_000_000i64 + seq as i64, "offset": seq * 1000, "call": call, "kind": kind, "data": data })
            .to_string()
    };
    let started = |id: &str, parent: Option<&str>| json!({ "call_id": id, "tool_name": "walk", "parent_call": parent, "mode": "async", "args": null });
    let ended = json!({ "outcome": { "status": "ok", "result": null }, "duration_ns": 1000 });
    [
        header,
        fact(0, None, "run.started", json!({ "run_id": "anomalies", "producer": { "name": "hand", "version": "1" }, "teardown_scopes": ["call"] })),
        fact(1, Some("c1"), "call.started", started("c1", None)),
        fact(2, Some("c1"), "teardown.registered", json!({ "scope": "call", "key_hash": "sha256:k", "first": true })),
        fact(3, Some("c1"), "credential.failed", json!({ "need": "github", "mode": "pulled", "reason": "expired" })),
        fact(4, Some("c1"), "call.ended", ended.clone()),
        fact(5, Some("c1"), "progress", json!({ "payload": { "message": "late" }, "count": 1 })),
        // seq 6 and 7 are missing
        fact(8, Some("c2"), "call.started", started("c2", Some("c1"))),
        fact(9, Some("c2"), "progress", json!({ "payload": 1, "count": 1 })),
        fact(10, Some("c9"), "log", json!({ "level": "info", "data": "who?", "delivered": false })),
        fact(10, None, "run.ended", json!({ "status": "completed" })),
        String::new(),
    ]
    .join("\n")
}

#[tokio::test]
async fn anomalies_stand_at_their_lines() {
    let mut lsp = Lsp::start().await;
    let u = uri("anomalies.tape.jsonl");
    let d = lsp.open(&u, &anomalous_tape()).await;
    snapshot("diagnostics_anomalies", &d);
    let at: Vec<(u64, String)> = d
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["range"]["start"]["line"].as_u64().unwrap(),
                d["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for want in [
        (10, "seq-order"),
        (4, "credential_failed"),
        (6, "progress_after_end"),
        (7, "gap"),
        (9, "unknown_call"),
        (7, "unended_call"),
        (3, "teardown_never_ran"),
    ] {
        assert!(
            at.contains(&(want.0, want.1.to_owned())),
            "{want:?} not in {at:?}"
        );
    }
    lsp.stop().await;
}

/// `fetch`, changed: it now says "Downloading" first.
async fn fetch_v2(
    ctx: reel::context::ToolContext,
    url: String,
) -> Result<Value, reel::context::ToolError> {
    ctx.progress(json!({ "message": format!("Downloading {url}") }));
    reel_demo::fetch(ctx, url).await
}

#[tokio::test]
async fn divergences_of_a_real_replay_report() {
    use reel_replayer::{replay, Recording, ReplayOptions};
    let dir = tempfile::tempdir().unwrap();
    let tape_path = dir.path().join("demo-search.tape.jsonl");
    std::fs::copy(tapes_dir().join("demo-search.tape.jsonl"), &tape_path).unwrap();
    let recording = Recording::from_tape_file(&tape_path).unwrap();
    let tools = reel::tools::Tools::new()
        .register("search", reel_demo::search)
        .register("fetch", fetch_v2);
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(!report.is_match());
    let report_path = lsp::report::report_path(&tape_path);
    std::fs::write(&report_path, serde_json::to_string_pretty(&report).unwrap()).unwrap();

    let mut lsp = Lsp::start().await;
    let u = Uri::from_file_path(&tape_path).unwrap().to_string();
    let d = lsp.open(&u, &tape("demo-search.tape.jsonl")).await;
    snapshot("diagnostics_replay_divergences", &d);
    let diverged: Vec<(u64, &str)> = d
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["source"] == "reel replay")
        .map(|d| {
            (
                d["range"]["start"]["line"].as_u64().unwrap(),
                d["code"].as_str().unwrap(),
            )
        })
        .collect();
    // Every divergence of the report, each at its seq's line.
    let divergences: Vec<_> = report
        .calls
        .iter()
        .filter_map(|c| c.divergence.as_ref())
        .collect();
    assert!(!divergences.is_empty());
    assert_eq!(diverged.len(), divergences.len(), "{d:#}");
    for dv in divergences {
        let kind = serde_json::to_value(dv.kind).unwrap();
        if let Some(seq) = dv.seq {
            assert!(
                diverged.contains(&(seq + 1, kind.as_str().unwrap())),
                "{dv:?} at line {} in {diverged:?}",
                seq + 1
            );
        }
    }

    // A report about another run is named, not shown.
    let mut other: Value = serde_json::to_value(&report).unwrap();
    other["run_id"] = json!("another-run");
    std::fs::write(&report_path, other.to_string()).unwrap();
    lsp.notify(
        "textDocument/didSave",
        json!({ "textDocument": { "uri": u } }),
    )
    .await;
    let d = lsp.diagnostics(&u, None).await;
    assert_eq!(d.as_array().unwrap().len(), 1, "{d:#}");
    assert_eq!(d[0]["code"], "report-other-run");

    // A broken report is named too.
    std::fs::write(&report_path, "{ not json").unwrap();
    lsp.notify(
        "textDocument/didSave",
        json!({ "textDocument": { "uri": u } }),
    )
    .await;
    let d = lsp.diagnostics(&u, None).await;
    assert_eq!(d[0]["code"], "report-unreadable", "{d:#}");

    // Removed: nothing.
    std::fs::remove_file(&report_path).unwrap();
    lsp.notify(
        "textDocument/didSave",
        json!({ "textDocument": { "uri": u } }),
    )
    .await;
    assert_eq!(lsp.diagnostics(&u, None).await, json!([]));
    lsp.stop().await;
}

#[tokio::test]
async fn garbage_on_the_wire_is_dropped_and_serving_goes_on() {
    let mut lsp = Lsp::start().await;
    let u = uri("demo-deploy-failed.tape.jsonl");
    lsp.open(&u, &tape("demo-deploy-failed.tape.jsonl")).await;
    let lone_surrogate = json!({ "jsonrpc": "2.0", "method": "textDocument/didOpen", "params": { "textDocument": { "uri": uri("x"), "languageId": "reel-tape", "version": 1, "text": "@" } } })
        .to_string()
        .replace('@', "\\ud800");
    for garbage in [
        frame(b"{ this is not json"),
        frame(b"{}"),
        frame(b"[1, 2]"),
        frame(b""),
        frame(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"\xff\xfe\"}"),
        frame(lone_surrogate.as_bytes()),
        b"garbage without a header\r\n\r\n".to_vec(),
    ] {
        lsp.send_raw(&garbage).await;
    }
    // A lower-case header is read too.
    let body = json!({ "jsonrpc": "2.0", "id": 99, "method": "textDocument/documentSymbol", "params": { "textDocument": { "uri": u } } }).to_string();
    lsp.send_raw(format!("content-length: {}\r\n\r\n{body}", body.len()).as_bytes())
        .await;
    let answer = lsp.next_message().await;
    assert_eq!(answer["id"], 99, "{answer}");
    assert_eq!(outline(&lsp.symbols(&u).await).len(), 8);
    assert!(lsp.probe.text(&uri("x").parse::<Uri>().unwrap()).is_none());
    lsp.stop().await;
}

#[tokio::test]
async fn closing_clears_and_forgets() {
    let mut lsp = Lsp::start().await;
    let u = uri("demo-deploy-failed.tape.jsonl");
    let d = lsp.open(&u, &tape("demo-deploy-failed.tape.jsonl")).await;
    assert_eq!(d[0]["code"], "credential_failed", "{d:#}");
    lsp.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": u } }),
    )
    .await;
    assert_eq!(lsp.diagnostics(&u, None).await, json!([]));
    assert_eq!(lsp.symbols(&u).await, Value::Null);
    assert_eq!(lsp.at("textDocument/hover", &u, 1, 0).await, Value::Null);
    assert!(lsp.probe.text(&u.parse::<Uri>().unwrap()).is_none());
    lsp.stop().await;
}

// ---------------------------------------------------------------------------
// Positions
// ---------------------------------------------------------------------------

/// The walk tape, with an emoji (two UTF-16 units, four bytes) before the
/// em dash (one unit, three bytes) of hop 2.
fn emoji_tape() -> String {
    tape("demo-walk-cancelled.tape.jsonl").replace("Hop 2 of 12 —", "Hop 2 😀 of 12 —")
}

#[tokio::test]
async fn utf16_positions_count_surrogate_pairs() {
    let mut lsp = Lsp::start().await;
    let u = uri("emoji.tape.jsonl");
    let text = emoji_tape();
    lsp.open(&u, &text).await;
    let (line, of) = pos_of(&text, 6, "of 12");
    let (_, emoji) = pos_of(&text, 6, "😀");
    // Inside the surrogate pair: no position, no answer.
    assert_eq!(
        lsp.at("textDocument/hover", &u, line, emoji + 1).await,
        Value::Null
    );
    assert_ne!(
        lsp.at("textDocument/hover", &u, line, emoji + 2).await,
        Value::Null
    );
    assert_eq!(
        lsp.at("textDocument/definition", &u, line, emoji + 1).await,
        Value::Null
    );

    // Replace "of" (after the emoji) by "out of", by UTF-16 positions.
    lsp.change(&u, 2, json!([{ "range": { "start": { "line": line, "character": of }, "end": { "line": line, "character": of + 2 } }, "text": "out of" }]))
        .await;
    let want = text.replace("Hop 2 😀 of 12", "Hop 2 😀 out of 12");
    assert_eq!(lsp.probe.text(&u.parse::<Uri>().unwrap()).unwrap(), want);
    let h = hover_text(&lsp.at("textDocument/hover", &u, line, 0).await);
    let hop = hop_on(&text, 6);
    assert!(
        h.contains(&format!("Shown as: Hop 2 😀 out of 12 — {hop}")),
        "{h}"
    );

    // A parse error after the emoji: its column is counted in UTF-16.
    let (_, quote) = pos_of(&want, 6, "\",\"done\"");
    let d = lsp
        .change(&u, 3, json!([{ "range": { "start": { "line": line, "character": quote }, "end": { "line": line, "character": quote + 1 } }, "text": "" }]))
        .await;
    let broken = want.replacen(&format!("{hop}\",\"done\""), &format!("{hop},\"done\""), 1);
    assert_eq!(lsp.probe.text(&u.parse::<Uri>().unwrap()).unwrap(), broken);
    let l6 = broken.lines().nth(6).unwrap();
    assert_eq!(d[0]["code"], "invalid-line", "{d:#}");
    let start = d[0]["range"]["start"]["character"].as_u64().unwrap() as usize;
    let col = d[0]["message"]
        .as_str()
        .unwrap()
        .rsplit("column ")
        .next()
        .unwrap()
        .parse::<usize>()
        .unwrap();
    // serde_json's column is 1-based bytes; the range start is UTF-16.
    assert_eq!(start, l6[..col - 1].encode_utf16().count(), "{d:#}");
    assert!(
        start < col - 1,
        "the emoji and dashes make UTF-16 shorter than bytes"
    );
    lsp.stop().await;
}

#[tokio::test]
async fn utf8_positions_when_the_client_offers_them() {
    let (mut lsp, init) =
        Lsp::start_with(json!({ "general": { "positionEncodings": ["utf-8", "utf-16"] } })).await;
    assert_eq!(init["capabilities"]["positionEncoding"], "utf-8");
    let u = uri("emoji.tape.jsonl");
    let text = emoji_tape();
    lsp.open(&u, &text).await;
    let l6 = text.lines().nth(6).unwrap();
    let emoji = l6.find('😀').unwrap() as u32;
    for inside in 1..4 {
        assert_eq!(
            lsp.at("textDocument/hover", &u, 6, emoji + inside).await,
            Value::Null
        );
    }
    assert_ne!(
        lsp.at("textDocument/hover", &u, 6, emoji + 4).await,
        Value::Null
    );
    let of = l6.find("of 12").unwrap() as u32;
    lsp.change(&u, 2, json!([{ "range": { "start": { "line": 6, "character": of }, "end": { "line": 6, "character": of + 2 } }, "text": "out of" }]))
        .await;
    assert_eq!(
        lsp.probe.text(&u.parse::<Uri>().unwrap()).unwrap(),
        text.replace("Hop 2 😀 of 12", "Hop 2 😀 out of 12")
    );
    lsp.stop().await;
}

// ---------------------------------------------------------------------------
// Malformed input
// ---------------------------------------------------------------------------

#[tokio::test]
async fn malformed_tapes_get_diagnostics_not_crashes() {
    let mut lsp = Lsp::start().await;
    let u = uri("malformed.tape.jsonl");
    let good = tape("demo-deploy-failed.tape.jsonl");
    let mut lines: Vec<String> = good.lines().map(Into::into).collect();
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    lines.insert(2, r#"{"seq":1,"at":0,"offset":"#.into()); // broken JSON
    lines.insert(
        3,
        r#"{"seq":1,"at":0,"offset":0,"call":null,"kind":"from.the.future","data":{"x":[1,2]}}"#
            .into(),
    );
    lines.insert(4, "[1, 2, 3]".into());
    lines.insert(5, r#""just a string""#.into());
    lines.insert(6, r#"{"seq":18446744073709551615,"at":0,"offset":0,"call":null,"kind":"log","data":{"level":"info","data":"max","delivered":false}}"#.into());
    lines.insert(7, deep);
    lines.insert(8, r#"{"format":"reel.tape.v1"}"#.into());
    lines.insert(
        9,
        r#"{"artifact":"sha256:00","size":1,"base64":"!!"}"#.into(),
    );
    lines.insert(10, "\u{feff}{}".into());
    let text = lines.join("\r\n");
    let d = lsp.open(&u, &text).await;
    snapshot("diagnostics_malformed", &d);
    for line in 2..=10 {
        assert!(
            d.as_array()
                .unwrap()
                .iter()
                .any(|d| d["range"]["start"]["line"] == line),
            "line {line} has a diagnostic: {d:#}"
        );
    }
    // The unknown kind is a fact, shown in the outline and hover.
    let h = hover_text(&lsp.at("textDocument/hover", &u, 3, 0).await);
    assert!(h.starts_with("**from.the.future** #1"), "{h}");
    assert!(h.contains("does not know"), "{h}");
    let symbols = lsp.symbols(&u).await;
    assert!(outline(&symbols)
        .iter()
        .any(|l| l.contains("#1 from.the.future")));
    // Every question on every line (and past them) answers.
    for line in 0..16 {
        for character in [0, 1, 5, 100, u32::MAX] {
            for method in ["textDocument/hover", "textDocument/definition"] {
                let r = lsp.request(method, json!({ "textDocument": { "uri": u }, "position": { "line": line, "character": character } })).await;
                assert!(r.get("error").is_none(), "{method} {line}:{character}: {r}");
            }
        }
    }
    lsp.folding(&u).await;
    lsp.stop().await;
}

#[tokio::test]
async fn a_huge_line_is_one_line() {
    let mut lsp = Lsp::start().await;
    let u = uri("huge.tape.jsonl");
    let mut lines: Vec<String> = tape("demo-walk-cancelled.tape.jsonl")
        .lines()
        .map(Into::into)
        .collect();
    // A 5 MB progress message on line 5, and a 5 MB broken line after it.
    let message = "é".repeat(2_500_000);
    lines[4] = lines[4].replacen("Hop 1 of 12", &message, 1);
    lines.insert(5, format!("{{\"seq\":3,\"x\":\"{}", "y".repeat(5_000_000)));
    let text = lines.join("\n");
    let d = lsp.open(&u, &text).await;
    let at: Vec<(u64, &str)> = d
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["range"]["start"]["line"].as_u64().unwrap(),
                d["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(at, [(5, "invalid-line"), (13, "cancel_after_end")]);
    let h = hover_text(&lsp.at("textDocument/hover", &u, 4, 10).await);
    // 2,500,000 é and " — hop-…", cut at 120 characters.
    let shown = h
        .lines()
        .find(|l| l.starts_with("Shown as:"))
        .unwrap_or_default();
    assert!(
        shown.ends_with("… (+2499891 more)"),
        "cut at 120 characters: {shown}"
    );
    assert_eq!(shown.chars().filter(|&c| c == 'é').count(), 120, "{shown}");
    assert!(h.len() < 200_000, "the hover is cut too: {} bytes", h.len());
    // Type into the middle of the huge line.
    let before = lsp.probe.parsed_lines(&u.parse::<Uri>().unwrap()).unwrap();
    lsp.change(&u, 2, json!([{ "range": { "start": { "line": 4, "character": 2_000_000 }, "end": { "line": 4, "character": 2_000_000 } }, "text": "!" }]))
        .await;
    assert_eq!(
        lsp.probe.parsed_lines(&u.parse::<Uri>().unwrap()).unwrap(),
        before + 1
    );
    assert_eq!(outline(&lsp.symbols(&u).await).len(), 15);
    lsp.stop().await;
}

#[tokio::test]
async fn odd_edits_and_positions_never_crash() {
    let mut lsp = Lsp::start().await;
    let u = uri("odd.tape.jsonl");
    let text = emoji_tape();
    lsp.open(&u, &text).await;
    let (line, emoji) = pos_of(&text, 6, "😀");
    let range = |l1: u32, c1: u32, l2: u32, c2: u32| json!({ "start": { "line": l1, "character": c1 }, "end": { "line": l2, "character": c2 } });
    let edits = [
        // Inside the surrogate pair (snapped before the emoji).
        json!([{ "range": range(line, emoji + 1, line, emoji + 1), "text": "" }]),
        // Past the end of a line, and past the last line.
        json!([{ "range": range(2, 100_000, 2, 100_000), "text": "" }]),
        json!([{ "range": range(9_999, 0, 10_000, u32::MAX), "text": "" }]),
        // Reversed.
        json!([{ "range": range(3, 5, 3, 1), "text": "" }]),
        // Several changes in one notification, one of them the whole text.
        json!([{ "range": range(0, 0, 0, 0), "text": "x" }, { "text": "" }, { "range": range(0, 0, 0, 0), "text": "{}\n{}" }]),
    ];
    for (i, changes) in edits.into_iter().enumerate() {
        let version = i as i64 + 2;
        lsp.change(&u, version, changes).await;
        lsp.symbols(&u).await;
        lsp.folding(&u).await;
        lsp.at("textDocument/hover", &u, 0, 0).await;
    }
    assert_eq!(
        lsp.probe.text(&u.parse::<Uri>().unwrap()).unwrap(),
        "{}\n{}"
    );
    // Questions about documents that are not open.
    assert_eq!(lsp.symbols(&uri("nothing.tape.jsonl")).await, Value::Null);
    lsp.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri("nothing.tape.jsonl"), "version": 2 }, "contentChanges": [{ "text": "" }] }),
    )
    .await;
    // Still serving.
    assert_eq!(outline(&lsp.symbols(&u).await).len(), 1);
    lsp.stop().await;
}

// ---------------------------------------------------------------------------
// Incremental sync
// ---------------------------------------------------------------------------

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A random position on a character boundary of `text`: (line, UTF-16
/// character, byte offset in `text`).
fn random_position(rng: &mut Rng, text: &str) -> (u32, u32, usize) {
    let lines: Vec<&str> = text.split('\n').collect();
    let l = rng.below(lines.len());
    let line = lines[l].strip_suffix('\r').unwrap_or(lines[l]);
    let boundaries: Vec<usize> = line
        .char_indices()
        .map(|(b, _)| b)
        .chain([line.len()])
        .collect();
    let b = boundaries[rng.below(boundaries.len())];
    let line_start: usize = lines[..l].iter().map(|x| x.len() + 1).sum();
    (
        l as u32,
        line[..b].encode_utf16().count() as u32,
        line_start + b,
    )
}

#[test]
fn incremental_edits_match_a_fresh_parse() {
    let inserts = [
        "",
        "x",
        "\n",
        "\r\n",
        "é",
        "😀",
        "}",
        "{\"seq\":",
        "\n\n",
        r#"{"seq":3,"at":0,"offset":0,"call":"c1","kind":"log","data":{"level":"info","data":"😀","delivered":true}}"#,
    ];
    for seed in 1..=4u64 {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
        let mut model = if seed % 2 == 0 {
            emoji_tape()
        } else {
            tape("demo-search.tape.jsonl").replace('\n', "\r\n")
        };
        let mut doc = Document::new(&model);
        for step in 0..400 {
            let (l1, c1, b1) = random_position(&mut rng, &model);
            let (l2, c2, b2) = if rng.below(3) == 0 {
                (l1, c1, b1)
            } else {
                random_position(&mut rng, &model)
            };
            let ((l1, c1, b1), (l2, c2, b2)) = if b2 < b1 {
                ((l2, c2, b2), (l1, c1, b1))
            } else {
                ((l1, c1, b1), (l2, c2, b2))
            };
            let insert = inserts[rng.below(inserts.len())];
            // Never cut a "\r\n" in two in the model (a client would not).
            if model[..b1].ends_with('\r') || model[..b2].ends_with('\r') {
                continue;
            }
            model.replace_range(b1..b2, insert);
            let range = Range::new(Position::new(l1, c1), Position::new(l2, c2));
            doc.apply_change(Some(range), insert, Encoding::Utf16);
            assert_eq!(doc.text(), model, "seed {seed} step {step}");
            if step % 50 == 0 {
                assert_eq!(
                    doc.lines(),
                    Document::new(&model).lines(),
                    "seed {seed} step {step}"
                );
            }
        }
        assert_eq!(doc.lines(), Document::new(&model).lines(), "seed {seed}");
        let fresh = Document::new(&model).view().index.timeline.clone();
        assert_eq!(doc.view().index.timeline, fresh, "seed {seed}");
    }
}

#[test]
fn a_keystroke_reparses_one_line_and_shifts_the_rest() {
    let text = tape("demo-search.tape.jsonl");
    let mut doc = Document::new(&text);
    let opened = doc.parsed_lines();
    assert_eq!(opened, 28);
    // A character typed into line 5.
    doc.apply_change(
        Some(Range::new(Position::new(5, 2), Position::new(5, 2))),
        " ",
        Encoding::Utf16,
    );
    assert_eq!(doc.parsed_lines(), opened + 1);
    // Enter at the end of line 3: the new empty line only.
    let end = text.lines().nth(3).unwrap().len() as u32;
    doc.apply_change(
        Some(Range::new(Position::new(3, end), Position::new(3, end))),
        "\n",
        Encoding::Utf16,
    );
    assert_eq!(doc.parsed_lines(), opened + 2);
    // Lines below moved down by one and kept their parses.
    let view = doc.view();
    assert_eq!(view.lines[11].fact().unwrap().seq, 9);
    assert_eq!(view.index.call("c3").unwrap().started, 13);
    // Deleting the header line re-parses the line that becomes line 1.
    doc.apply_change(
        Some(Range::new(Position::new(0, 0), Position::new(1, 0))),
        "",
        Encoding::Utf16,
    );
    assert_eq!(doc.parsed_lines(), opened + 3);
    assert!(matches!(
        doc.lines()[0].parsed(),
        reel_lsp::document::Parsed::Invalid { .. }
    ));
}

/// A tape of `calls` calls of `per_call` facts each (plus run.started and
/// run.ended).
fn big_tape(calls: usize, per_call: usize) -> String {
    // The header of another run, renamed: a header naming another run
    // than its run.started is damage (`reel import` refuses it).
    let mut header: Value = serde_json::from_str(
        tape("demo-walk-cancelled.tape.jsonl")
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    header["run"]["run_id"] = json!("big");
    let header = header.to_string();
    let mut out = header;
    let mut seq = 0u64;
    let mut push = |out: &mut String, call: Option<&str>, kind: &str, data: Value| {
        out.push('\n');
        out.push_str(
            &json!({ "seq": seq, "at": 1_796_014_069_000_000_000i64 + seq as i64 * 1000, "offset": seq * 1000, "call": call, "kind": kind, "data": data })
                .to_string(),
        );
        seq += 1;
    };
    push(
        &mut out,
        None,
        "run.started",
        json!({ "run_id": "big", "producer": { "name": "test", "version": "1" } }),
    );
    for c in 0..calls {
        let id = format!("c{c}");
        push(
            &mut out,
            Some(&id),
            "call.started",
            json!({ "call_id": id, "tool_name": "walk", "mode": "async", "args": c }),
        );
        for i in 1..=per_call - 2 {
            push(
                &mut out,
                Some(&id),
                "progress",
                json!({ "payload": { "message": format!("Hop {i} of call {c}") }, "count": i }),
            );
        }
        push(
            &mut out,
            Some(&id),
            "call.ended",
            json!({ "outcome": { "status": "ok", "result": c }, "duration_ns": 5000 }),
        );
    }
    push(
        &mut out,
        None,
        "run.ended",
        json!({ "status": "completed" }),
    );
    out.push('\n');
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tape_of_100k_facts_answers_without_reparsing() {
    let text = big_tape(10_000, 10); // 100,002 facts
    let lines = text.split('\n').count();
    let t0 = Instant::now();
    let mut lsp = Lsp::start().await;
    let u = uri("big.tape.jsonl");
    let id: Uri = u.parse().unwrap();
    assert_eq!(lsp.open(&u, &text).await, json!([]));
    let opened = Instant::now();
    assert_eq!(lsp.probe.parsed_lines(&id), Some(lines as u64));
    let builds = lsp.probe.index_builds(&id).unwrap();

    // Line 50,003 is a progress fact of call c5000.
    let target = 50_003usize;
    let before = text.split('\n').nth(target).unwrap();
    assert!(
        before.contains("\"message\":\"Hop 1 of call 5000\""),
        "{before}"
    );
    let (_, col) = pos_of(&text, target, "Hop 1");
    let mut version = 1;
    let mut keystroke = async |lsp: &mut Lsp, line: u32, character: u32, text: &str| {
        version += 1;
        let r = range_json(line, character, line, character);
        lsp.change(&u, version, json!([{ "range": r, "text": text }]))
            .await
    };
    // Type "ever " into the message, one keystroke at a time, asking for a
    // hover and the symbols as an editor would.
    for (i, ch) in "ever ".chars().enumerate() {
        let d = keystroke(&mut lsp, target as u32, col + 4 + i as u32, &ch.to_string()).await;
        assert_eq!(d, json!([]));
        let h = hover_text(&lsp.at("textDocument/hover", &u, target as u32, 0).await);
        assert!(h.contains("**progress** #50002"), "{h}");
    }
    let h = hover_text(&lsp.at("textDocument/hover", &u, target as u32, 0).await);
    assert!(h.contains("Shown as: Hop ever 1 of call 5000"), "{h}");
    assert_eq!(
        lsp.probe.parsed_lines(&id),
        Some(lines as u64 + 5),
        "five keystrokes, five lines parsed"
    );
    // One index build per edit (for its diagnostics); the questions reuse it.
    assert_eq!(lsp.probe.index_builds(&id), Some(builds + 5));

    // Enter at the start of line 1,000: one new (blank) line parsed, and
    // every line below shifted.
    keystroke(&mut lsp, 1_000, 0, "\n").await;
    assert_eq!(lsp.probe.parsed_lines(&id), Some(lines as u64 + 6));
    let h = hover_text(&lsp.at("textDocument/hover", &u, target as u32 + 1, 0).await);
    assert!(h.contains("Shown as: Hop ever 1 of call 5000"), "{h}");
    let d = lsp
        .at("textDocument/definition", &u, target as u32 + 1, 0)
        .await;
    assert_eq!(
        d["range"]["start"]["line"], target as u64,
        "c5000's call.started, shifted too"
    );
    let symbols = lsp.symbols(&u).await;
    // run + 10,000 calls + 100,002 facts
    assert_eq!(count_symbols(&symbols), 1 + 10_000 + 100_002);
    let done = Instant::now();
    assert_eq!(lsp.probe.parsed_lines(&id), Some(lines as u64 + 6));

    // A burst of 20 keystrokes sent without waiting (typing faster than
    // the server answers): 20 lines parsed, the last version published.
    let builds = lsp.probe.index_builds(&id).unwrap();
    for i in 0..20u32 {
        let r = range_json(
            target as u32 + 1,
            col + 4 + i,
            target as u32 + 1,
            col + 4 + i,
        );
        lsp.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": u, "version": 100 + i }, "contentChanges": [{ "range": r, "text": "z" }] }),
        )
        .await;
    }
    assert_eq!(lsp.diagnostics(&u, Some(119)).await, json!([]));
    assert_eq!(lsp.probe.parsed_lines(&id), Some(lines as u64 + 26));
    let h = hover_text(&lsp.at("textDocument/hover", &u, target as u32 + 1, 0).await);
    assert!(
        h.contains(&format!(
            "Shown as: Hop {}ever 1 of call 5000",
            "z".repeat(20)
        )),
        "{h}"
    );
    let burst_builds = lsp.probe.index_builds(&id).unwrap() - builds;
    assert!(burst_builds <= 20, "{burst_builds}");
    let burst = Instant::now();
    eprintln!(
        "100k facts ({} MB): open + diagnostics {:?}, 6 edits with hovers, a definition and the outline {:?}, a burst of 20 keystrokes {:?} ({burst_builds} index builds)",
        text.len() / 1_000_000,
        opened - t0,
        done - opened,
        burst - done,
    );
    lsp.stop().await;
}

fn range_json(l1: u32, c1: u32, l2: u32, c2: u32) -> Value {
    json!({ "start": { "line": l1, "character": c1 }, "end": { "line": l2, "character": c2 } })
}

// ---------------------------------------------------------------------------
// The `reel lsp` binary, over stdio
// ---------------------------------------------------------------------------

/// Records the demo into a fresh archive and exports its first run.
async fn demo_tape() -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path(), RecorderConfig::default())
        .await
        .unwrap();
    let ids = reel_demo::record(&recorder).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let mut bytes = Vec::new();
    Tape::export(&archive, &ids[0])
        .unwrap()
        .write(&mut bytes)
        .unwrap();
    (ids[0].clone(), String::from_utf8(bytes).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reel_lsp_speaks_over_stdio() {
    let (run_id, text) = demo_tape().await;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("lsp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        let mut r = std::io::BufReader::new(stdout);
        loop {
            let mut len = None;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        len = value.trim().parse::<usize>().ok();
                    }
                }
            }
            let Some(len) = len else { return };
            let mut body = vec![0; len];
            if r.read_exact(&mut body).is_err() {
                return;
            }
            if tx.send(serde_json::from_slice(&body).unwrap()).is_err() {
                return;
            }
        }
    });
    let mut send = |msg: Value| {
        stdin.write_all(&frame(msg.to_string().as_bytes())).unwrap();
        stdin.flush().unwrap();
    };
    let mut notes: HashMap<String, Vec<Value>> = HashMap::new();
    let mut answer = |id: i64| -> Value {
        loop {
            let msg = match rx.recv_timeout(TIMEOUT) {
                Ok(m) => m,
                Err(e) => {
                    let mut err = String::new();
                    let _ = stderr.read_to_string(&mut err);
                    panic!("no answer to request {id} from `reel lsp` ({e}); is the `lsp` verb wired? stderr:\n{err}");
                }
            };
            if msg.get("method").is_none() && msg["id"] == json!(id) {
                return msg;
            }
            let method = msg["method"].as_str().unwrap_or_default().to_owned();
            notes.entry(method).or_default().push(msg);
        }
    };
    let u = "file:///reel-lsp-stdio/demo.tape.jsonl";
    send(
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "processId": std::process::id(), "rootUri": null, "capabilities": {} } }),
    );
    let init = answer(1);
    assert_eq!(init["result"]["serverInfo"]["name"], "reel", "{init}");
    send(json!({ "jsonrpc": "2.0", "method": "initialized", "params": {} }));
    send(
        json!({ "jsonrpc": "2.0", "method": "textDocument/didOpen", "params": { "textDocument": { "uri": u, "languageId": "reel-tape", "version": 1, "text": text } } }),
    );
    send(
        json!({ "jsonrpc": "2.0", "id": 2, "method": "textDocument/documentSymbol", "params": { "textDocument": { "uri": u } } }),
    );
    let symbols = answer(2);
    let run = &symbols["result"][0];
    assert_eq!(run["name"], format!("run {run_id}"), "{symbols}");
    let calls: Vec<&str> = run["children"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == 12)
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["c1 deploy"], "{symbols}");
    send(json!({ "jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": null }));
    assert_eq!(answer(3)["result"], Value::Null);
    send(json!({ "jsonrpc": "2.0", "method": "exit", "params": null }));
    assert!(
        notes.contains_key("textDocument/publishDiagnostics"),
        "{notes:?}"
    );
    // Standard input stays open: `exit` alone ends the server.
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "`reel lsp` did not exit after `exit`"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        status.code(),
        Some(0),
        "`reel lsp` exits with 0 after shutdown and exit"
    );
}

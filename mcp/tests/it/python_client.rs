//! The example server driven by a real MCP client: the official Python
//! `mcp` package (version pinned in tests/requirements.txt), over stdio and
//! over streamable HTTP, on protocol 2025-11-25 (initialize handshake) and
//! 2026-07-28 (no handshake, input-required rounds). Each test asserts what
//! the client saw, then that the archive holds exactly those facts, then
//! that every recorded call replays without divergence.
//!
//! Without python3 and the `mcp` package the tests fail, saying how to
//! install them: `pip install -r mcp/tests/requirements.txt`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use reel::report::Verdict;
use reel_archive::FingerprintKey;
use reel_archive::{Archive, ArchiveConfig};
use reel_replayer::{replay, Recording, ReplayOptions};
use serde_json::{json, Value};

#[path = "../../src/bin/reel-mcp-example/tools.rs"]
mod tools;

const SERVER: &str = env!("CARGO_BIN_EXE_reel-mcp-example");
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
/// The archive's fingerprint key, for the server (an env var) and the
/// test: nothing is read from or written to ~/.config.
const KEY_HEX: &str = "0707070707070707070707070707070707070707070707070707070707070707";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/client.py")
}

/// Fails (never skips) without python3 and the `mcp` package.
fn require_python() {
    let probe = Command::new("python3")
        .args([
            "-c",
            "import mcp, importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output();
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/requirements.txt");
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "the official Python MCP client is missing: install it with `pip install -r {}` ({})",
            requirements.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!(
            "python3 is missing ({e}): install Python 3.10 or later, then `pip install -r {}`",
            requirements.display()
        ),
    }
}

struct Scenario {
    _dir: tempfile::TempDir,
    archive: PathBuf,
    report: Value,
    http: bool,
    modern: bool,
}

fn client(dir: &Path) -> Command {
    let mut c = Command::new("python3");
    c.arg(script())
        .env("REEL_CONFIG_DIR", dir.join("config"))
        .env("REEL_FINGERPRINT_KEY", KEY_HEX)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    c
}

fn report_of(out: std::process::Output) -> Value {
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

/// The client starts the server itself, on stdio.
fn over_stdio(mode: &str) -> Scenario {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let out = client(dir.path())
        .args(["stdio", SERVER, archive.to_str().unwrap(), mode])
        .output()
        .unwrap();
    Scenario {
        report: report_of(out),
        _dir: dir,
        archive,
        http: false,
        modern: mode != "legacy",
    }
}

/// The test starts the server on HTTP (port 0: it prints its URL), the
/// client connects to it; closing the server's stdin stops it.
fn over_http(mode: &str) -> Scenario {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let mut server = Command::new(SERVER)
        .args([
            "--archive",
            archive.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
        ])
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .env("REEL_FINGERPRINT_KEY", KEY_HEX)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
    let out = client(dir.path())
        .args(["http", url.trim(), mode])
        .output()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    stdin.flush().unwrap();
    drop(stdin);
    let status = server.wait().unwrap();
    let report = report_of(out);
    assert!(status.success(), "the server exited with {status}");
    Scenario {
        report,
        _dir: dir,
        archive,
        http: true,
        modern: mode != "legacy",
    }
}

/// A recorded stream: its key and its facts as JSON.
struct Stream {
    key: String,
    facts: Vec<Value>,
}

impl Stream {
    fn started(&self) -> &Value {
        &self.facts[0]["data"]
    }
    fn tool(&self) -> &str {
        self.started()["tool_name"].as_str().unwrap()
    }
    fn args(&self) -> &Value {
        &self.started()["args"]
    }
    fn kinds(&self, kind: &str) -> Vec<&Value> {
        self.facts
            .iter()
            .filter(|f| f["kind"] == kind)
            .map(|f| &f["data"])
            .collect()
    }
    fn ended(&self) -> &Value {
        let last = self.facts.last().unwrap();
        assert_eq!(last["kind"], "call.ended", "{}", self.key);
        &last["data"]["outcome"]
    }
}

fn streams(archive: &Archive) -> Vec<Stream> {
    let mut out: Vec<Stream> = archive
        .run_ids()
        .map(|key| {
            let key = key.unwrap();
            let facts = archive
                .facts(&key, ..)
                .unwrap()
                .map(|f| serde_json::to_value(f.unwrap()).unwrap())
                .collect();
            Stream { key, facts }
        })
        .collect();
    out.sort_by_key(|s| s.facts[0]["at"].as_i64().unwrap());
    out
}

fn open(path: &Path) -> Archive {
    Archive::open(
        path,
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([7; 32]),
            ..ArchiveConfig::default()
        },
    )
    .unwrap()
}

fn check(s: Scenario) {
    let r = &s.report;
    let expected_version = if s.modern { "2026-07-28" } else { "2025-11-25" };
    assert_eq!(r["protocol"], expected_version);

    // tools/list: from the specs, with schemas and annotations.
    let count = &r["tools"]["count"];
    assert_eq!(count["title"], "Count steps");
    assert_eq!(
        count["annotations"],
        json!({ "readOnlyHint": true, "idempotentHint": true })
    );
    assert_eq!(count["inputSchema"]["required"], json!(["steps"]));
    assert_eq!(
        count["outputSchema"]["properties"]["counted"]["type"],
        "integer"
    );
    assert_eq!(
        r["tools"]["confirm"]["annotations"],
        json!({ "destructiveHint": true })
    );
    // A string result has no MCP output schema; a tool without a spec
    // takes any object.
    assert!(r["tools"]["wait"].get("outputSchema").is_none());
    assert_eq!(
        r["tools"]["echo"]["inputSchema"],
        json!({ "type": "object" })
    );
    assert_eq!(r["tools"].as_object().unwrap().len(), 8);

    // Progress: the tokens exactly, 0 included; with and without message.
    assert_eq!(r["count0"]["structured"], json!({ "counted": 2 }));
    assert_eq!(
        r["progress0"],
        json!([
            { "progressToken": 0, "progress": 1.0, "total": 2.0, "message": "step 1" },
            { "progressToken": 0, "progress": 2.0, "total": 2.0, "message": "step 2" },
            { "progressToken": 0, "progress": 3.0 },
        ])
    );
    assert_eq!(
        r["progress_str"],
        json!([
            { "progressToken": "tok-α", "progress": 1.0, "total": 1.0, "message": "step 1" },
            { "progressToken": "tok-α", "progress": 2.0 },
        ])
    );
    assert_eq!(
        r["progress_callback"],
        json!([[1.0, 1.0, "step 1"], [2.0, null, null]])
    );
    assert_eq!(r["silent"], json!([]));

    // Log messages: levels and logger names.
    let logs: Vec<(String, String)> = r["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["logger"] == "levels")
        .map(|l| (l["level"].as_str().unwrap().into(), l["data"].to_string()))
        .collect();
    assert_eq!(
        logs,
        [
            ("debug", "\"a debug line\""),
            ("info", "\"an info line\""),
            ("notice", "\"a notice\""),
            ("warning", "{\"warning\":\"disk at 90%\"}"),
            ("error", "\"an error line\""),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert_eq!(
        r["logs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["logger"] == "count")
            .count(),
        // Four calls of `count`, a debug line and a notify each.
        8,
        "{}",
        r["logs"]
    );

    // Elicitation: accept, decline, cancel (form), accept (url).
    let outcomes: Vec<&Value> = r["confirm"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["text"][0])
        .collect();
    assert_eq!(
        outcomes,
        [
            &json!("{\"outcome\":\"accept\",\"content\":{\"confirmed\":true}}"),
            &json!("{\"outcome\":\"decline\"}"),
            &json!("{\"outcome\":\"cancel\"}"),
        ]
    );
    // The progress the tool reports after the answer reaches the client
    // (over MRTR, on the request of the round that brought the answer).
    for (i, progress) in r["confirm_progress"].as_array().unwrap().iter().enumerate() {
        assert_eq!(
            progress,
            &json!([{ "progressToken": format!("confirm-{i}"), "progress": 1.0, "total": 1.0, "message": "answered" }])
        );
    }
    let questions = r["questions"].as_array().unwrap();
    assert_eq!(questions.len(), 4);
    assert_eq!(questions[0]["mode"], "form");
    assert_eq!(questions[0]["message"], "Really deploy 0?");
    assert_eq!(
        questions[0]["requestedSchema"]["properties"]["confirmed"]["type"],
        "boolean"
    );
    assert_eq!(questions[3]["mode"], "url");
    assert_eq!(questions[3]["url"], "https://registry.test/login");
    if !s.modern {
        // 2026-07-28 has no elicitationId (rmcp leaves it out).
        assert_eq!(questions[3]["elicitationId"], "el-c1");
    }
    assert_eq!(
        r["sign_in"]["text"][0],
        "{\"outcome\":\"accept\",\"content\":null}"
    );
    // 2025-11-25: the accepted URL question's completion reaches the
    // client (once); 2026-07-28 has no such message (a round's answer is
    // the completion).
    let completions = r["elicit_complete"].as_array().unwrap();
    if s.modern {
        assert!(completions.is_empty(), "{completions:?}");
    } else {
        assert_eq!(
            completions,
            &[
                json!({"method": "notifications/elicitation/complete", "params": {"elicitationId": "el-c1"}})
            ],
            "{completions:?}"
        );
    }

    // Errors: a tool's error and a rejected input are isError results; an
    // unknown tool is a JSON-RPC error.
    assert_eq!(r["fail"]["isError"], true);
    assert_eq!(r["fail"]["text"][0], "the disk is full");
    assert_eq!(r["bad_input"]["isError"], true);
    assert!(r["bad_input"]["text"][0]
        .as_str()
        .unwrap()
        .contains("/steps"));
    assert_eq!(r["unknown"]["code"], -32602);
    assert_eq!(r["echo"]["text"][0], "{\"x\":1}");

    // What the tool's context knew.
    let who: Value = serde_json::from_str(r["whoami"]["text"][0].as_str().unwrap()).unwrap();
    assert_eq!(who["run_id"], Value::Null);
    assert_eq!(who["protocol"], "mcp");
    assert_eq!(who["platform"], "claude");
    assert_eq!(who["client"], "claude-code-test");
    // Only a 2025-11-25 HTTP session has an id.
    assert_eq!(who["session"].is_string(), s.http && !s.modern, "{who}");

    assert_eq!(r["cancel"], "cancelled");
    assert_eq!(r["after_cancel"]["isError"], false);

    if s.modern {
        let m = &r["mrtr"];
        assert_eq!(m["first"]["resultType"], "input_required");
        let requests = m["first"]["inputRequests"].as_object().unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests["elicit-1"]["method"], "elicitation/create");
        assert_eq!(
            requests["elicit-1"]["params"]["message"],
            "Really rotate keys?"
        );
        assert_eq!(m["forged"]["code"], -32602);
        assert!(m["forged"]["message"]
            .as_str()
            .unwrap()
            .contains("seal does not hold"));
        assert_eq!(
            m["final"]["text"][0],
            "{\"outcome\":\"accept\",\"content\":{\"confirmed\":false}}"
        );
        assert_eq!(m["replayed"]["code"], -32602);
        assert!(m["replayed"]["message"]
            .as_str()
            .unwrap()
            .contains("not waiting"));
    }

    check_archive(&s);
}

fn check_archive(s: &Scenario) {
    let r = &s.report;
    let archive = open(&s.archive);
    let streams = streams(&archive);
    let tools_called: Vec<&str> = streams.iter().map(Stream::tool).collect();
    let mut expected = vec![
        "count", "count", "count", "count", "levels", "whoami", "confirm", "confirm", "confirm",
        "sign_in", "fail", "echo", "count", "nope",
    ];
    if s.modern {
        expected.push("confirm");
    }
    expected.extend(["wait", "wait", "echo"]);
    // Exactly one stream per tools/call (the rounds of one call are one).
    assert_eq!(tools_called, expected);

    for st in &streams {
        // A call outside any run: its own stream under a `call-` key, no
        // run.started, no run id anywhere.
        assert!(st.key.starts_with("call-"), "{}", st.key);
        assert_eq!(st.facts[0]["kind"], "call.started");
        assert_eq!(st.started()["outside_run"]["key"], st.key.as_str());
        assert!(st
            .facts
            .iter()
            .all(|f| f["kind"] != "run.started" && f["kind"] != "run.ended"));
        assert_eq!(st.started()["protocol"], "mcp");
        assert_eq!(st.started()["platform"], "claude");
        assert_eq!(st.started()["client_info"]["name"], "claude-code-test");
        assert_eq!(st.started()["client_info"]["version"], "1.2.3");
        assert_eq!(
            st.facts
                .iter()
                .filter(|f| f["kind"] == "call.started")
                .count(),
            1,
            "{}",
            st.key
        );
    }
    let session = st_session(&streams);
    assert_eq!(session.is_some(), s.http && !s.modern);

    // count with token 0: three progress facts, the payloads as the tool
    // gave them; a log at debug and a notify at info, both delivered.
    let count0 = &streams[0];
    assert_eq!(count0.args(), &json!({ "steps": 2 }));
    let progress: Vec<&Value> = count0
        .kinds("progress")
        .iter()
        .map(|p| &p["payload"])
        .collect();
    assert_eq!(
        progress,
        [
            &json!({ "progress": 1, "total": 2, "message": "step 1" }),
            &json!({ "progress": 2, "total": 2, "message": "step 2" }),
            &json!({ "progress": 3 }),
        ]
    );
    let logs = count0.kinds("log");
    assert_eq!(logs.len(), 2);
    assert_eq!(logs[0]["level"], "debug");
    assert_eq!(logs[1]["level"], "info");
    assert!(logs
        .iter()
        .all(|l| l["delivered"] == true && l["logger"] == "count"));
    assert_eq!(count0.ended()["status"], "ok");
    assert_eq!(count0.ended()["result"], json!({ "counted": 2 }));

    // Without a token: recorded all the same.
    assert_eq!(streams[3].kinds("progress").len(), 2);

    let levels = &streams[4];
    let recorded: Vec<(&Value, &Value)> = levels
        .kinds("log")
        .iter()
        .map(|l| (&l["level"], &l["delivered"]))
        .collect();
    assert_eq!(
        recorded,
        ["debug", "info", "notice", "warning", "error"]
            .map(|l| (json!(l), json!(true)))
            .iter()
            .map(|(a, b)| (a, b))
            .collect::<Vec<_>>()
    );

    // The traceparent of the request's _meta, as a caller label.
    let whoami = &streams[5];
    assert_eq!(
        whoami.started()["outside_run"]["labels"]["traceparent"],
        TRACEPARENT
    );
    // And the JSON-RPC request id, for trace tools: every call has its own.
    let ids: std::collections::BTreeSet<String> = streams
        .iter()
        .map(|s| {
            s.started()["outside_run"]["labels"]["jsonrpc.request.id"]
                .as_str()
                .expect("every served call records its request id")
                .to_owned()
        })
        .collect();
    assert_eq!(ids.len(), streams.len(), "{ids:?}");

    // Elicitations: asked and answered, one each.
    let answers: Vec<Value> = streams[6..9]
        .iter()
        .map(|st| {
            assert_eq!(st.kinds("elicit.requested").len(), 1);
            assert_eq!(st.kinds("elicit.requested")[0]["mode"], "form");
            let a = st.kinds("elicit.answered");
            assert_eq!(a.len(), 1);
            a[0]["outcome"].clone()
        })
        .collect();
    assert_eq!(
        answers,
        [
            json!({ "outcome": "accept", "content": { "confirmed": true } }),
            json!({ "outcome": "decline" }),
            json!({ "outcome": "cancel" }),
        ]
    );
    let sign_in = &streams[9];
    let asked = sign_in.kinds("elicit.requested");
    assert_eq!(asked[0]["mode"], "url");
    assert_eq!(asked[0]["url"], "https://registry.test/login");
    assert_eq!(asked[0]["elicitation_id"], "el-c1");

    assert_eq!(
        streams[10].ended(),
        &json!({ "status": "error", "error": "the disk is full" })
    );
    assert_eq!(streams[12].ended()["status"], "error");
    assert!(streams[12].ended()["error"]
        .as_str()
        .unwrap()
        .contains("rejected its input"));
    assert_eq!(streams[13].ended()["status"], "error");

    let mut next = 14;
    if s.modern {
        let manual = &streams[next];
        assert_eq!(manual.args(), &json!({ "action": "rotate keys" }));
        assert_eq!(manual.kinds("elicit.requested").len(), 1);
        assert_eq!(
            manual.kinds("elicit.answered")[0]["outcome"],
            json!({ "outcome": "accept", "content": { "confirmed": false } })
        );
        assert_eq!(manual.ended()["status"], "ok");
        next += 1;
    }

    // The cancelled wait: cancel.requested, then the call aborted.
    let wait = &streams[next];
    let kinds: Vec<&str> = wait
        .facts
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["call.started", "progress", "cancel.requested", "call.ended"],
        "{}",
        wait.key
    );
    assert_eq!(wait.ended()["status"], "aborted");
    // The race: what the archive says agrees with what the client saw.
    let race = &streams[next + 1];
    let race_kinds: Vec<&str> = race
        .facts
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    match (
        r["race"].as_str().unwrap(),
        race.ended()["status"].as_str().unwrap(),
    ) {
        // The client got the result. Cancellation is cooperative: a cancel
        // that arrived while the tool was finishing is recorded (before the
        // call's end) without changing the outcome, or it arrived too late
        // and is not recorded at all.
        ("result", "ok") => {}
        ("cancelled", "aborted") => assert!(race_kinds.contains(&"cancel.requested")),
        // The tool finished before the cancel took; the client dropped the
        // result. The archive says ok, as the tool did.
        ("cancelled", "ok") => {}
        other => panic!(
            "the client saw {:?}, the archive has {:?}",
            other.0, race_kinds
        ),
    }
    // Whatever the race did, the stream is well-formed: one end, last, and
    // a recorded cancel precedes it.
    assert_eq!(race_kinds.last(), Some(&"call.ended"), "{race_kinds:?}");
    assert_eq!(
        race_kinds.iter().filter(|k| **k == "call.ended").count(),
        1,
        "{race_kinds:?}"
    );

    check_replay(&archive, &streams);
}

fn st_session(streams: &[Stream]) -> Option<String> {
    let sessions: Vec<Option<&str>> = streams
        .iter()
        .map(|st| st.started()["outside_run"]["session_id"].as_str())
        .collect();
    // One connection: one session for every call, or none for any.
    assert!(sessions.windows(2).all(|w| w[0] == w[1]), "{sessions:?}");
    sessions[0].map(str::to_owned)
}

/// Every recorded call replays against the same tools without divergence;
/// the call of a tool the server does not have is reported as such.
fn check_replay(archive: &Archive, streams: &[Stream]) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tools = tools::tools();
    for st in streams {
        let recording = Recording::from_archive(archive, &st.key).unwrap();
        let report = rt.block_on(replay(&recording, &tools, &ReplayOptions::default()));
        assert!(report.outside_run, "{}", st.key);
        if st.tool() == "nope" {
            assert!(
                matches!(report.calls[0].verdict, Verdict::MissingTool),
                "{report}"
            );
        } else {
            assert!(report.is_match(), "{} ({}): {report}", st.key, st.tool());
        }
    }
}

#[test]
fn stdio_2025_11_25() {
    check(over_stdio("legacy"));
}

#[test]
fn stdio_2026_07_28() {
    check(over_stdio("2026-07-28"));
}

#[test]
fn streamable_http_2025_11_25() {
    check(over_http("legacy"));
}

#[test]
fn streamable_http_2026_07_28() {
    check(over_http("2026-07-28"));
}

/// The recording proxy over streamable HTTP in front of the example
/// server, driven by the Python client on 2026-07-28: each call's
/// input-required rounds come in separate exchanges (no sessions), and
/// are recorded as one call with its question and answer. The client
/// sees through the proxy what it sees without it.
#[test]
fn the_http_proxy_records_input_required_rounds_as_one_call() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let mut server = Command::new(SERVER)
        .args([
            "--archive",
            archive.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
        ])
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .env("REEL_FINGERPRINT_KEY", KEY_HEX)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim().to_owned();

    let rt = tokio::runtime::Runtime::new().unwrap();
    let proxied = dir.path().join("proxied");
    let recorder = rt
        .block_on(reel_recorder::Recorder::open(
            &proxied,
            reel_recorder::RecorderConfig {
                fingerprint_key: FingerprintKey::Key([7; 32]),
                ..reel_recorder::RecorderConfig::default()
            },
        ))
        .unwrap();
    let bound = rt
        .block_on(
            reel_mcp::proxy::HttpProxy::new(&url)
                .unwrap()
                .bind("127.0.0.1:0".parse().unwrap()),
        )
        .unwrap();
    let proxy_url = bound.url();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = rt.spawn({
        let recorder = recorder.clone();
        async move {
            bound
                .run(Some(&recorder), async {
                    let _ = stopped.await;
                })
                .await
        }
    });
    let out = client(dir.path())
        .args(["http", &proxy_url, "2026-07-28"])
        .output()
        .unwrap();
    let _ = stop.send(());
    let outcome = rt.block_on(running).unwrap().unwrap();
    rt.block_on(recorder.shutdown()).unwrap();
    drop(server.stdin.take());
    assert!(server.wait().unwrap().success());
    let report = report_of(out);
    assert_eq!(report["protocol"], "2026-07-28");
    assert_eq!(outcome.run_ids.len(), 1, "one sessionless run");

    let proxied = open(&proxied);
    let stream = proxied
        .facts(&outcome.run_ids[0], ..)
        .unwrap()
        .map(|f| serde_json::to_value(f.unwrap()).unwrap())
        .collect::<Vec<Value>>();
    let of = |call: &Value, kind: &str| -> Vec<Value> {
        stream
            .iter()
            .filter(|f| f["call"] == *call && f["kind"] == kind)
            .map(|f| f["data"].clone())
            .collect()
    };
    let starts: Vec<&Value> = stream
        .iter()
        .filter(|f| f["kind"] == "call.started" && f["data"]["tool_name"] == "confirm")
        .collect();
    // The three confirmations the client answered: one call each, across
    // both rounds, with its question and the client's answer.
    let mut outcomes = Vec::new();
    for i in 0..3 {
        let action = format!("deploy {i}");
        let calls: Vec<&&Value> = starts
            .iter()
            .filter(|f| f["data"]["args"]["action"] == action.as_str())
            .collect();
        assert_eq!(calls.len(), 1, "{action}: one call across its rounds");
        let call = &calls[0]["call"];
        assert_eq!(of(call, "elicit.requested").len(), 1, "{action}");
        let answered = of(call, "elicit.answered");
        assert_eq!(answered.len(), 1, "{action}");
        outcomes.push(answered[0]["outcome"]["outcome"].clone());
        let ended = of(call, "call.ended");
        assert_eq!(ended[0]["outcome"]["status"], "ok", "{action}: {ended:?}");
        assert_eq!(
            ended[0]["outcome"]["result"]["content"][0]["text"], report["confirm"][i]["text"][0],
            "{action}"
        );
    }
    assert_eq!(outcomes, ["accept", "decline", "cancel"]);
    // By hand: the genuine state continued the first round's call; the
    // forged and the replayed states (refused by the server) are calls of
    // their own, ended with the server's error.
    let by_hand: Vec<&&Value> = starts
        .iter()
        .filter(|f| f["data"]["args"]["action"] == "rotate keys")
        .collect();
    assert_eq!(by_hand.len(), 3, "{by_hand:?}");
    let statuses: Vec<Value> = by_hand
        .iter()
        .map(|f| of(&f["call"], "call.ended")[0]["outcome"]["status"].clone())
        .collect();
    assert_eq!(statuses, ["ok", "error", "error"]);
    assert_eq!(of(&by_hand[0]["call"], "elicit.answered").len(), 1);

    // Through the proxy the client saw, and the server recorded, all that
    // the direct HTTP test asserts.
    check(Scenario {
        report,
        _dir: dir,
        archive,
        http: true,
        modern: true,
    });
}

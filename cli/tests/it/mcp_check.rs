//! `reel mcp check`: a session with a deliberately sloppy server
//! (tests/sloppy_server.py, a bare JSON-RPC server) recorded through
//! `reel mcp record`, then linted as a run and as an exported tape: every
//! mistake the server makes is one finding naming its call and what to
//! do, the text under a snapshot, exit code 1. A clean session (the
//! official Python client against the FastMCP server,
//! tests/fastmcp_server.py, through the proxy) has none and exits 0; a
//! damaged tape exits 2, a file that is no tape 64.

use crate::support::{reel, require_python, StdioClient};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// Records one session with the sloppy server into `archive`, each of
/// its tools called once, in turn; returns the run id.
fn record_sloppy(dir: &Path, archive: &Path) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reel"));
    cmd.arg("--archive")
        .arg(archive)
        .args(["mcp", "record", "--"])
        .arg("python3")
        .arg(tests_dir().join("sloppy_server.py"))
        .env("REEL_CONFIG_DIR", dir.join("config"));
    let mut client = StdioClient::spawn(cmd);
    client.initialize("check-test");
    client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    client.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let (listed, _) = client.until_answer(2);
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 11);
    let calls = [
        ("add", json!({"a": 1, "b": 2})),
        ("late", json!({})),
        ("chatty", json!({})),
        ("forge", json!({})),
        ("slow", json!({})),
    ];
    for (i, (name, arguments)) in calls.into_iter().enumerate() {
        let id = 3 + i as u64;
        client.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": name, "arguments": arguments, "_meta": {"progressToken": format!("t-{name}")}}}),
        );
        client.until_answer(id);
    }
    client.send(json!({"jsonrpc": "2.0", "id": 20, "method": "tools/call",
        "params": {"name": "ghost", "arguments": {}}}));
    // The ghost is never answered: the client gives up and hangs up.
    client.hang_up();
    let runs = reel_out(dir, archive, &["runs", "--json"]);
    let runs: Value = serde_json::from_str(&runs.stdout_text()).unwrap();
    runs["runs"][0]["run_id"].as_str().unwrap().to_owned()
}

trait Text {
    fn stdout_text(&self) -> String;
    fn stderr_text(&self) -> String;
}

impl Text for Output {
    fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

fn reel_out(dir: &Path, archive: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--archive", archive.to_str().unwrap()];
    all.extend_from_slice(args);
    reel(&dir.join("config"), &all)
}

/// The text with what differs between recordings made alike: the run
/// id, the archive's place, the seqs, the call ids (each named by its
/// tool, `calls` longest id first), the slow call's time.
fn normalised(text: &str, run_id: &str, archive: &Path, calls: &[(String, String)]) -> String {
    let mut out = text
        .replace(archive.to_str().unwrap(), "[ARCHIVE]")
        .replace(run_id, "[RUN]");
    for (call, tool) in calls {
        for end in [",", ")"] {
            out = out.replace(&format!("call {call}{end}"), &format!("call [{tool}]{end}"));
        }
    }
    let mut rest = out.as_str();
    let mut seqs = String::new();
    while let Some(at) = rest.find('#') {
        seqs.push_str(&rest[..=at]);
        let digits = rest[at + 1..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        if digits > 0 {
            seqs.push('N');
        }
        rest = &rest[at + 1 + digits..];
    }
    seqs.push_str(rest);
    // "`slow` took 2004 ms": the time is the machine's.
    match seqs.find("`slow` took ") {
        Some(at) => {
            let from = at + "`slow` took ".len();
            let to = from + seqs[from..].find(' ').unwrap();
            format!("{}T{}", &seqs[..from], &seqs[to..])
        }
        None => seqs,
    }
}

#[test]
fn a_sloppy_servers_session_shows_each_mistake_once() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let run_id = record_sloppy(dir.path(), &archive);

    let json_out = reel_out(
        dir.path(),
        &archive,
        &["mcp", "check", &run_id, "--slow", "1000", "--json"],
    );
    assert_eq!(
        json_out.status.code(),
        Some(1),
        "{}",
        json_out.stderr_text()
    );
    let report: Value = serde_json::from_str(&json_out.stdout_text()).unwrap();
    let found: Vec<(String, Value)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["rule"].as_str().unwrap().to_owned(), f["tool"].clone()))
        .collect();
    let expected: Vec<(String, Value)> = [
        ("not-json", Value::Null),
        ("input-schema", json!("shapeless")),
        ("output-schema", json!("listy")),
        ("no-description", json!("undescribed")),
        ("duplicate-name", json!("lookup")),
        ("never-answered", json!("ghost")),
        ("unasked-answer", Value::Null),
        ("notification-with-id", Value::Null),
        ("progress-after-result", Value::Null),
        ("off-output-schema", json!("add")),
        ("slow", json!("slow")),
    ]
    .into_iter()
    .map(|(r, t)| (r.to_owned(), t))
    .collect();
    assert_eq!(found, expected, "{report:#}");
    assert_eq!(report["tools"], 11);
    assert_eq!(report["calls"], 6);
    // Every finding names a call and says what to do.
    for f in report["findings"].as_array().unwrap() {
        assert!(f["call"].is_string(), "{f}");
        assert!(!f["fix"].as_str().unwrap().is_empty(), "{f}");
    }
    // Progress after the result names the call it came after: `late`'s.
    let shown: Value = serde_json::from_str(
        &reel_out(dir.path(), &archive, &["show", &run_id, "--json"]).stdout_text(),
    )
    .unwrap();
    let started: Vec<(String, String)> = shown["facts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "call.started")
        .map(|f| {
            (
                f["call"].as_str().unwrap().to_owned(),
                f["data"]["tool_name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let late = &started.iter().find(|(_, t)| t == "late").unwrap().0;
    let after = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "progress-after-result")
        .unwrap();
    assert_eq!(&after["call"], late, "{after}");

    // The text, as a person reads it.
    let text = reel_out(
        dir.path(),
        &archive,
        &["mcp", "check", &run_id, "--slow", "1000"],
    );
    assert_eq!(text.status.code(), Some(1), "{}", text.stderr_text());
    let mut calls = started;
    // Longest first: no id is replaced inside another.
    calls.sort_by_key(|(c, _)| std::cmp::Reverse(c.len()));
    insta::assert_snapshot!(
        "sloppy_server_findings",
        normalised(&text.stdout_text(), &run_id, &archive, &calls)
    );

    // The exported tape reads the same.
    let tape = dir.path().join("sloppy.tape.jsonl");
    let exported = reel_out(
        dir.path(),
        &archive,
        &["export", &run_id, "-o", tape.to_str().unwrap()],
    );
    assert!(exported.status.success(), "{}", exported.stderr_text());
    let from_tape = reel_out(
        dir.path(),
        &archive,
        &[
            "mcp",
            "check",
            tape.to_str().unwrap(),
            "--slow",
            "1000",
            "--json",
        ],
    );
    assert_eq!(from_tape.status.code(), Some(1));
    let tape_report: Value = serde_json::from_str(&from_tape.stdout_text()).unwrap();
    assert_eq!(tape_report["findings"], report["findings"]);

    // A threshold above the slow call drops that one finding only.
    let patient = reel_out(
        dir.path(),
        &archive,
        &["mcp", "check", &run_id, "--slow", "600000", "--json"],
    );
    let patient: Value = serde_json::from_str(&patient.stdout_text()).unwrap();
    assert_eq!(
        patient["findings"].as_array().unwrap().len(),
        expected.len() - 1
    );

    // A tape changed by hand is damage (2); a file that is no tape is bad
    // input (64).
    let text = std::fs::read_to_string(&tape).unwrap();
    let damaged = dir.path().join("damaged.tape.jsonl");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let add = lines
        .iter()
        .position(|l| l.contains("\"tool_name\":\"add\""))
        .expect("add's call.started");
    lines[add] = lines[add].replace("\"add\"", "\"odd\"");
    std::fs::write(&damaged, lines.join("\n") + "\n").unwrap();
    let out = reel_out(
        dir.path(),
        &archive,
        &["mcp", "check", damaged.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr_text());
    assert!(
        out.stderr_text().contains("export the run again"),
        "{}",
        out.stderr_text()
    );
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "hello\n").unwrap();
    let out = reel_out(
        dir.path(),
        &archive,
        &["mcp", "check", notes.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(64), "{}", out.stderr_text());
}

#[test]
fn a_clean_fastmcp_session_has_no_findings() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let server = tests_dir().join("fastmcp_server.py");
    let out = Command::new("python3")
        .arg(tests_dir().join("mcp_proxy_client.py"))
        .args(["fastmcp", "not-a-secret"])
        .arg(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(&archive)
        .args(["mcp", "record", "--", "python3"])
        .arg(&server)
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .env("MCP_MODE", "legacy")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", out.stderr_text());
    let runs: Value =
        serde_json::from_str(&reel_out(dir.path(), &archive, &["runs", "--json"]).stdout_text())
            .unwrap();
    let run_id = runs["runs"][0]["run_id"].as_str().unwrap();
    let checked = reel_out(dir.path(), &archive, &["mcp", "check", run_id]);
    assert_eq!(
        checked.status.code(),
        Some(0),
        "{}\n{}",
        checked.stdout_text(),
        checked.stderr_text()
    );
    let said = checked.stdout_text();
    assert!(said.contains(": no findings ("), "{said}");
    assert!(said.contains("tools/calls"), "{said}");
}

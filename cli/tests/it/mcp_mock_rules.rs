//! The rules users of MCP mocks wrote down (kerlenton/mcpsnoop #208,
//! modelcontextprotocol/inspector #2441), held by `reel mcp mock` with the
//! official Python client (tests/mcp_mock_rules_client.py), on stdio and
//! over streamable HTTP:
//!
//! - volatile `_meta` keys (`progressToken`, `traceparent`, `tracestate`,
//!   `baggage`, the client's info) are not matched;
//! - identical calls are answered in recorded order, another call between
//!   them or not;
//! - misses are loud: a JSON-RPC error, then exit code 1 when the mock
//!   stops, and the `--report` file written all the same; a session
//!   without a miss exits 0. A `resources/read` or `prompts/get` the
//!   record holds no answer to is a miss as a `tools/call` is.

use std::io::{BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::mcp_cassette::{dirs, record_mock_session, Dirs};
use crate::support::{self, require_python, Killed};

const REEL: &str = env!("CARGO_BIN_EXE_reel");

fn client(scenario: &str, target: &[&str]) -> Value {
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_mock_rules_client.py"))
        .arg(scenario)
        .args(target)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What every scenario gets from the recorded session.
fn assert_answered_as_recorded(report: &Value) {
    assert_eq!(report["add"], json!({"result": 5}), "{report}");
    assert_eq!(report["add_other"], json!({"result": 30}), "{report}");
    assert_eq!(report["next"], json!([["1"], ["2"]]), "{report}");
    assert_eq!(report["between"], json!(["counted to 2"]), "{report}");
    assert_eq!(report["count_progress"], json!([1.0, 2.0]), "{report}");
}

/// The mock on stdio, started by the client through `sh`, which keeps its
/// exit code in a file (the client sees none); the client's report, the
/// mock's exit code and its `--report` JSON.
fn on_stdio(d: &Dirs, scenario: &str) -> (Value, i32, Value) {
    let dir = d.archive.with_file_name(format!("stdio-{scenario}"));
    std::fs::create_dir_all(&dir).unwrap();
    let code = dir.join("code");
    let report = dir.join("report.json");
    let script = format!("\"$0\" \"$@\"; echo $? > '{}'", code.display());
    let tape = d.tape.to_str().unwrap();
    let seen = client(
        scenario,
        &[
            "sh",
            "-c",
            &script,
            REEL,
            "mcp",
            "mock",
            tape,
            "--report",
            report.to_str().unwrap(),
            "--json",
        ],
    );
    // The client closed the mock's input; sh writes the code when it ends.
    let mut waited = 0;
    let code = loop {
        match std::fs::read_to_string(&code) {
            Ok(text) if text.ends_with('\n') => break text.trim().parse::<i32>().unwrap(),
            _ if waited < 600 => {
                std::thread::sleep(std::time::Duration::from_millis(50));
                waited += 1;
            }
            _ => panic!("the mock never ended"),
        }
    };
    let report = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    (seen, code, report)
}

/// The mock over HTTP, stopped with SIGINT once the client is done: the
/// client's report, the exit code, what it said after it listened, and
/// its `--report` JSON.
fn over_http(d: &Dirs, scenario: &str) -> (Value, i32, String, Value) {
    let report = d.archive.with_file_name(format!("http-{scenario}.json"));
    let mut child = Killed(
        Command::new(REEL)
            .args(["mcp", "mock", d.tape.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", "--json", "--report"])
            .arg(&report)
            .env("REEL_CONFIG_DIR", &d.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stderr = BufReader::new(child.0.stderr.take().unwrap());
    let (url, _) = support::proxy_url(&mut stderr);
    let seen = client(scenario, &[&url]);
    let sent = Command::new("kill")
        .args(["-INT", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = child.0.wait().unwrap();
    let mut said = String::new();
    stderr.read_to_string(&mut said).unwrap();
    let report = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    (seen, status.code().unwrap_or(-1), said, report)
}

#[test]
fn volatile_meta_is_not_matched_and_identical_calls_keep_their_order() {
    require_python();
    let d = dirs();
    record_mock_session(&d);
    let (seen, code, report) = on_stdio(&d, "hit");
    assert_answered_as_recorded(&seen);
    assert_eq!(code, 0, "no miss, exit 0: {report}");
    assert_eq!(report["calls_missed"], 0, "{report}");
    assert_eq!(report["calls_served"], 5, "{report}");
    assert_eq!(report["tools_uncovered"], json!(["confirm"]), "{report}");

    let (seen, code, said, report) = over_http(&d, "hit");
    assert_answered_as_recorded(&seen);
    assert_eq!(code, 0, "{said}");
    assert!(!said.contains("matched no recorded call"), "{said}");
    assert_eq!(report["calls_served"], 5, "{report}");
}

#[test]
fn a_miss_is_an_error_then_a_non_zero_exit_and_a_report() {
    require_python();
    let d = dirs();
    record_mock_session(&d);
    let (seen, code, report) = on_stdio(&d, "miss");
    assert_answered_as_recorded(&seen);
    assert_eq!(seen["miss"]["code"], -32602, "{seen}");
    assert!(
        seen["miss"]["message"]
            .as_str()
            .unwrap()
            .contains("first difference /b"),
        "{seen}"
    );
    assert_eq!(code, 1, "a miss exits 1: {report}");
    assert_eq!(report["calls_missed"], 1, "{report}");
    assert_eq!(report["calls_served"], 5, "{report}");

    let (seen, code, said, report) = over_http(&d, "miss");
    assert_eq!(seen["miss"]["code"], -32602, "{seen}");
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("reel: mock: 1 tools/call matched no recorded call"),
        "{said}"
    );
    assert_eq!(report["calls_missed"], 1, "{report}");
}

#[test]
fn a_read_or_a_prompt_the_record_does_not_hold_is_a_miss_too() {
    require_python();
    let d = dirs();
    record_mock_session(&d);
    let (seen, code, report) = on_stdio(&d, "read-miss");
    assert_answered_as_recorded(&seen);
    for key in ["read_miss", "prompt_miss"] {
        assert_eq!(seen[key]["code"], -32602, "{seen}");
        assert!(
            seen[key]["message"]
                .as_str()
                .unwrap()
                .contains("was recorded"),
            "{seen}"
        );
    }
    assert_eq!(code, 1, "a missed read exits 1: {report}");
    assert_eq!(report["calls_missed"], 0, "{report}");
    assert_eq!(report["reads_missed"], 2, "{report}");
    assert_eq!(report["reads_served"], 0, "{report}");

    let (seen, code, said, report) = over_http(&d, "read-miss");
    assert_eq!(seen["read_miss"]["code"], -32602, "{seen}");
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("reel: mock: 2 resources/read or prompts/get matched no recorded call"),
        "{said}"
    );
    assert_eq!(report["reads_missed"], 2, "{report}");
}

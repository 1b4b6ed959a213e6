//! `reel collect` holds a trace until its root span has ended and the
//! grace period has passed; meanwhile `reel runs` (through the archive's
//! live socket) lists it as a running run, and once it is written, as
//! completed.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{free_port, reel_command, wait_listening, Killed};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// One span of [`TRACE`] as OTLP/JSON.
fn span(id: &str, parent: Option<&str>, name: &str, attrs: Value) -> Value {
    let attributes: Vec<Value> = attrs
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| json!({"key": k, "value": {"stringValue": v}}))
        .collect();
    let mut s = json!({
        "traceId": TRACE, "spanId": id, "name": name, "kind": 1,
        "startTimeUnixNano": "1764900000000000000", "endTimeUnixNano": "1764900000500000000",
        "attributes": attributes,
    });
    if let Some(p) = parent {
        s["parentSpanId"] = json!(p);
    }
    s
}

/// `POST /v1/traces` of `spans` as OTLP/JSON; the status.
fn post(port: u16, spans: Vec<Value>) -> u16 {
    let body = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "held-agent"}}]},
        "scopeSpans": [{"spans": spans}],
    }]})
    .to_string();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// `reel runs --json`'s runs, and the table's lines.
fn runs(archive: &Path, config: &Path) -> (Vec<Value>, String) {
    let dir = archive.to_str().unwrap();
    let json = reel_command(config)
        .args(["--archive", dir, "runs", "--json"])
        .output()
        .unwrap();
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let page: Value = serde_json::from_slice(&json.stdout).unwrap();
    let table = reel_command(config)
        .args(["--archive", dir, "runs"])
        .output()
        .unwrap();
    (
        page["runs"].as_array().unwrap().clone(),
        String::from_utf8_lossy(&table.stdout).into_owned(),
    )
}

/// `reel collect` into `archive` on a free loopback port, a 200 ms grace
/// period, its standard error to `stderr`, once it listens; and the port.
pub(crate) fn collector(archive: &Path, config: &Path, stderr: Stdio) -> (Killed, u16) {
    let port = free_port();
    let mut collector = Killed(
        reel_command(config)
            .args(["--archive", archive.to_str().unwrap(), "collect"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--grace-ms", "200"])
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("reel collect starts"),
    );
    wait_listening(port, &mut collector, "reel collect");
    (collector, port)
}

#[test]
fn a_trace_held_shows_as_running_until_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (archive, config) = (dir.path().join("archive"), dir.path().join("config"));
    let (_collector, port) = collector(&archive, &config, Stdio::null());
    let run_id = format!("otel-{TRACE}");

    // The tool span has ended; the agent's (the root) has not: held.
    let tool = span(
        "00f067aa0ba902b7",
        Some("00f067aa0ba902b6"),
        "execute_tool search",
        json!({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}),
    );
    assert_eq!(post(port, vec![tool]), 200);
    let (listed, table) = runs(&archive, &config);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["run_id"], run_id.as_str());
    assert_eq!(listed[0]["state"], "running", "{listed:?}");
    assert_eq!(listed[0]["tools"], json!(["search"]));
    let line = table.lines().find(|l| l.contains(&run_id)).expect(&table);
    assert!(line.contains("running"), "{table}");
    // A filter selects held runs as it selects stored ones.
    let completed = reel_command(&config)
        .args(["--archive", archive.to_str().unwrap()])
        .args(["runs", "--status", "completed", "--json"])
        .output()
        .unwrap();
    let completed: Value = serde_json::from_slice(&completed.stdout).unwrap();
    assert_eq!(completed["runs"], json!([]));

    // The root ends; once the grace period has passed, the run is written.
    let root = span(
        "00f067aa0ba902b6",
        None,
        "invoke_agent helper",
        json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}),
    );
    assert_eq!(post(port, vec![root]), 200);
    let mut state = Value::Null;
    for _ in 0..600 {
        let (listed, _) = runs(&archive, &config);
        assert_eq!(listed.len(), 1, "one run, held or written: {listed:?}");
        state = listed[0]["state"].clone();
        if state != "running" {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(state, "completed");
    let (listed, table) = runs(&archive, &config);
    assert_eq!(listed[0]["facts"], 4, "run, call, call end, run end");
    let line = table.lines().find(|l| l.contains(&run_id)).expect(&table);
    assert!(line.contains("completed"), "{table}");
}

//! `reel mcp record` in front of a server that prints a banner on its
//! standard output before it serves (a Python server on the official
//! SDK, tests/banner_server.py): the line is forwarded, kept in the
//! record as an anomaly of the run (the call `mcp:unmatched` holding it),
//! counted by `reel runs` and named by `reel show`, and said on standard
//! error in reel's voice, cut and escaped; the token the banner quotes,
//! declared with `--secret-env`, reaches neither the archive nor the
//! terminal.

use crate::support::{reel, reel_json, require_python};

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

const SECRET: &str = "planted-7c2e9b41d0a85f36e4b1c2d3e4f5a6b7";

/// Reads the client's stdout until the response to request `id`; the
/// lines read on the way.
fn until_answer(out: &mut impl BufRead, id: u64) -> (Value, Vec<String>) {
    let mut seen = Vec::new();
    loop {
        let mut line = String::new();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "the proxy ended before answering {id}: {seen:?}");
        match serde_json::from_str::<Value>(&line) {
            Ok(m) if m["id"] == id => return (m, seen),
            _ => seen.push(line),
        }
    }
}

#[test]
fn a_servers_banner_is_an_anomaly_said_and_scrubbed() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/banner_server.py");
    let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(&archive)
        .args(["mcp", "record", "--secret-env", "PLANTED_TOKEN", "--"])
        .arg("python3")
        .arg(&server)
        .env("PLANTED_TOKEN", SECRET)
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |m: Value| {
        let mut line = m.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "banner-test", "version": "1"}}}),
    );
    let (init, before) = until_answer(&mut stdout, 1);
    assert_eq!(init["result"]["serverInfo"]["name"], "reel-test-banner");
    // Forwarded unchanged: the client sees what the server wrote.
    assert!(
        before.len() == 1 && before[0].starts_with("banner-server 0.1 ready"),
        "{before:?}"
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "ann"}}}));
    let (greeted, _) = until_answer(&mut stdout, 2);
    assert_eq!(greeted["result"]["content"][0]["text"], "hello ann");
    drop(stdin);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {stderr}");

    // Said in reel's voice, with the line: escaped, the token scrubbed.
    let said = stderr
        .lines()
        .find(|l| l.starts_with("reel: the server wrote a line that is not JSON"))
        .unwrap_or_else(|| panic!("not said: {stderr}"));
    assert!(
        said.contains("banner-server 0.1 ready")
            && said.contains("[REDACTED]")
            && said.contains("recorded as an anomaly of the run (mcp:unmatched)"),
        "{said}"
    );
    assert!(
        !stderr.contains(SECRET),
        "the token on the terminal: {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "not escaped: {stderr:?}");

    // One anomaly, counted by `reel runs` and named by `reel show`.
    let runs = reel_json(&archive, &["runs", "--json"]);
    assert_eq!(runs["runs"][0]["anomalies"], 1, "{runs}");
    let shown = reel(
        &dir.path().join("config"),
        &["--archive", archive.to_str().unwrap(), "show", "--last"],
    );
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("the server sent a line that is not JSON"),
        "{text}"
    );
    assert!(
        !text.contains(SECRET) && !text.contains('\u{1b}'),
        "{text:?}"
    );

    // The record holds the line, the token redacted; no file has it.
    let shown = reel_json(&archive, &["show", "--last", "--json"]);
    let kept: Vec<&Value> = shown["facts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "call.started" && f["data"]["tool_name"] == "mcp:unmatched")
        .collect();
    assert_eq!(kept.len(), 1, "{shown}");
    let message = kept[0]["data"]["args"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("banner-server 0.1 ready \u{1b}[31m(token [REDACTED:"),
        "{message:?}"
    );
    assert_eq!(kept[0]["data"]["args"]["from"], "server");
    for path in crate::support::files_under(&archive) {
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "the token is in {}",
            path.display()
        );
    }
}

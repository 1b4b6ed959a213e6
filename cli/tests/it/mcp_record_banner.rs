//! `reel mcp record` in front of a server that prints a banner on its
//! standard output before it serves (a Python server on the official
//! SDK, tests/banner_server.py): the line is forwarded, kept in the
//! record as an anomaly of the run (the call `mcp:unmatched` holding it),
//! counted by `reel runs` and named by `reel show`, and said on standard
//! error in reel's voice, cut and escaped; the token the banner quotes,
//! declared with `--secret-env`, reaches neither the archive nor the
//! terminal.

use crate::support::{reel, reel_json, require_python, StdioClient};

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

const SECRET: &str = "planted-7c2e9b41d0a85f36e4b1c2d3e4f5a6b7";

#[test]
fn a_servers_banner_is_an_anomaly_said_and_scrubbed() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/banner_server.py");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reel"));
    cmd.arg("--archive")
        .arg(&archive)
        .args(["mcp", "record", "--secret-env", "PLANTED_TOKEN", "--"])
        .arg("python3")
        .arg(&server)
        .env("PLANTED_TOKEN", SECRET)
        .env("REEL_CONFIG_DIR", dir.path().join("config"));
    let mut client = StdioClient::spawn(cmd);
    let (init, before) = client.initialize("banner-test");
    assert_eq!(init["result"]["serverInfo"]["name"], "reel-test-banner");
    // Forwarded unchanged: the client sees what the server wrote.
    assert!(
        before.len() == 1 && before[0].starts_with("banner-server 0.1 ready"),
        "{before:?}"
    );
    client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    client.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "ann"}}}));
    let (greeted, _) = client.until_answer(2);
    assert_eq!(greeted["result"]["content"][0]["text"], "hello ann");
    let stderr = client.hang_up();

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

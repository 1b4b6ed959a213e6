//! The example server on stdio, spoken to as bytes (newline-delimited
//! JSON-RPC): what the SDK clients never send. A client that declares no
//! elicitation capability gets no elicitor (the tool's question is refused
//! and recorded as such); a request `_meta` without a progress token gets no
//! progress; a forged `requestState` on 2026-07-28 is refused before any
//! call is touched. Every tool is listed with a description.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use reel_archive::FingerprintKey;
use reel_archive::{Archive, ArchiveConfig};
use serde_json::{json, Value};

const SERVER: &str = env!("CARGO_BIN_EXE_reel-mcp-example");

struct Wire {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Wire {
    fn start(dir: &std::path::Path) -> Wire {
        let mut child = Command::new(SERVER)
            .args(["--archive", dir.join("archive").to_str().unwrap()])
            .env("REEL_CONFIG_DIR", dir.join("config"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Wire {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message with this id (notifications before it are kept).
    fn answer(&mut self, id: u64, seen: &mut Vec<Value>) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the server closed stdout"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
            seen.push(message);
        }
    }

    fn close(mut self) {
        drop(self.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

fn call(id: u64, tool: &str, args: Value, meta: Value) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": tool, "arguments": args, "_meta": meta },
    })
}

fn facts(dir: &std::path::Path) -> Vec<Vec<Value>> {
    let archive = Archive::open(
        dir.join("archive"),
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([1; 32]),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let mut streams: Vec<Vec<Value>> = archive
        .run_ids()
        .map(|key| {
            archive
                .facts(&key.unwrap(), ..)
                .unwrap()
                .map(|f| serde_json::to_value(f.unwrap()).unwrap())
                .collect()
        })
        .collect();
    streams.sort_by_key(|s: &Vec<Value>| s[0]["at"].as_i64().unwrap());
    streams
}

/// MCP requires a description of every listed tool (the conformance
/// suite's `tools-list` failed on `confirm`, which had none).
#[test]
fn every_tool_is_listed_with_a_description() {
    let dir = tempfile::tempdir().unwrap();
    let mut wire = Wire::start(dir.path());
    let mut seen = Vec::new();
    wire.send(json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": { "name": "raw-test", "version": "0" },
        },
    }));
    wire.answer(1, &mut seen);
    wire.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    wire.send(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }));
    let listed = wire.answer(2, &mut seen);
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "confirm"), "{listed}");
    for tool in tools {
        let described = tool["description"].as_str().is_some_and(|d| !d.is_empty());
        assert!(described, "{} has no description: {tool}", tool["name"]);
    }
    // A tool registered without a spec (the example's `echo`) says exactly
    // what it lacks, where a client reads it (issue 32, item 2).
    let echo = tools.iter().find(|t| t["name"] == "echo").expect("echo");
    let description = echo["description"].as_str().unwrap();
    for lack in [
        "declares no spec",
        "its arguments are not described and not validated",
        "no output schema",
        "text only",
        "no annotations",
    ] {
        assert!(
            description.contains(lack),
            "{lack:?} not in {description:?}"
        );
    }
    assert_eq!(echo["inputSchema"], json!({ "type": "object" }), "{echo}");
    assert!(echo.get("outputSchema").is_none(), "{echo}");
    assert!(echo.get("annotations").is_none(), "{echo}");
    wire.close();
}

#[test]
fn a_client_without_elicitation_gets_its_question_refused_and_no_progress_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut wire = Wire::start(dir.path());
    let mut seen = Vec::new();
    wire.send(json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": { "name": "raw-test", "version": "0" },
        },
    }));
    let init = wire.answer(1, &mut seen);
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "reel-mcp-example");
    wire.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));

    wire.send(call(2, "confirm", json!({ "action": "x" }), json!({})));
    let refused = wire.answer(2, &mut seen);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("elicit"), "{text}");

    wire.send(call(3, "count", json!({ "steps": 2 }), json!({})));
    let counted = wire.answer(3, &mut seen);
    assert_eq!(
        counted["result"]["structuredContent"],
        json!({ "counted": 2 })
    );
    assert!(
        seen.iter().all(|m| m["method"] != "notifications/progress"),
        "{seen:?}"
    );
    wire.close();

    let streams = facts(dir.path());
    assert_eq!(streams.len(), 2);
    let kinds: Vec<&str> = streams[0]
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["call.started", "elicit.refused", "call.ended"]);
    assert_eq!(streams[0][0]["data"]["attached"]["elicitor"], false);
    assert_eq!(streams[0][0]["data"]["client_info"]["name"], "raw-test");
    assert_eq!(streams[0][0]["data"]["platform"], "unknown");
    let progress = streams[1]
        .iter()
        .filter(|f| f["kind"] == "progress")
        .count();
    assert_eq!(progress, 3, "recorded without a token all the same");
}

#[test]
fn a_forged_request_state_is_refused_on_2026_07_28() {
    let dir = tempfile::tempdir().unwrap();
    let mut wire = Wire::start(dir.path());
    let mut seen = Vec::new();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "raw-test", "version": "0" },
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": { "form": {} } },
    });
    wire.send(call(1, "confirm", json!({ "action": "x" }), meta.clone()));
    let first = wire.answer(1, &mut seen);
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();

    let mut forged = call(2, "confirm", json!({ "action": "x" }), meta.clone());
    forged["params"]["requestState"] = json!(format!("{state}x"));
    forged["params"]["inputResponses"] =
        json!({ "elicit-1": { "action": "accept", "content": { "confirmed": true } } });
    wire.send(forged);
    let refused = wire.answer(2, &mut seen);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    // Another tool's call cannot take the waiting call's state.
    let mut other = call(3, "sign_in", json!({}), meta.clone());
    other["params"]["requestState"] = json!(state.clone());
    wire.send(other);
    let refused = wire.answer(3, &mut seen);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("another tool"));

    // The waiting call is untouched: the genuine state resumes it.
    let mut genuine = call(4, "confirm", json!({ "action": "x" }), meta);
    genuine["params"]["requestState"] = json!(state);
    genuine["params"]["inputResponses"] = json!({ "elicit-1": { "action": "decline" } });
    wire.send(genuine);
    let done = wire.answer(4, &mut seen);
    assert_eq!(
        done["result"]["content"][0]["text"], "{\"outcome\":\"decline\"}",
        "{done}"
    );
    wire.close();

    let streams = facts(dir.path());
    assert_eq!(streams.len(), 1, "the rounds are one call");
    let answered: Vec<&Value> = streams[0]
        .iter()
        .filter(|f| f["kind"] == "elicit.answered")
        .collect();
    assert_eq!(answered.len(), 1);
    assert_eq!(
        answered[0]["data"]["outcome"],
        json!({ "outcome": "decline" })
    );
}

//! `reel mcp mock --listen`: a client that closes its response stream
//! (2026-07-28's cancellation by closing) stops the mock sending on it.
//!
//! The recorded call sends far more progress than the loopback socket and
//! the server's queues hold (300 messages of 100 KB), so the mock's replay
//! is still blocked sending when a raw client reads the first event and
//! closes the connection; the mock then stops that replay where it was,
//! says how far it got, counts it in `--report` (`calls_cancelled`), and
//! goes on serving.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use reel::context::{ToolContext, ToolError};
use reel::fact::RunStatus;
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

use crate::mcp_mock_http::{message, raw};
use crate::support::Killed;

const REEL: &str = env!("CARGO_BIN_EXE_reel");
const RUN: &str = "mcp-00000000000000000000000000000c10";
const MESSAGES: usize = 300;

/// A 2026-07-28 session whose one call, `flood`, sent [`MESSAGES`]
/// progress messages of 100 KB each.
fn record_flood(archive: &std::path::Path) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let recorder = Recorder::open(archive, RecorderConfig::default())
            .await
            .unwrap();
        let run = recorder
            .start_run(RunStart::new(RUN).label("mcp.transport", "streamable-http"))
            .await
            .unwrap();
        let discover = json!({
            "resultType": "complete", "supportedVersions": ["2026-07-28"], "ttlMs": 0,
            "cacheScope": "private", "capabilities": {"tools": {}},
        });
        run.call("mcp:server/discover", json!({}))
            .protocol("mcp")
            .invoke(move |_: ToolContext, _: Value| async move { Ok::<_, ToolError>(discover) })
            .await
            .unwrap();
        run.call("flood", json!({}))
            .protocol("mcp")
            .invoke(|ctx: ToolContext, _: Value| async move {
                let page = "x".repeat(100 << 10);
                for n in 1..=MESSAGES {
                    ctx.progress(json!({"progress": n, "total": MESSAGES, "message": page}));
                    tokio::task::yield_now().await;
                }
                Ok::<_, ToolError>(json!({"content": [{"type": "text", "text": "flooded"}]}))
            })
            .await
            .unwrap();
        run.end(RunStatus::Completed).await.unwrap();
        recorder.shutdown().await.unwrap();
    });
}

/// The 2026-07-28 headers and `_meta` of a raw request.
fn request(method: &str, name: &str, mut params: Value, id: u64) -> (String, Value) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "closing-client", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "flood-1",
    });
    let headers =
        format!("MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\nMcp-Name: {name}\r\n");
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    (headers, body)
}

#[test]
fn a_client_that_closes_its_response_stream_stops_the_mock_sending_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let report = dir.path().join("report.json");
    record_flood(&archive);
    let mut mock = Killed(
        Command::new(REEL)
            .arg("--archive")
            .arg(&archive)
            .args([
                "mcp",
                "mock",
                RUN,
                "--listen",
                "127.0.0.1:0",
                "--json",
                "--report",
            ])
            .arg(&report)
            .env("REEL_CONFIG_DIR", dir.path().join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // What it says, line by line, as it says it.
    let (said, lines) = mpsc::channel::<String>();
    let stderr = BufReader::new(mock.0.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = said.send(line);
        }
    });
    let next = |what: &str| loop {
        let line = lines
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("the mock never said {what}"));
        if line.contains(what) {
            return line;
        }
    };
    let listening = next("serving the recorded MCP session");
    let addr = listening
        .split("http://")
        .nth(1)
        .and_then(|r| r.split("/mcp").next())
        .unwrap()
        .to_owned();

    // The call's stream: its first event read, then the connection closed.
    let (headers, body) = request(
        "tools/call",
        "flood",
        json!({"name": "flood", "arguments": {}}),
        1,
    );
    let body = body.to_string();
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 64 << 10];
    while !String::from_utf8_lossy(&seen).contains("notifications/progress") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended before any progress");
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).contains("text/event-stream"));
    drop(stream);

    let stopped = next("closed its response stream");
    let sent: usize = stopped
        .split("stopped after ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {stopped:?}"));
    assert!(
        sent < MESSAGES,
        "the replay ran to its end ({sent} of {MESSAGES}): {stopped}"
    );
    println!("the mock stopped after {sent} of {MESSAGES} progress messages: {stopped}");

    // It goes on serving: another request is answered.
    let (headers, body) = request("server/discover", "", json!({}), 2);
    let headers = headers.replace("Mcp-Name: \r\n", "");
    let (status, _, answer) = raw(&addr, "POST", &headers, Some(&body));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        message(&answer)["result"]["supportedVersions"][0],
        "2026-07-28"
    );

    let sent = Command::new("kill")
        .args(["-INT", &mock.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = mock.0.wait().unwrap();
    assert!(status.success(), "a cancelled call is no miss: {status}");
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["calls_cancelled"], 1, "{report}");
    assert_eq!(report["calls_missed"], 0, "{report}");
}

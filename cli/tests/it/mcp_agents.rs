//! Real agents through the MCP door: a Pydantic AI agent (`TestModel`, no
//! model service, which asks for every tool at once, so the calls run in
//! parallel) over a FastMCP 4 server (tests/agents/), both speaking MCP
//! 2026-07-28 (the session opens with `server/discover`, no `initialize`),
//! as a new user runs them: recorded through `reel mcp record`, served back
//! by `reel mcp mock` to the same agent, and checked by `reel mcp verify`
//! against the unchanged server and a changed one. Neither peer was
//! written for reel (`fastmcp` and `pydantic-ai-slim[mcp]` are pinned in
//! mcp/tests/requirements.txt, which `cargo xtask test` installs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::{self, free_port, reel_json, wait_listening, Killed};

const REEL: &str = env!("CARGO_BIN_EXE_reel");

fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents")
}

fn server() -> [String; 2] {
    [
        "python3".to_owned(),
        agents_dir()
            .join("fastmcp4_server.py")
            .display()
            .to_string(),
    ]
}

/// Fails, saying what to install, unless Python has the two peers.
fn require_agents() {
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/requirements.txt");
    let out = Command::new("python3")
        .args(["-c", "import fastmcp, pydantic_ai.mcp"])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "FastMCP 4 and Pydantic AI are missing: install them with `pip install -r {}` ({})",
        requirements.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// The agent's run against a server on stdio started as `command`: what
/// each tool call returned to it, as JSON.
fn agent_stdio(command: &[String], env: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new("python3");
    cmd.arg(agents_dir().join("pydantic_agent.py"))
        .arg("stdio")
        .args(command)
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    parse_agent(cmd.output().expect("python3 runs"))
}

fn parse_agent(out: Output) -> Value {
    assert!(
        out.status.success(),
        "the agent failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the agent printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(
        report["calls"].as_object().map(|c| c.len()),
        Some(3),
        "the agent calls the three tools at once: {report}"
    );
    report
}

/// `reel --archive ARCHIVE ARGS` as the agent's stdio server command.
fn through_reel(archive: &Path, args: &[&str]) -> Vec<String> {
    let mut cmd = vec![
        REEL.to_owned(),
        "--archive".to_owned(),
        archive.display().to_string(),
    ];
    cmd.extend(args.iter().map(|a| (*a).to_owned()));
    cmd
}

fn verify(archive: &Path, run: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(REEL);
    cmd.arg("--archive")
        .arg(archive)
        .args(["--color", "never", "mcp", "verify", run, "--"])
        .args(server())
        .env("REEL_CONFIG_DIR", archive.with_file_name("config"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The tool call ids of `shown` by tool name.
fn call_of(shown: &Value, tool: &str) -> String {
    shown["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "call.started" && f["data"]["tool_name"] == tool)
        .and_then(|f| f["call"].as_str())
        .unwrap_or_else(|| panic!("no call of {tool}"))
        .to_owned()
}

/// Which tool logged `text` (the server's messages say who they are).
fn sender(text: &str) -> &'static str {
    if text.starts_with("step ") {
        "slow_count"
    } else {
        "weather"
    }
}

/// The agent's parallel calls, recorded over stdio, then mocked and
/// verified. The record holds the session as it opened (`server/discover`),
/// so verify opens it the same way and matches on the unchanged server
/// (before, verify opened with a 2025-11-25 `initialize`, the server
/// answered in the old shape, and every call diverged). No log message is
/// filed under a call that did not send it: one that names no request,
/// with several calls in flight, is the session's and names them (before,
/// it went to the newest call in flight, `broken`, which never logs).
#[test]
fn a_pydantic_ai_agent_over_fastmcp_is_recorded_mocked_and_verified() {
    require_agents();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let mut record = vec!["mcp", "record", "--"];
    let server = server();
    record.extend(server.iter().map(String::as_str));
    let direct = agent_stdio(&server, &[]);
    let recorded = agent_stdio(&through_reel(&archive, &record), &[]);
    assert_eq!(
        recorded, direct,
        "the agent gets the same answers through reel"
    );
    assert_eq!(
        direct["returns"]["broken"]["error"], "broken on purpose: a",
        "{direct}"
    );

    let shown = reel_json(&archive, &["show", "--last", "--json"]);
    let run = shown["run"]["run_id"].as_str().unwrap().to_owned();
    let facts = shown["facts"].as_array().unwrap();
    let opening = call_of(&shown, "mcp:server/discover");
    // What the application read beside the tool calls is recorded too, so
    // the mock can serve it (before, it advertised resources and prompts,
    // then failed a read with a bare -32601).
    call_of(&shown, "mcp:resources/read");
    call_of(&shown, "mcp:prompts/get");
    assert_eq!(
        direct["reads"]["motd"][0], "all systems nominal",
        "{direct}"
    );
    assert!(
        facts
            .iter()
            .any(|f| f["call"] == opening.as_str() && f["kind"] == "call.ended"),
        "the opening exchange is recorded whole"
    );
    let weather = call_of(&shown, "weather");
    let counting = call_of(&shown, "slow_count");
    let broken = call_of(&shown, "broken");
    let mut logs = 0;
    for f in facts.iter().filter(|f| f["kind"] == "log") {
        logs += 1;
        let text = f["data"]["data"]["msg"].as_str().unwrap();
        let sent_by = match sender(text) {
            "weather" => &weather,
            _ => &counting,
        };
        match f["call"].as_str() {
            Some(call) => assert_eq!(call, sent_by, "{text:?} filed under another call: {f}"),
            None => {
                let in_flight: Vec<&str> = f["data"]["in_flight"]
                    .as_array()
                    .unwrap_or_else(|| panic!("a session log names the calls in flight: {f}"))
                    .iter()
                    .map(|c| c.as_str().unwrap())
                    .collect();
                assert!(in_flight.len() > 1, "{f}");
                assert!(in_flight.contains(&sent_by.as_str()), "{f}");
            }
        }
    }
    assert_eq!(
        logs, 5,
        "every message recorded: two of weather, three of slow_count"
    );
    // The tool error is kept as the client received it, structured.
    let ended = facts
        .iter()
        .find(|f| f["call"] == broken.as_str() && f["kind"] == "call.ended")
        .unwrap();
    let outcome = &ended["data"]["outcome"];
    assert_eq!(outcome["status"], "error", "{outcome}");
    assert_eq!(
        outcome["error"], "tool error: broken on purpose: a",
        "{outcome}"
    );
    assert_eq!(outcome["result"]["isError"], true, "{outcome}");
    assert_eq!(
        outcome["result"]["content"][0]["text"], "broken on purpose: a",
        "{outcome}"
    );

    // The mock serves the agent what the server did.
    let mocked = agent_stdio(&through_reel(&archive, &["mcp", "mock", &run]), &[]);
    assert_eq!(mocked, direct, "the mock gives the agent identical results");

    // As a tape too: the session's logs tied to no call need the tape
    // format that carries them (an older reel refuses it rather than drop
    // them), and the mock serves the agent the same from the file.
    let tape = archive.with_file_name("session.tape.jsonl");
    crate::support::export_tape(&archive, &run, &tape);
    let header = std::fs::read_to_string(&tape).unwrap();
    assert!(
        header.starts_with("{\"format\":\"reel.tape.v2\""),
        "{}",
        &header[..80]
    );
    let from_tape = agent_stdio(
        &through_reel(&archive, &["mcp", "mock", tape.to_str().unwrap()]),
        &[],
    );
    assert_eq!(
        from_tape, direct,
        "the mock of the tape gives identical results"
    );

    // verify: the unchanged server matches, call for call.
    let (code, said) = verify(&archive, &run, &[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("all 3 calls matched"), "{said}");
    // A changed server: the call and the field are named.
    let (code, said) = verify(&archive, &run, &[("REEL_TEST_CHANGED", "1")]);
    assert_eq!(code, Some(1), "{said}");
    let line = said
        .lines()
        .find(|l| l.contains("`weather`"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        line.contains("content") && line.contains("hail"),
        "the divergence names the field and the new value: {said}"
    );
    assert!(said.contains("1 of 3 calls diverged"), "{said}");
}

/// Over streamable HTTP: the same agent through `reel mcp record
/// --listen` in front of the FastMCP server gets what it gets directly;
/// the record opens with `server/discover`, and verify (re-driving the
/// same server over stdio) matches it.
#[test]
fn the_agent_over_streamable_http_is_recorded_and_verified() {
    require_agents();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let port = free_port();
    let mut upstream = Killed(
        Command::new("python3")
            .arg(agents_dir().join("fastmcp4_server.py"))
            .args(["http", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(port, &mut upstream, "the FastMCP server");
    let endpoint = format!("http://127.0.0.1:{port}/mcp");
    let agent = |url: &str| {
        parse_agent(
            Command::new("python3")
                .arg(agents_dir().join("pydantic_agent.py"))
                .args(["http", url])
                .stdin(Stdio::null())
                .output()
                .unwrap(),
        )
    };
    let direct = agent(&endpoint);
    let mut proxy = Killed(
        Command::new(REEL)
            .arg("--archive")
            .arg(&archive)
            .args([
                "mcp",
                "record",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                &endpoint,
            ])
            .env("REEL_CONFIG_DIR", dir.path().join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stderr = std::io::BufReader::new(proxy.0.stderr.take().unwrap());
    let (url, _) = support::proxy_url(&mut stderr);
    let proxied = agent(&url);
    assert_eq!(
        proxied, direct,
        "the agent gets the same answers through reel"
    );
    let stopped = Command::new("kill")
        .args(["-INT", &proxy.0.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let _ = proxy.0.wait();

    let runs = reel_json(&archive, &["runs", "--json"]);
    let runs = runs["runs"].as_array().unwrap();
    let run = runs
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .find(|id| {
            let shown = reel_json(&archive, &["show", id, "--json"]);
            shown["facts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["kind"] == "call.started" && f["data"]["tool_name"] == "weather")
        })
        .unwrap_or_else(|| panic!("no run holds the agent's calls: {runs:?}"));
    let shown = reel_json(&archive, &["show", &run, "--json"]);
    call_of(&shown, "mcp:server/discover");
    let (code, said) = verify(&archive, &run, &[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("calls matched"), "{said}");
}

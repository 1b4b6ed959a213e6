//! `reel mcp record`: the recording proxy between the official Python MCP
//! client (tests/mcp_proxy_client.py, `mcp` pinned in
//! mcp/tests/requirements.txt) and real servers: a Python FastMCP server
//! (tests/fastmcp_server.py) and the TypeScript reference server
//! `@modelcontextprotocol/server-everything` (npm). Each test runs the same
//! client session against the server directly and through the proxy and
//! asserts the client got the same answers, then what the archive holds,
//! then that the planted secret (in tool args under a non-secret key, and
//! in the server's environment named by `--secret-env`) is in no file of
//! the archive.
//!
//! Without python3 and the `mcp` package, or node and npm, the tests fail
//! saying how to install them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const REEL: &str = env!("CARGO_BIN_EXE_reel");
const SECRET: &str = "planted-4f1c9a7e2b6d8035e1a2c3b4d5e6f708";

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// Fails (never skips) without python3 and the `mcp` package.
fn require_python() {
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/requirements.txt");
    match Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver, mcp.client"])
        .output()
    {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "the official Python MCP SDK is missing: install it with `pip install -r {}` ({})",
            requirements.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!(
            "python3 is missing ({e}): install Python 3.10 or later, then `pip install -r {}`",
            requirements.display()
        ),
    }
}

/// The client's report of one session with `server` (a command line).
fn session(scenario: &str, dir: &Path, server: &[&str]) -> Value {
    session_in("legacy", scenario, dir, server)
}

/// [`session`] in a client mode (`legacy` or `2026-07-28`).
fn session_in(mode: &str, scenario: &str, dir: &Path, server: &[&str]) -> Value {
    client_run(mode, scenario, dir, server).0
}

/// The client's report and its standard error (where the server's, and
/// so the proxy's, standard error goes).
fn client_run(mode: &str, scenario: &str, dir: &Path, server: &[&str]) -> (Value, String) {
    let out = Command::new("python3")
        .env("MCP_MODE", mode)
        .arg(tests_dir().join("mcp_proxy_client.py"))
        .arg(scenario)
        .arg(SECRET)
        .args(server)
        .env("REEL_CONFIG_DIR", dir.join("config"))
        .env("PLANTED_TOKEN", SECRET)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client failed ({}):\n{}\n{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the client's report is not JSON ({e}): {stdout}"));
    (report, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The same session through `reel mcp record`; returns the report and the
/// archive.
fn proxied(scenario: &str, dir: &Path, server: &[&str]) -> (Value, PathBuf) {
    proxied_in("legacy", scenario, dir, server)
}

/// [`proxied`] in a client mode.
fn proxied_in(mode: &str, scenario: &str, dir: &Path, server: &[&str]) -> (Value, PathBuf) {
    let archive = dir.join("archive");
    let mut cmd = vec![
        REEL,
        "--archive",
        archive.to_str().unwrap(),
        "mcp",
        "record",
        "--secret-env",
        "PLANTED_TOKEN",
        "--",
    ];
    cmd.extend_from_slice(server);
    (session_in(mode, scenario, dir, &cmd), archive)
}

fn reel(archive: &Path, args: &[&str]) -> Value {
    let out = Command::new(REEL)
        .arg("--archive")
        .arg(archive)
        .args(args)
        .env("REEL_CONFIG_DIR", archive.with_file_name("config"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reel {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The one run of the archive, as `reel show --last --json` gives it.
fn only_run(archive: &Path) -> Value {
    let runs = reel(archive, &["runs", "--json"]);
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "one run per proxied session: {runs:?}");
    assert!(runs[0]["run_id"].as_str().unwrap().starts_with("mcp-"));
    let shown = reel(archive, &["show", "--last", "--json"]);
    assert_eq!(shown["run"]["run_id"], runs[0]["run_id"]);
    shown
}

fn facts<'a>(shown: &'a Value, kind: &str) -> Vec<&'a Value> {
    shown["facts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

/// The call ids of the calls of `tool`, in order.
fn calls_of(shown: &Value, tool: &str) -> Vec<(String, Value)> {
    facts(shown, "call.started")
        .into_iter()
        .filter(|f| f["data"]["tool_name"] == tool)
        .map(|f| {
            (
                f["call"].as_str().unwrap().to_owned(),
                f["data"]["args"].clone(),
            )
        })
        .collect()
}

fn of_call<'a>(shown: &'a Value, call: &str, kind: &str) -> Vec<&'a Value> {
    facts(shown, kind)
        .into_iter()
        .filter(|f| f["call"] == call)
        .collect()
}

/// A recorded `CallToolResult` (exactly as the server sent it) as the
/// Python client presents it: with its defaults filled in.
fn as_client_saw(result: &Value) -> Value {
    let mut r = result.clone();
    let o = r.as_object_mut().unwrap();
    o.entry("isError").or_insert(Value::Bool(false));
    o.entry("resultType").or_insert(Value::from("complete"));
    r
}

fn ended(shown: &Value, call: &str) -> Value {
    of_call(shown, call, "call.ended")[0]["data"]["outcome"].clone()
}

/// No file under `dir` holds the secret, raw or JSON-escaped.
fn assert_secret_absent(dir: &Path) {
    let escaped = serde_json::to_string(SECRET).unwrap();
    let escaped = escaped.trim_matches('"');
    let mut stack = vec![dir.to_path_buf()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            files += 1;
            let bytes = std::fs::read(&path).unwrap();
            for needle in [SECRET, escaped] {
                assert!(
                    !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                    "the secret is in {}",
                    path.display()
                );
            }
        }
    }
    assert!(files > 0, "the archive has no files");
}

#[test]
fn proxy_records_a_fastmcp_session_exactly() {
    require_python();
    let server = tests_dir().join("fastmcp_server.py");
    let server = ["python3", server.to_str().unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let direct = session("fastmcp", dir.path(), &server);
    let (through, archive) = proxied("fastmcp", dir.path(), &server);
    assert_eq!(
        through, direct,
        "the client saw something else through the proxy"
    );
    assert_eq!(direct["protocol"], "2025-11-25");
    assert_eq!(direct["cancel"], "cancelled");

    let shown = only_run(&archive);
    let run = &shown["run"];
    assert_eq!(run["state"], "completed");
    assert_eq!(run["labels"]["mcp.transport"], "stdio");
    assert!(run["labels"]["mcp.command"]
        .as_str()
        .unwrap()
        .contains("fastmcp_server.py"));

    let init = calls_of(&shown, "mcp:initialize");
    assert_eq!(init.len(), 1);
    assert_eq!(init[0].1["clientInfo"]["name"], "reel-proxy-test");
    assert_eq!(
        ended(&shown, &init[0].0)["result"]["serverInfo"]["name"],
        "reel-test-fastmcp"
    );
    let list = calls_of(&shown, "mcp:tools/list");
    assert_eq!(list.len(), 1);
    let list_end = ended(&shown, &list[0].0);
    let listed: Vec<&str> = list_end["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), direct["tools"].as_array().unwrap().len());

    // One call per tools/call, args exact, result the whole CallToolResult.
    let count = calls_of(&shown, "count");
    assert_eq!(count.len(), 1);
    assert_eq!(count[0].1, serde_json::json!({"steps": 3}));
    let start = &facts(&shown, "call.started")
        .into_iter()
        .find(|f| f["call"] == count[0].0.as_str())
        .unwrap()["data"];
    assert_eq!(start["protocol"], "mcp");
    assert_eq!(start["client_info"]["name"], "reel-proxy-test");
    assert_eq!(
        as_client_saw(&ended(&shown, &count[0].0)["result"]),
        direct["count"]
    );
    let progress: Vec<Value> = of_call(&shown, &count[0].0, "progress")
        .iter()
        .map(|f| f["data"]["payload"].clone())
        .map(|p| {
            serde_json::json!([
                p["progress"].as_f64(),
                p["total"].as_f64(),
                p["message"],
                p.as_object().unwrap().len()
            ])
        })
        .collect();
    let expected: Vec<Value> = direct["count_progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.as_object_mut().unwrap().remove("progressToken");
            serde_json::json!([
                p["progress"].as_f64(),
                p["total"].as_f64(),
                p["message"],
                p.as_object().unwrap().len()
            ])
        })
        .collect();
    assert_eq!(progress, expected);

    let shout = &calls_of(&shown, "shout")[0].0;
    let logs: Vec<(Value, Value, Value)> = of_call(&shown, shout, "log")
        .iter()
        .map(|f| {
            (
                f["data"]["level"].clone(),
                f["data"]["logger"].clone(),
                f["data"]["data"].clone(),
            )
        })
        .collect();
    let seen: Vec<(Value, Value, Value)> = direct["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["level"].clone(), l["logger"].clone(), l["data"].clone()))
        .collect();
    assert_eq!(logs, seen);

    let confirms = calls_of(&shown, "confirm");
    assert_eq!(confirms.len(), 2);
    let outcomes: Vec<Value> = confirms
        .iter()
        .map(|(c, _)| {
            assert_eq!(of_call(&shown, c, "elicit.requested").len(), 1);
            of_call(&shown, c, "elicit.answered")[0]["data"]["outcome"].clone()
        })
        .collect();
    assert_eq!(outcomes[0]["outcome"], "accept");
    assert_eq!(
        outcomes[0]["content"],
        serde_json::json!({"confirmed": true})
    );
    assert_eq!(outcomes[1]["outcome"], "decline");
    assert_eq!(
        of_call(&shown, &confirms[0].0, "elicit.requested")[0]["data"]["message"],
        "Really deploy?"
    );

    let fail = &calls_of(&shown, "fail")[0].0;
    assert_eq!(ended(&shown, fail)["result"]["isError"], true);

    let wait = &calls_of(&shown, "wait")[0].0;
    assert_eq!(of_call(&shown, wait, "cancel.requested").len(), 1);
    assert_ne!(ended(&shown, wait)["status"], "ok");

    // The planted secret: in args under `note` and `text`, scrubbed.
    let echo = &calls_of(&shown, "echo")[0];
    assert!(!echo.1.to_string().contains(SECRET));
    assert_eq!(calls_of(&shown, "echo").len(), 2);
    assert_secret_absent(&archive);
}

/// Protocol 2026-07-28: no initialize (so no `mcp:initialize`), and the
/// Python server cannot elicit over stdio there, so `confirm` answers a
/// JSON-RPC error, which ends its call with that error.
#[test]
fn proxy_records_a_2026_07_28_session_and_json_rpc_errors() {
    require_python();
    let server = tests_dir().join("fastmcp_server.py");
    let server = ["python3", server.to_str().unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let mode = "2026-07-28";
    let direct = session_in(mode, "fastmcp", dir.path(), &server);
    let (through, archive) = proxied_in(mode, "fastmcp", dir.path(), &server);
    assert_eq!(
        through, direct,
        "the client saw something else through the proxy"
    );
    assert_eq!(direct["protocol"], mode);
    let error = &direct["confirm"][0]["json_rpc_error"];
    assert!(error.is_object(), "the server refuses to elicit: {direct}");

    let shown = only_run(&archive);
    assert!(calls_of(&shown, "mcp:initialize").is_empty());
    assert_eq!(calls_of(&shown, "mcp:tools/list").len(), 1);
    let confirm = &calls_of(&shown, "confirm")[0].0;
    let outcome = ended(&shown, confirm);
    assert_eq!(outcome["status"], "error", "{outcome}");
    assert_eq!(
        outcome["error"]
            .as_str()
            .or(outcome["error"]["message"].as_str()),
        Some(
            format!(
                "json-rpc error {}: {}",
                error["code"],
                error["message"].as_str().unwrap()
            )
            .as_str()
        ),
        "{outcome}"
    );
    assert_eq!(
        of_call(&shown, &calls_of(&shown, "count")[0].0, "progress").len(),
        3
    );
    assert_secret_absent(&archive);
}

/// The proxy's own failure (an archive it cannot open) never breaks the
/// session: the client gets the same answers, and the operator is told.
#[test]
fn an_archive_that_cannot_be_opened_does_not_break_the_session() {
    require_python();
    let server = tests_dir().join("fastmcp_server.py");
    let server = ["python3", server.to_str().unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let direct = session("fastmcp", dir.path(), &server);
    // A file where the archive directory should be.
    let blocked = dir.path().join("archive");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let mut cmd = vec![
        REEL,
        "--archive",
        blocked.to_str().unwrap(),
        "mcp",
        "record",
        "--",
    ];
    cmd.extend_from_slice(&server);
    let (through, stderr) = client_run("legacy", "fastmcp", dir.path(), &cmd);
    assert_eq!(through, direct);
    assert!(
        stderr.contains("reel: the MCP session is not recorded: cannot open the archive"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&blocked).unwrap(), b"not a directory");
}

/// `@modelcontextprotocol/server-everything`, installed with npm into the
/// test target's temporary dir once (.ci/run installs node and npm).
fn everything() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("server-everything");
    let index = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !index.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "@modelcontextprotocol/server-everything",
            ])
            .current_dir(&dir)
            .output()
            .unwrap_or_else(|e| {
                panic!("npm is missing ({e}): install Node.js 18 or later with npm")
            });
        assert!(
            out.status.success(),
            "npm install @modelcontextprotocol/server-everything failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    index
}

#[test]
fn proxy_records_the_typescript_reference_server() {
    require_python();
    let index = everything();
    let server = ["node", index.to_str().unwrap(), "stdio"];
    let dir = tempfile::tempdir().unwrap();
    let direct = session("everything", dir.path(), &server);
    let (through, archive) = proxied("everything", dir.path(), &server);
    assert_eq!(
        through, direct,
        "the client saw something else through the proxy"
    );
    assert!(
        direct["env"].to_string().contains(SECRET),
        "the server's env holds the secret"
    );

    let shown = only_run(&archive);
    assert_eq!(shown["run"]["state"], "completed");
    assert_eq!(calls_of(&shown, "mcp:initialize").len(), 1);
    assert_eq!(calls_of(&shown, "mcp:tools/list").len(), 1);
    let sum = &calls_of(&shown, "get-sum")[0];
    assert_eq!(sum.1, serde_json::json!({"a": 2, "b": 40}));
    assert_eq!(
        as_client_saw(&ended(&shown, &sum.0)["result"]),
        direct["add"]
    );
    let long = &calls_of(&shown, "trigger-long-running-operation")[0].0;
    assert_eq!(
        of_call(&shown, long, "progress").len(),
        direct["long_progress"].as_array().unwrap().len()
    );
    assert_eq!(calls_of(&shown, "get-env").len(), 1);
    assert_secret_absent(&archive);
}

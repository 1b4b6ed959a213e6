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

use crate::support::{self, free_port, reel_json, require_python, wait_listening, Killed};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const REEL: &str = env!("CARGO_BIN_EXE_reel");
const SECRET: &str = "planted-4f1c9a7e2b6d8035e1a2c3b4d5e6f708";

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
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

/// The one run of the archive, as `reel show --last --json` gives it.
fn only_run(archive: &Path) -> Value {
    let runs = reel_json(archive, &["runs", "--json"]);
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "one run per proxied session: {runs:?}");
    assert!(runs[0]["run_id"].as_str().unwrap().starts_with("mcp-"));
    let shown = reel_json(archive, &["show", "--last", "--json"]);
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

    // A tool error (`isError: true`) is the call's error, said as
    // `tool error: ` and its text, with the whole result kept structured.
    let fail = &calls_of(&shown, "fail")[0].0;
    let failed = ended(&shown, fail);
    assert_eq!(failed["status"], "error", "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .starts_with("tool error: "),
        "{failed}"
    );
    assert_eq!(failed["result"]["isError"], true, "{failed}");

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

/// `reel show RUN --json`.
fn show_run(archive: &Path, run: &str) -> Value {
    reel_json(archive, &["show", run, "--json"])
}

/// The FastMCP server over streamable HTTP on a free port, with the
/// planted secret in its environment; and its endpoint.
fn fastmcp_http() -> (Killed, String) {
    let port = free_port();
    let mut server = Killed(
        Command::new("python3")
            .arg(tests_dir().join("fastmcp_server.py"))
            .args(["http", &port.to_string()])
            .env("PLANTED_TOKEN", SECRET)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(port, &mut server, "the FastMCP HTTP server");
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// `reel mcp record --listen 127.0.0.1:0 --upstream UPSTREAM` running.
struct HttpProxy {
    child: Killed,
    /// The endpoint it listens at, as it said.
    url: String,
    /// What it said on stderr up to that line (included).
    before: String,
    rest: std::thread::JoinHandle<String>,
}

impl HttpProxy {
    fn start(archive: &Path, upstream: &str, dir: &Path) -> HttpProxy {
        let mut child = Killed(
            Command::new(REEL)
                .arg("--archive")
                .arg(archive)
                .args(["mcp", "record", "--secret-env", "PLANTED_TOKEN"])
                .args(["--listen", "127.0.0.1:0", "--upstream", upstream])
                .env("PLANTED_TOKEN", SECRET)
                .env("REEL_CONFIG_DIR", dir.join("config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut stderr = std::io::BufReader::new(child.0.stderr.take().unwrap());
        let (url, before) = support::proxy_url(&mut stderr);
        assert!(url.ends_with("/mcp"), "{before}");
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
            rest
        });
        HttpProxy {
            child,
            url,
            before,
            rest,
        }
    }

    /// Interrupts it (Ctrl-C), asserts it exited 0; what it said after.
    fn stop(mut self) -> String {
        let interrupted = Command::new("kill")
            .args(["-INT", &self.child.0.id().to_string()])
            .status()
            .unwrap();
        assert!(interrupted.success());
        let status = self.child.0.wait().unwrap();
        let rest = self.rest.join().unwrap();
        assert!(status.success(), "the proxy exited {status}: {rest}");
        rest
    }
}

/// Over HTTP too, the proxy's own failure (an archive it cannot open)
/// never breaks the session: the client gets the same answers, and the
/// operator is told.
#[test]
fn http_proxy_carries_the_session_when_the_archive_cannot_be_opened() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let (_server, upstream) = fastmcp_http();
    let direct = session_in("legacy", "fastmcp", dir.path(), &[&upstream]);
    let blocked = dir.path().join("archive");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let proxy = HttpProxy::start(&blocked, &upstream, dir.path());
    assert!(
        proxy
            .before
            .contains("reel: the MCP session is not recorded: cannot open the archive"),
        "{}",
        proxy.before
    );
    let through = session_in("legacy", "fastmcp", dir.path(), &[&proxy.url]);
    assert_eq!(through, direct);
    proxy.stop();
    assert_eq!(std::fs::read(&blocked).unwrap(), b"not a directory");
}

/// `reel mcp record --listen ... --upstream ...` in front of a FastMCP
/// server over streamable HTTP (SSE responses), driven by the Python
/// client on 2025-11-25 (a session: `Mcp-Session-Id`, its `DELETE`) and on
/// 2026-07-28 (sessionless exchanges; cancellation by a closed stream).
/// The client sees the same answers through the proxy; the archive holds
/// one run per session and one for the sessionless exchanges; the planted
/// secret (tool args, the server's environment, the upstream URL's query)
/// is in no file.
#[test]
fn http_proxy_records_fastmcp_sessions_of_both_protocol_versions() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let (_server, upstream) = fastmcp_http();
    let direct_legacy = session_in("legacy", "fastmcp", dir.path(), &[&upstream]);
    let direct_modern = session_in("2026-07-28", "fastmcp", dir.path(), &[&upstream]);
    assert_eq!(direct_legacy["protocol"], "2025-11-25");
    assert_eq!(direct_modern["protocol"], "2026-07-28");

    let archive = dir.path().join("archive");
    let proxy = HttpProxy::start(&archive, &format!("{upstream}?key={SECRET}"), dir.path());
    assert!(!proxy.before.contains(SECRET), "{}", proxy.before);
    let through_legacy = session_in("legacy", "fastmcp", dir.path(), &[&proxy.url]);
    let through_modern = session_in("2026-07-28", "fastmcp", dir.path(), &[&proxy.url]);
    assert_eq!(
        through_legacy, direct_legacy,
        "2025-11-25 through the proxy"
    );
    assert_eq!(
        through_modern, direct_modern,
        "2026-07-28 through the proxy"
    );
    // Ctrl-C stops the proxy; every run is ended first.
    let rest = proxy.stop();
    assert!(!rest.contains(SECRET), "{rest}");

    let runs = reel_json(&archive, &["runs", "--json"]);
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(
        runs.len(),
        2,
        "a run per session, one sessionless: {runs:?}"
    );
    let mut legacy = None;
    let mut modern = None;
    for run in runs {
        let shown = show_run(&archive, run["run_id"].as_str().unwrap());
        let labels = &shown["run"]["labels"];
        assert_eq!(labels["mcp.transport"], "streamable-http");
        assert_eq!(labels["mcp.upstream"], upstream.as_str());
        assert_eq!(shown["run"]["state"], "completed", "{}", shown["run"]);
        if labels["mcp.session"].is_string() {
            legacy = Some(shown);
        } else {
            modern = Some(shown);
        }
    }
    let (legacy, modern) = (
        legacy.expect("a session run"),
        modern.expect("a sessionless run"),
    );

    // 2025-11-25: a session recorded as on stdio.
    assert_eq!(calls_of(&legacy, "mcp:initialize").len(), 1);
    assert_eq!(calls_of(&legacy, "mcp:tools/list").len(), 1);
    let count = &calls_of(&legacy, "count")[0];
    assert_eq!(count.1, serde_json::json!({"steps": 3}));
    assert_eq!(of_call(&legacy, &count.0, "progress").len(), 3);
    assert_eq!(
        as_client_saw(&ended(&legacy, &count.0)["result"]),
        direct_legacy["count"]
    );
    let shout = &calls_of(&legacy, "shout")[0].0;
    assert_eq!(of_call(&legacy, shout, "log").len(), 2);
    let confirms = calls_of(&legacy, "confirm");
    let outcomes: Vec<Value> = confirms
        .iter()
        .map(|(c, _)| {
            of_call(&legacy, c, "elicit.answered")[0]["data"]["outcome"]["outcome"].clone()
        })
        .collect();
    assert_eq!(outcomes, ["accept", "decline"]);
    let wait = &calls_of(&legacy, "wait")[0].0;
    assert_eq!(of_call(&legacy, wait, "cancel.requested").len(), 1);
    // Aborted, or the error the server may still answer the cancelled
    // request with (the protocol allows either; which comes first is
    // timing).
    let outcome = ended(&legacy, wait);
    assert_ne!(outcome["status"], "ok", "{outcome}");

    // 2026-07-28: sessionless exchanges; the client's identity from each
    // request's `_meta`; a closed stream is the cancellation.
    assert!(calls_of(&modern, "mcp:initialize").is_empty());
    assert!(!calls_of(&modern, "mcp:tools/list").is_empty());
    let count = &calls_of(&modern, "count")[0];
    assert_eq!(of_call(&modern, &count.0, "progress").len(), 3);
    let start = &of_call(&modern, &count.0, "call.started")[0]["data"];
    assert_eq!(start["client_info"]["name"], "reel-proxy-test");
    let confirm = &calls_of(&modern, "confirm")[0].0;
    assert_eq!(ended(&modern, confirm)["status"], "error");
    let wait = &calls_of(&modern, "wait")[0].0;
    assert_eq!(of_call(&modern, wait, "cancel.requested").len(), 1);
    assert_eq!(ended(&modern, wait)["status"], "aborted");
    assert_eq!(calls_of(&modern, "token").len(), 1);
    assert_secret_absent(&archive);
}

/// A server that never exits after the client hung up: the proxy closes
/// its stdin, gives it the grace (`--exit-grace`), then kills it and says
/// so; the session's run still ends `completed`.
#[test]
fn a_server_that_never_exits_is_killed_after_the_grace() {
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let pidfile = dir.path().join("server.pid");
    // It says it is up (after writing its pid), reads its input to the
    // end, then sleeps for an hour.
    let script = format!(
        "echo $$ > '{}'; echo '{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":\"up\"}}}}'; cat >/dev/null; exec sleep 3600",
        pidfile.display()
    );
    let mut proxy = Command::new(REEL)
        .arg("--archive")
        .arg(&archive)
        .args(["mcp", "record", "--exit-grace", "0.5", "--", "sh", "-c"])
        .arg(&script)
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(proxy.stdout.take().unwrap());
    let mut up = String::new();
    stdout.read_line(&mut up).unwrap();
    assert!(up.contains("\"up\""), "{up}");
    let mut stdin = proxy.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\",\"arguments\":{}}}\n")
        .unwrap();
    drop(stdin);
    let out = proxy.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(
        stderr.contains("reel: the MCP server had not exited 0.5 s after the session ended (its stdin closed): killed it"),
        "{stderr}"
    );
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    assert!(
        !Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "the server (pid {pid}) still runs"
    );
    let shown = only_run(&archive);
    assert_eq!(shown["run"]["state"], "completed");
    let slow = &calls_of(&shown, "slow")[0].0;
    assert_eq!(ended(&shown, slow)["status"], "error");
}

/// Every page of a `tools/list` (cursor pagination) is recorded, not only
/// the first; on 2026-07-28 a call's client identity (and so its
/// platform) comes from the request's `_meta`, and a call's input-required
/// rounds are one call with its elicitation.
#[test]
fn every_tools_list_page_and_the_meta_client_are_recorded() {
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let mut proxy = Command::new(REEL)
        .arg("--archive")
        .arg(&archive)
        .args(["mcp", "record", "--", "python3"])
        .arg(tests_dir().join("paging_server.py"))
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = proxy.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(proxy.stdout.take().unwrap());
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let requests = [
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "page-2", "_meta": meta}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "first", "arguments": {"n": 1}, "_meta": meta}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "confirm", "arguments": {"x": 1}, "_meta": meta}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "confirm", "arguments": {"x": 1}, "_meta": meta,
            "requestState": "state-1",
            "inputResponses": {"ask": {"action": "accept", "content": {"ok": true}}},
        }}),
    ];
    let mut answers = Vec::new();
    for request in &requests {
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        answers.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    drop(stdin);
    let out = proxy.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(answers[1]["result"]["tools"][0]["name"], "second");
    assert_eq!(
        answers[2]["result"]["content"][0]["text"],
        "hello claude-code"
    );

    let shown = only_run(&archive);
    let lists = calls_of(&shown, "mcp:tools/list");
    assert_eq!(lists.len(), 2, "both pages: {lists:?}");
    assert_eq!(lists[1].1["cursor"], "page-2");
    let names: Vec<Value> = lists
        .iter()
        .map(|(c, _)| ended(&shown, c)["result"]["tools"][0]["name"].clone())
        .collect();
    assert_eq!(names, ["first", "second"]);
    let call = &calls_of(&shown, "first")[0].0;
    let start = &of_call(&shown, call, "call.started")[0]["data"];
    assert_eq!(start["client_info"]["name"], "claude-code");
    assert_eq!(start["client_info"]["version"], "2.1.0");
    assert_eq!(start["platform"], "claude");

    // Multi round-trip (2026-07-28): both rounds are one call, whose
    // question is the input request and whose answer came with the next
    // round.
    assert_eq!(answers[3]["result"]["resultType"], "input_required");
    assert_eq!(
        answers[4]["result"]["content"][0]["text"],
        "answered accept"
    );
    let confirms = calls_of(&shown, "confirm");
    assert_eq!(
        confirms.len(),
        1,
        "one call across the rounds: {confirms:?}"
    );
    let confirm = &confirms[0].0;
    let asked = of_call(&shown, confirm, "elicit.requested");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["data"]["message"], "Really?");
    let answered = of_call(&shown, confirm, "elicit.answered");
    assert_eq!(answered[0]["data"]["outcome"]["outcome"], "accept");
    assert_eq!(
        answered[0]["data"]["outcome"]["content"],
        serde_json::json!({"ok": true})
    );
    let outcome = ended(&shown, confirm);
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["result"]["content"][0]["text"], "answered accept");
}

/// A bad `--upstream` is bad input (exit 64) naming the flag and what to
/// give instead.
#[test]
fn a_bad_upstream_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    for (url, says) in [
        ("https://mcp.test/mcp", "https is not supported"),
        ("mcp.test:8000", "not an http:// URL"),
    ] {
        let out = Command::new(REEL)
            .arg("--archive")
            .arg(dir.path().join("archive"))
            .args([
                "mcp",
                "record",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                url,
            ])
            .env("REEL_CONFIG_DIR", dir.path().join("config"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{stderr}");
        assert!(
            stderr.contains("--upstream") && stderr.contains(says),
            "{stderr}"
        );
    }
}

/// `--secret-env NAME` with `NAME` unset fails closed: the proxy would
/// otherwise record the secret in clear should it appear. It refuses to
/// start (usage, 64), names the variable and says what to do, and neither
/// the server nor the archive is touched.
#[test]
fn an_unset_secret_env_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let marker = dir.path().join("server-ran");
    let out = Command::new(REEL)
        .arg("--archive")
        .arg(&archive)
        .args(["mcp", "record", "--secret-env", "REEL_TEST_NEVER_SET", "--"])
        .arg("touch")
        .arg(&marker)
        .env_remove("REEL_TEST_NEVER_SET")
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("--secret-env REEL_TEST_NEVER_SET: the variable is not set")
            && stderr.contains("nothing was started"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the server was not started");
    assert!(!archive.exists(), "the archive was not touched");
}

/// `reel mcp record` with the client's one request on stdin and `server`
/// as the server: (exit code, stderr, the archive).
fn record_once(dir: &Path, server: &[&str]) -> (Option<i32>, String, PathBuf) {
    let archive = dir.join("archive");
    let mut child = Command::new(REEL)
        .arg("--archive")
        .arg(&archive)
        .args(["mcp", "record", "--"])
        .args(server)
        .env("REEL_CONFIG_DIR", dir.join("config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        archive,
    )
}

/// A server that fails at once is said to have failed, with its code,
/// which is reel's exit code: "recorded MCP session" alone read as
/// success. A program that does not exist is named.
#[test]
fn a_server_that_fails_or_is_missing_is_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr, _) = record_once(dir.path(), &["sh", "-c", "exit 3"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("reel: the MCP server sh exited with code 3"),
        "{stderr}"
    );
    let missing = dir.path().join("no-such-server");
    let (code, stderr, _) = record_once(dir.path(), &[missing.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot start the MCP server {}: no such program; check the command after `--`",
            missing.display()
        )),
        "{stderr}"
    );
}

/// A line on the server's stdout that is not JSON is kept in the record
/// (a call `mcp:unmatched` holding it, an anomaly of the run) and said in
/// reel's voice, escaped (tests/banner_server.py is the real server's case):
/// before, a tracing-style WARN hid the line and the archive kept no trace
/// of it.
#[test]
fn a_line_that_is_not_json_is_recorded_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("lines");
    std::fs::write(
        &lines,
        "hello \u{1b}[31mred\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n",
    )
    .unwrap();
    let (code, stderr, archive) = record_once(dir.path(), &["cat", lines.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("reel: the server wrote a line that is not JSON")
            && stderr.contains("hello")
            && stderr.contains("recorded as an anomaly of the run (mcp:unmatched)"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "escaped: {stderr:?}");
    let shown = reel_json(&archive, &["show", "--last", "--json"]);
    let unmatched = calls_of(&shown, "mcp:unmatched");
    assert_eq!(unmatched.len(), 1, "{shown}");
    assert_eq!(unmatched[0].1["message"], "hello \u{1b}[31mred");
    assert_eq!(unmatched[0].1["from"], "server");
}

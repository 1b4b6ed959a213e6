//! `reel mcp mock` and `reel mcp verify` with real MCP clients and servers:
//! the official Python `mcp` client against the mock, and verify against a
//! live Python FastMCP (`MCPServer`) server. The tapes are recorded in the
//! proxy's shape (the book's "MCP servers and clients") by the real recorder
//! and exported by `reel export`.
//!
//! Without python3 and the `mcp` package the tests fail, saying how to
//! install them: `pip install -r mcp/tests/requirements.txt`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use reel::context::{Elicitation, ToolContext, ToolError};
use reel::fact::{ClientInfo, ElicitOutcome, Level, RunStatus};
use reel_archive::FingerprintKey;
use reel_mcp::verify::LineClient;
use reel_recorder::{Recorder, RecorderConfig, RunStart, ScriptedElicitor};
use serde_json::{json, Value};

use crate::support::{reel_command, require_python};

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

pub(crate) struct Dirs {
    _tmp: tempfile::TempDir,
    pub(crate) archive: PathBuf,
    pub(crate) config: PathBuf,
    pub(crate) tape: PathBuf,
}

pub(crate) fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    Dirs {
        archive: tmp.path().join("archive"),
        config: tmp.path().join("config"),
        tape: tmp.path().join("session.tape.jsonl"),
        _tmp: tmp,
    }
}

fn reel(d: &Dirs, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = reel_command(&d.config);
    cmd.arg("--archive").arg(&d.archive).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the reel binary runs")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn recorder(d: &Dirs) -> Recorder {
    Recorder::open(
        &d.archive,
        RecorderConfig {
            fingerprint_key: FingerprintKey::Key([7; 32]),
            serve_live: false,
            ..RecorderConfig::default()
        },
    )
    .await
    .unwrap()
}

fn export(d: &Dirs, run_id: &str) {
    let out = reel(d, &["export", run_id, "-o", d.tape.to_str().unwrap()], &[]);
    assert!(
        out.status.success(),
        "export: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn text_result(text: &str, structured: Option<Value>) -> Value {
    let mut r = json!({"content": [{"type": "text", "text": text}], "isError": false});
    if let Some(s) = structured {
        r["structuredContent"] = s;
    }
    r
}

/// A session in the proxy's shape, recorded with the real recorder as the
/// proxy records one: the exchanges, then each tools/call with its
/// progress, log and elicitation facts filed through the call's context.
pub(crate) fn record_mock_session(d: &Dirs) -> String {
    let run_id = "mcp-0123456789abcdef0123456789abcdef".to_owned();
    runtime().block_on(async {
        let recorder = recorder(d).await;
        let run = recorder
            .start_run(
                RunStart::new(run_id.clone())
                    .label("mcp.transport", "stdio")
                    .label("mcp.command", "recorded-server --flag"),
            )
            .await
            .unwrap();
        let client = ClientInfo {
            name: "fixture-client".into(),
            version: Some("1.0".into()),
            title: None,
        };
        let init = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": false}, "logging": {}},
            "serverInfo": {"name": "recorded-server", "version": "1.2.3"},
            "instructions": "recorded instructions",
        });
        let params = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "fixture-client", "version": "1.0"},
        });
        let exchange = |name: &str, args: Value, result: Value| {
            run.call(name, args)
                .protocol("mcp")
                .invoke(move |_ctx: ToolContext, _: Value| async move { Ok::<_, ToolError>(result) })
        };
        exchange("mcp:initialize", params, init).await.unwrap();
        let object = json!({"type": "object"});
        let tools = json!({"tools": [
            {"name": "add", "inputSchema": object},
            {"name": "count", "inputSchema": object},
            {"name": "next", "inputSchema": object},
            {"name": "confirm", "inputSchema": object},
        ]});
        exchange("mcp:tools/list", json!({}), tools).await.unwrap();
        let call = |name: &str, args: Value| {
            run.call(name, args).protocol("mcp").client_info(client.clone())
        };
        // A call with other arguments first: the miss below must name the
        // closest call, not the first recorded one.
        call("add", json!({"a": 10, "b": 20}))
            .invoke(|_ctx: ToolContext, _: Value| async move {
                Ok::<_, ToolError>(text_result("30", Some(json!({"result": 30}))))
            })
            .await
            .unwrap();
        call("add", json!({"a": 2, "b": 3}))
            .invoke(|_ctx: ToolContext, _: Value| async move {
                Ok::<_, ToolError>(text_result("5", Some(json!({"result": 5}))))
            })
            .await
            .unwrap();
        call("count", json!({"steps": 2}))
            .invoke(|ctx: ToolContext, _: Value| async move {
                ctx.set_logger("counter");
                ctx.progress(json!({"progress": 1, "total": 2, "message": "step 1"}));
                ctx.log(Level::Info, json!("counted 1"));
                ctx.progress(json!({"progress": 2, "total": 2, "message": "step 2"}));
                ctx.log(Level::Warning, json!({"done": true}));
                Ok::<_, ToolError>(text_result("counted to 2", None))
            })
            .await
            .unwrap();
        for n in ["1", "2"] {
            call("next", json!({}))
                .invoke(move |_ctx: ToolContext, _: Value| async move {
                    Ok::<_, ToolError>(text_result(n, None))
                })
                .await
                .unwrap();
        }
        call("confirm", json!({"action": "deploy"}))
            .elicitor(Arc::new(ScriptedElicitor::new([ElicitOutcome::Accept {
                content: json!({"confirmed": true}),
            }])))
            .invoke(|ctx: ToolContext, _: Value| async move {
                let schema = json!({"type": "object", "properties": {"confirmed": {"type": "boolean"}}, "required": ["confirmed"]});
                let answer = ctx
                    .elicit(Elicitation::form("Really deploy?", schema))
                    .await
                    .map_err(ToolError::msg)?;
                assert!(matches!(answer.outcome, ElicitOutcome::Accept { .. }));
                Ok::<_, ToolError>(text_result("deploy: done", None))
            })
            .await
            .unwrap();
        // A second question, for the rounds a 2026-07-28 client drives by hand.
        call("confirm", json!({"action": "rollback"}))
            .elicitor(Arc::new(ScriptedElicitor::new([ElicitOutcome::Accept {
                content: json!({"confirmed": false}),
            }])))
            .invoke(|ctx: ToolContext, _: Value| async move {
                let schema = json!({"type": "object", "properties": {"confirmed": {"type": "boolean"}}});
                ctx.elicit(Elicitation::form("Really roll back?", schema))
                    .await
                    .map_err(ToolError::msg)?;
                Ok::<_, ToolError>(text_result("rollback: done", None))
            })
            .await
            .unwrap();
        run.end(RunStatus::Completed).await.unwrap();
        recorder.shutdown().await.unwrap();
    });
    export(d, &run_id);
    run_id
}

/// The Python client's report of a session with `reel mcp mock TAPE`, in
/// a client mode (`legacy` or `2026-07-28`).
/// What the Python client reports, and what the mock (its child) said on
/// standard error.
pub(crate) fn mock_report(d: &Dirs, mode: &str) -> (Value, String) {
    let out = Command::new("python3")
        .arg(tests_dir().join("mcp_mock_client.py"))
        .arg(env!("CARGO_BIN_EXE_reel"))
        .arg(&d.tape)
        .env("REEL_CONFIG_DIR", &d.config)
        .env("MCP_MODE", mode)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// On 2026-07-28 the recorded elicitation is an input-required round (its
/// `requestState` sealed by the mock): the Python client answers it, the
/// next round resumes the replay, and the recorded result follows.
/// Matching and misses are as on 2025-11-25.
#[test]
fn the_mock_replays_an_elicitation_as_input_required_rounds_on_2026_07_28() {
    require_python();
    let d = dirs();
    record_mock_session(&d);
    let (report, _) = mock_report(&d, "2026-07-28");
    assert_eq!(report["protocol"], "2026-07-28");
    assert_eq!(report["confirm"]["text"], json!(["deploy: done"]));
    assert_eq!(report["questions"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["questions"][0]["message"], "Really deploy?");
    assert_eq!(
        report["questions"][0]["requestedSchema"]["properties"]["confirmed"]["type"],
        "boolean"
    );
    assert_eq!(
        report["add"],
        json!({"isError": false, "text": ["5"], "structured": {"result": 5}})
    );
    assert_eq!(report["next"], json!([["1"], ["2"]]));
    assert_eq!(report["changed"]["data"]["pointer"], "/b");

    // The rounds by hand: the first is input-required with a sealed state;
    // a forged state is refused; the genuine one with the answer gives the
    // recorded result; the same state again is refused.
    let rounds = &report["rounds"];
    assert_eq!(rounds["first"]["resultType"], "input_required", "{rounds}");
    assert_eq!(rounds["first"]["message"], "Really roll back?");
    assert_eq!(rounds["forged"]["code"], -32602, "{rounds}");
    assert!(
        rounds["forged"]["message"]
            .as_str()
            .unwrap()
            .contains("seal does not hold"),
        "{rounds}"
    );
    assert_eq!(rounds["final"]["text"], json!(["rollback: done"]));
    assert_eq!(rounds["replayed"]["code"], -32602, "{rounds}");
}

#[test]
fn the_mock_answers_the_python_client_from_the_tape() {
    require_python();
    let d = dirs();
    record_mock_session(&d);
    let (report, said) = mock_report(&d, "legacy");
    assert_eq!(report["protocol"], "2025-11-25");
    assert_eq!(report["server"]["name"], "recorded-server");
    assert_eq!(report["server"]["version"], "1.2.3");
    assert_eq!(report["tools"], json!(["add", "count", "next", "confirm"]));
    assert_eq!(
        report["add"],
        json!({"isError": false, "text": ["5"], "structured": {"result": 5}})
    );
    assert_eq!(report["count"]["text"], json!(["counted to 2"]));
    let seen: Vec<Value> = report["count_notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let mut p = n["params"].clone();
            p.as_object_mut().unwrap().remove("_meta");
            json!([n["method"], p])
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            json!(["notifications/progress", {"progressToken": "tok-1", "progress": 1.0, "total": 2.0, "message": "step 1"}]),
            json!(["notifications/message", {"level": "info", "logger": "counter", "data": "counted 1"}]),
            json!(["notifications/progress", {"progressToken": "tok-1", "progress": 2.0, "total": 2.0, "message": "step 2"}]),
            json!(["notifications/message", {"level": "warning", "logger": "counter", "data": {"done": true}}]),
        ]
    );
    // Identical calls are answered in recorded order, then no more.
    assert_eq!(report["next"], json!([["1"], ["2"]]));
    let again = &report["next_again"];
    assert_eq!(again["code"], -32602, "{again}");
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .contains("all already answered"),
        "{again}"
    );
    // The recorded question is asked, and the recorded result follows.
    assert_eq!(report["confirm"]["text"], json!(["deploy: done"]));
    assert_eq!(report["questions"][0]["message"], "Really deploy?");

    // A changed argument: the named miss, the closest call and the field.
    let changed = &report["changed"];
    assert_eq!(changed["code"], -32602, "{changed}");
    let message = changed["message"].as_str().unwrap();
    assert!(message.contains("closest is call c4 `add`"), "{message}");
    assert!(message.contains("/b: expected 3, got 4"), "{message}");
    assert_eq!(changed["data"]["closest"]["args"], json!({"a": 2, "b": 3}));
    assert_eq!(changed["data"]["pointer"], "/b");
    assert_eq!(changed["data"]["expected"], 3);
    assert_eq!(changed["data"]["got"], 4);

    let unknown = report["unknown"]["message"].as_str().unwrap();
    assert!(
        unknown.contains("nearest recorded tool is `add`"),
        "{unknown}"
    );
    // The operator reads each miss in reel's words, never rmcp's raw
    // `ErrorData { .. }`.
    assert!(
        said.contains("reel: mock: the record has no call of `"),
        "{said}"
    );
    assert!(!said.contains("ErrorData"), "{said}");
}

/// Records a session against the live FastMCP server, in the proxy's
/// shape: each request goes to the server, and its answer and the
/// notifications that came with it are filed as the call's facts.
fn record_fastmcp_session(d: &Dirs) -> String {
    let run_id = "mcp-fedcba9876543210fedcba9876543210".to_owned();
    let server = tests_dir().join("fastmcp_verify_server.py");
    runtime().block_on(async {
        let recorder = recorder(d).await;
        let run = recorder
            .start_run(
                RunStart::new(run_id.clone())
                    .label("mcp.transport", "stdio")
                    .label("mcp.command", "python3 fastmcp_verify_server.py"),
            )
            .await
            .unwrap();
        let mut live =
            LineClient::spawn("python3", &[server.to_str().unwrap().to_owned()]).unwrap();
        let questions: Arc<Mutex<Vec<Value>>> = Arc::default();
        let asked = questions.clone();
        let mut answer = move |method: &str, params: &Value| -> Result<Value, Value> {
            assert_eq!(method, "elicitation/create");
            asked.lock().unwrap().push(params.clone());
            Ok(json!({"action": "accept", "content": {"confirmed": true}}))
        };
        let params = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "fixture-client", "version": "1.0"},
        });
        let (init, _) = live
            .request("initialize", params.clone(), &mut answer)
            .await
            .unwrap();
        let init = init.unwrap();
        run.call("mcp:initialize", params)
            .protocol("mcp")
            .invoke(move |_ctx: ToolContext, _: Value| async move { Ok::<_, ToolError>(init) })
            .await
            .unwrap();
        live.notify("notifications/initialized", json!({}))
            .await
            .unwrap();
        let (list, _) = live
            .request("tools/list", json!({}), &mut answer)
            .await
            .unwrap();
        let list = list.unwrap();
        run.call("mcp:tools/list", json!({}))
            .protocol("mcp")
            .invoke(move |_ctx: ToolContext, _: Value| async move { Ok::<_, ToolError>(list) })
            .await
            .unwrap();
        let calls = [
            ("count", json!({"steps": 2})),
            ("add", json!({"a": 2, "b": 3})),
            ("confirm", json!({"action": "deploy"})),
        ];
        for (n, (tool, args)) in calls.into_iter().enumerate() {
            let request = json!({"name": tool, "arguments": args, "_meta": {"progressToken": n}});
            let (response, received) = live
                .request("tools/call", request, &mut answer)
                .await
                .unwrap();
            let asked: Vec<Value> = std::mem::take(&mut *questions.lock().unwrap());
            let elicitor = Arc::new(ScriptedElicitor::new(asked.iter().map(|_| {
                ElicitOutcome::Accept {
                    content: json!({"confirmed": true}),
                }
            })));
            run.call(tool, args)
                .protocol("mcp")
                .elicitor(elicitor)
                .invoke(move |ctx: ToolContext, _: Value| async move {
                    for q in asked {
                        let message = q["message"].as_str().unwrap_or_default().to_owned();
                        ctx.elicit(Elicitation::form(message, q["requestedSchema"].clone()))
                            .await
                            .map_err(ToolError::msg)?;
                    }
                    for note in received.notifications {
                        let mut p = note["params"].clone();
                        match note["method"].as_str() {
                            Some("notifications/progress") => {
                                p.as_object_mut().unwrap().remove("progressToken");
                                ctx.progress(p);
                            }
                            Some("notifications/message") => {
                                if let Some(logger) = p["logger"].as_str() {
                                    ctx.set_logger(logger);
                                }
                                let level: Level =
                                    serde_json::from_value(p["level"].clone()).unwrap();
                                ctx.log(level, p["data"].clone());
                            }
                            _ => {}
                        }
                    }
                    response.map_err(|e| {
                        ToolError::msg(format!(
                            "json-rpc error {}: {}",
                            e["code"],
                            e["message"].as_str().unwrap_or_default()
                        ))
                    })
                })
                .await
                .unwrap();
        }
        live.close().await.unwrap();
        run.end(RunStatus::Completed).await.unwrap();
        recorder.shutdown().await.unwrap();
    });
    export(d, &run_id);
    run_id
}

#[test]
fn verify_passes_an_unchanged_server_and_names_a_changed_behaviour() {
    require_python();
    let d = dirs();
    let run_id = record_fastmcp_session(&d);
    let server = tests_dir().join("fastmcp_verify_server.py");
    let server = server.to_str().unwrap();
    let tape = d.tape.to_str().unwrap();

    let same = reel(&d, &["mcp", "verify", tape, "--", "python3", server], &[]);
    let stdout = String::from_utf8_lossy(&same.stdout);
    assert_eq!(
        same.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&same.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "call c3 `count`: matched",
            "call c4 `add`: matched",
            "call c5 `confirm`: matched",
            &format!("all 3 calls matched ({tape})"),
        ],
        "{stdout}"
    );

    // The run in the archive works as well as the tape.
    let by_run = reel(
        &d,
        &["mcp", "verify", &run_id, "--", "python3", server],
        &[],
    );
    assert_eq!(
        by_run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&by_run.stdout)
    );

    let changed = reel(
        &d,
        &["mcp", "verify", tape, "--", "python3", server],
        &[("REEL_TEST_BREAK", "add")],
    );
    let stdout = String::from_utf8_lossy(&changed.stdout);
    assert_eq!(changed.status.code(), Some(1), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[0], "call c3 `count`: matched");
    // The call and the field, in the replay's wording, at the recorded
    // call.ended's seq.
    assert!(
        lines[1].starts_with("call c4 `add`, result (seq ")
            && lines[1].ends_with(
                r#"), call.ended:/outcome/result/content/0/text: expected "5", got "6""#
            ),
        "{stdout}"
    );
    assert_eq!(lines[2], "call c5 `confirm`: matched");
    assert!(lines[3].starts_with("1 of 3 calls diverged"), "{stdout}");
    insta::assert_snapshot!("verify_changed_add", stdout.replace(tape, "[TAPE]"));

    // A changed progress message: named at the recorded progress fact.
    let progress = reel(
        &d,
        &["mcp", "verify", tape, "--", "python3", server],
        &[("REEL_TEST_BREAK", "count")],
    );
    let stdout = String::from_utf8_lossy(&progress.stdout);
    assert_eq!(progress.status.code(), Some(1), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("call c3 `count`, message 1 (seq ")
            && lines[0]
                .ends_with(r#"), progress:/payload/message: expected "step 1", got "step 1 of 2""#),
        "{stdout}"
    );
    assert_eq!(lines[1], "call c4 `add`: matched");
    // The path of the divergence line pasted into `--ignore` passes, and
    // so does the kind alone.
    for ignore in ["progress:/payload/message", "progress"] {
        let ignored = reel(
            &d,
            &[
                "mcp", "verify", tape, "--ignore", ignore, "--", "python3", server,
            ],
            &[("REEL_TEST_BREAK", "count")],
        );
        assert_eq!(
            ignored.status.code(),
            Some(0),
            "--ignore {ignore}: {}",
            String::from_utf8_lossy(&ignored.stdout)
        );
    }

    // The changed field ignored: the rest still matches.
    let ignored = reel(
        &d,
        &[
            "mcp",
            "verify",
            tape,
            "--ignore",
            "call.ended:/outcome/result/content",
            "--ignore",
            "/outcome/result/structuredContent",
            "--",
            "python3",
            server,
        ],
        &[("REEL_TEST_BREAK", "add")],
    );
    assert_eq!(
        ignored.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ignored.stdout)
    );
}

#[test]
fn verify_drives_the_mock_and_bad_input_exits_64() {
    let d = dirs();
    record_mock_session(&d);
    let tape = d.tape.to_str().unwrap();
    // The mock replays its own tape: every call matches, the question
    // answered from the tape.
    let out = reel(
        &d,
        &[
            "mcp",
            "verify",
            tape,
            "--",
            env!("CARGO_BIN_EXE_reel"),
            "mcp",
            "mock",
            tape,
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("all 7 calls matched"), "{stdout}");

    let missing = reel(&d, &["mcp", "verify", "no-such-run", "--", "true"], &[]);
    assert_eq!(
        missing.status.code(),
        Some(64),
        "bad input is a usage error"
    );
    assert!(String::from_utf8_lossy(&missing.stderr).contains("neither a tape file nor a run"));
    let bad = reel(&d, &["mcp", "mock", tape, "--ignore", "nonce"], &[]);
    assert_eq!(bad.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("a JSON pointer, which starts with `/`"));
}

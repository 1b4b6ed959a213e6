//! The Tasks extension (SEP-2663) through `reel mcp record --listen` and
//! `reel mcp mock --listen`, with a peer we did not write: the
//! conformance suite's client (`@modelcontextprotocol/conformance`, its
//! task scenarios), against tasks_server.py (a hand-written sessionless
//! server of the suite's task fixtures: no framework on the registry
//! speaks this wire).
//!
//! - Every task scenario the suite lists passes against the server
//!   directly, and through the proxy every check ends alike.
//! - The record: a `tools/call` that became a task is one call, its
//!   creation and each `tasks/*` exchange a `call.output` at the stage of
//!   its method, ended by the terminal status (the inlined result, the
//!   inlined error, or cancelled).
//! - The mock of that record: every task scenario ends against it as
//!   against the server (a JSON-RPC error with its `data`: the suite's
//!   -32021 with `requiredCapabilities`), and a raw client polling
//!   `tasks/get` gets the recorded statuses in order, the last with the
//!   recorded result.
//! - The same with a server framework we did not write either: FastMCP
//!   4.1 with `fastmcp-tasks` (tests/tasks/fastmcp_tasks_server.py, in
//!   the virtualenv `cargo xtask provision` makes): every task scenario
//!   ends alike directly and through the proxy, and `tasks-lifecycle`
//!   alike against the mock of the record.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::mcp_conformance::{differences, listed, proxy, run_suite, suite, Outcome, Suite};
use crate::mcp_mock_http::{message, raw, Mock};
use crate::support::{free_port, reel_json, wait_listening, Killed};

/// tasks_server.py on a free port, and its endpoint.
pub(crate) fn task_server() -> (Killed, String) {
    let port = free_port();
    let mut server = Killed(
        Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tasks_server.py"))
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    wait_listening(port, &mut server, "tasks_server.py");
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// The Python of the FastMCP tasks virtualenv: `REEL_FASTMCP_TASKS`,
/// else `$XDG_CACHE_HOME/reel/fastmcp-tasks` (`~/.cache` without it).
/// Fails, saying how to make it, when it is missing.
fn fastmcp_tasks_python() -> PathBuf {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let dir = set("REEL_FASTMCP_TASKS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            set("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(set("HOME").unwrap_or_else(|| "/root".into())).join(".cache")
                })
                .join("reel/fastmcp-tasks")
        });
    let python = dir.join("bin/python");
    assert!(
        python.exists(),
        "no FastMCP tasks virtualenv at {}: run `cargo xtask provision` (or set \
         REEL_FASTMCP_TASKS to a virtualenv with cli/tests/tasks/requirements.txt)",
        dir.display()
    );
    python
}

/// tests/tasks/fastmcp_tasks_server.py on a free port, and its endpoint.
fn fastmcp_task_server() -> (Killed, String) {
    let port = free_port();
    let mut server = Killed(
        Command::new(fastmcp_tasks_python())
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tasks/fastmcp_tasks_server.py"))
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Its tools' tracebacks (the failing ones) are no news.
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(port, &mut server, "fastmcp_tasks_server.py");
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// The task scenarios the suite lists.
fn task_scenarios(suite: &crate::mcp_conformance::Suite) -> Vec<String> {
    let scenarios: Vec<String> = listed(suite)
        .into_iter()
        .filter(|s| s.starts_with("tasks-"))
        .collect();
    assert!(
        scenarios.iter().any(|s| s == "tasks-lifecycle") && scenarios.len() >= 5,
        "the suite lists too few task scenarios: {scenarios:?}"
    );
    scenarios
}

/// Interrupts `child` (SIGINT) and asserts it exited 0.
pub(crate) fn interrupt(child: &mut Killed) {
    let sent = Command::new("kill")
        .args(["-INT", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = child.0.wait().unwrap();
    assert!(status.success(), "exited {status}");
}

/// How many checks of `o` passed, of how many.
pub(crate) fn passed(o: &Outcome) -> (usize, usize) {
    let all: Vec<&String> = o.checks.values().flatten().collect();
    let ok = all
        .iter()
        .filter(|s| ***s == "SUCCESS" || ***s == "SKIPPED")
        .count();
    (ok, all.len())
}

/// Runs the suite's `selection` against `url` (results under `results`)
/// and requires every check to end as in `expected`; `what` names the
/// side and what it is compared with, for the failure. The run.
fn ends_alike(
    suite: &Suite,
    selection: &[&str],
    url: &str,
    results: &Path,
    expected: &Outcome,
    what: &str,
) -> Outcome {
    let run = run_suite(suite, selection, url, results, None);
    let differ = differences(expected, &run);
    assert!(
        differ.is_empty(),
        "{what}, the checks end otherwise:\n  {}\n{}",
        differ.join("\n  "),
        run.output
    );
    run
}

/// The one run `archive` holds.
pub(crate) fn only_run(archive: &Path) -> String {
    let runs = reel_json(archive, &["runs", "--json"]);
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0]["run_id"].as_str().unwrap().to_owned()
}

#[test]
fn the_suites_task_scenarios_pass_against_a_task_server_and_alike_through_the_proxy_and_the_mock() {
    let suite = suite();
    let scenarios = task_scenarios(&suite);
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = task_server();
    let (mut recording, proxy_url) = proxy(
        &dir.path().join("archive"),
        &url,
        &dir.path().join("config"),
    );
    let mut said = Vec::new();
    let mut directly = Vec::new();
    for scenario in &scenarios {
        let selection = ["--scenario", scenario.as_str()];
        let results = |side: &str| dir.path().join(format!("{side}-{scenario}"));
        let direct = run_suite(&suite, &selection, &url, &results("direct"), None);
        let (ok, all) = passed(&direct);
        assert_eq!(ok, all, "{scenario} directly:\n{}", direct.output);
        let proxied = ends_alike(
            &suite,
            &selection,
            &proxy_url,
            &results("proxied"),
            &direct,
            &format!("{scenario}: through `reel mcp record`, against directly"),
        );
        assert_eq!(direct.passed, proxied.passed, "{}", proxied.output);
        said.push(format!("{scenario} {ok}/{all}"));
        directly.push(direct);
    }
    println!(
        "task scenarios, directly and alike through the proxy: {}",
        said.join("; ")
    );
    interrupt(&mut recording);

    // The mock of the whole record, the scenarios run again in the same
    // order: each check ends as it did against the server.
    let mock = Mock::start(
        &dir.path().join("archive"),
        &only_run(&dir.path().join("archive")),
    );
    let mut mocked_said = Vec::new();
    for (scenario, direct) in scenarios.iter().zip(&directly) {
        let selection = ["--scenario", scenario.as_str()];
        let results = dir.path().join(format!("mocked-{scenario}"));
        let mocked = ends_alike(
            &suite,
            &selection,
            &mock.url,
            &results,
            direct,
            &format!("{scenario}: against `reel mcp mock` of the record, against the server"),
        );
        let (ok, all) = passed(&mocked);
        mocked_said.push(format!("{scenario} {ok}/{all}"));
    }
    println!(
        "task scenarios against the mock of their record: {}",
        mocked_said.join("; ")
    );
    mock.stop();
}

/// The facts of call `call` in `facts`.
pub(crate) fn of_call<'a>(facts: &'a [Value], call: &str) -> Vec<&'a Value> {
    facts.iter().filter(|f| f["call"] == call).collect()
}

/// The id of the call of `tool` whose arguments have `label`.
pub(crate) fn call_of(facts: &[Value], tool: &str, label: Option<&str>) -> String {
    facts
        .iter()
        .find(|f| {
            f["kind"] == "call.started"
                && f["data"]["tool_name"] == tool
                && label.is_none_or(|l| f["data"]["args"]["label"] == l)
        })
        .unwrap_or_else(|| panic!("no call of {tool} {label:?}"))["call"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The stages of the `call.output` facts of `facts`, in order.
pub(crate) fn stages(facts: &[&Value]) -> Vec<String> {
    facts
        .iter()
        .filter(|f| f["kind"] == "call.output")
        .map(|f| f["data"]["stage"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// One 2026-07-28 request to the server at `addr` from a client that
/// declares the tasks extension, `Mcp-Name` `name` (none when empty):
/// the response message.
pub(crate) fn ask(addr: &str, id: u64, method: &str, mut params: Value, name: &str) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-task-client", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
    });
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut headers = format!("MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n");
    if !name.is_empty() {
        headers.push_str(&format!("Mcp-Name: {name}\r\n"));
    }
    let (status, _, body) = raw(addr, "POST", &headers, Some(&body));
    assert_eq!(status, 200, "{method}: {body}");
    message(&body)
}

#[test]
fn a_task_is_one_call_in_the_record_and_the_mock_replays_its_statuses_poll_by_poll() {
    let suite = suite();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let (_server, url) = task_server();
    let lifecycle = ["--scenario", "tasks-lifecycle"];
    let direct = run_suite(&suite, &lifecycle, &url, &dir.path().join("direct"), None);
    let (mut recording, proxy_url) = proxy(&archive, &url, &dir.path().join("config"));
    ends_alike(
        &suite,
        &lifecycle,
        &proxy_url,
        &dir.path().join("proxied"),
        &direct,
        "through `reel mcp record`, against directly",
    );
    interrupt(&mut recording);

    // The record: one call per task, each exchange filed on it.
    let run = only_run(&archive);
    let shown = reel_json(&archive, &["show", &run, "--json"]);
    let facts = shown["facts"].as_array().unwrap();
    let created = call_of(facts, "slow_compute", Some("lifecycle-create"));
    let facts_of = of_call(facts, &created);
    let stages_of = stages(&facts_of);
    assert_eq!(stages_of[0], "mcp:task", "{stages_of:?}");
    assert!(
        stages_of.len() >= 3 && stages_of[1..].iter().all(|s| s == "mcp:tasks/get"),
        "{stages_of:?}"
    );
    let polls: Vec<&Value> = facts_of
        .iter()
        .filter(|f| f["data"]["stage"] == "mcp:tasks/get")
        .map(|f| &f["data"]["value"]["result"])
        .collect();
    assert_eq!(polls.last().unwrap()["status"], "completed");
    assert!(polls[0]["status"] == "working", "{polls:?}");
    assert!(
        polls.iter().all(|p| p.get("result").is_none()),
        "the inlined result is the call's end, not repeated: {polls:?}"
    );
    let ended = facts_of.last().unwrap();
    assert_eq!(ended["kind"], "call.ended");
    assert_eq!(ended["data"]["outcome"]["status"], "ok");
    let result = ended["data"]["outcome"]["result"].clone();
    assert_eq!(
        result["content"][0]["text"],
        "computed lifecycle-create in 2s"
    );
    // A tool error ends its call as one; a failed task with its error.
    let failing = of_call(facts, &call_of(facts, "failing_job", None));
    let failing_end = &failing.last().unwrap()["data"]["outcome"];
    assert_eq!(failing_end["status"], "error", "{failing_end}");
    assert_eq!(failing_end["result"]["isError"], true, "{failing_end}");
    let crashed = of_call(facts, &call_of(facts, "protocol_error_job", None));
    let crashed_end = &crashed.last().unwrap()["data"]["outcome"];
    assert_eq!(crashed_end["status"], "error", "{crashed_end}");
    assert!(
        crashed_end["error"]
            .as_str()
            .unwrap()
            .contains("-32603: the job crashed"),
        "{crashed_end}"
    );
    // tasks/cancel: one cancel.requested, the ack filed, ended cancelled.
    let cancelled = of_call(
        facts,
        &call_of(facts, "slow_compute", Some("lifecycle-cancel")),
    );
    let requested = cancelled
        .iter()
        .filter(|f| f["kind"] == "cancel.requested")
        .count();
    assert_eq!(requested, 1, "{cancelled:?}");
    assert!(stages(&cancelled).contains(&"mcp:tasks/cancel".to_owned()));
    assert_eq!(
        cancelled.last().unwrap()["data"]["outcome"]["status"],
        "aborted"
    );

    // The mock of that record: the suite's lifecycle passes as against
    // the server, and the mock ends satisfied (no call missed).
    let mock = Mock::start(&archive, &run);
    let mocked = ends_alike(
        &suite,
        &lifecycle,
        &mock.url,
        &dir.path().join("mocked"),
        &direct,
        "against `reel mcp mock` of the record, against the server",
    );
    let (ok, all) = passed(&mocked);
    assert_eq!(ok, all, "{}", mocked.output);
    println!("tasks-lifecycle against the mock of its record: {ok}/{all}");
    mock.stop();

    // Poll by poll: the recorded statuses in order, then the result.
    let mock = Mock::start(&archive, &run);
    let args =
        json!({"name": "slow_compute", "arguments": {"seconds": 2, "label": "lifecycle-create"}});
    let task = ask(&mock.addr, 1, "tools/call", args, "slow_compute");
    assert_eq!(task["result"]["resultType"], "task", "{task}");
    let task_id = task["result"]["taskId"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    for (i, recorded) in polls.iter().enumerate() {
        let poll = ask(
            &mock.addr,
            2 + i as u64,
            "tasks/get",
            json!({ "taskId": task_id }),
            &task_id,
        );
        let answer = &poll["result"];
        assert_eq!(answer["status"], recorded["status"], "poll {i}: {poll}");
        assert_eq!(answer["taskId"], task_id.as_str());
        seen.push(answer["status"].as_str().unwrap().to_owned());
        if i + 1 == polls.len() {
            assert_eq!(answer["result"], result, "{poll}");
        } else {
            assert!(answer.get("result").is_none(), "{poll}");
        }
    }
    println!("the mock's polls: {}", seen.join(", "));
    let unknown = ask(
        &mock.addr,
        99,
        "tasks/get",
        json!({"taskId": "no-such-task"}),
        "no-such-task",
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    mock.stop();
}

#[test]
fn fastmcp_tasks_end_alike_through_the_proxy_and_against_the_mock_of_their_record() {
    let suite = suite();
    let scenarios = task_scenarios(&suite);
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let (_server, url) = fastmcp_task_server();
    let (mut recording, proxy_url) = proxy(&archive, &url, &dir.path().join("config"));
    let mut said = Vec::new();
    let mut lifecycle = None;
    for scenario in &scenarios {
        let selection = ["--scenario", scenario.as_str()];
        let results = |side: &str| dir.path().join(format!("{side}-{scenario}"));
        let direct = run_suite(&suite, &selection, &url, &results("direct"), None);
        ends_alike(
            &suite,
            &selection,
            &proxy_url,
            &results("proxied"),
            &direct,
            &format!("{scenario} (FastMCP): through `reel mcp record`, against directly"),
        );
        let (ok, all) = passed(&direct);
        said.push(format!("{scenario} {ok}/{all}"));
        if scenario == "tasks-lifecycle" {
            lifecycle = Some(direct);
        }
    }
    println!(
        "FastMCP's task scenarios, directly and alike through the proxy: {}",
        said.join("; ")
    );
    interrupt(&mut recording);

    // Its record: the tasks are calls, each with its exchanges.
    let run = only_run(&archive);
    let shown = reel_json(&archive, &["show", &run, "--json"]);
    let facts = shown["facts"].as_array().unwrap();
    let created = call_of(facts, "slow_compute", Some("lifecycle-create"));
    let facts_of = of_call(facts, &created);
    let stages_of = stages(&facts_of);
    assert_eq!(stages_of[0], "mcp:task", "{stages_of:?}");
    assert!(
        stages_of[1..].iter().all(|s| s == "mcp:tasks/get"),
        "{stages_of:?}"
    );
    assert_eq!(facts_of.last().unwrap()["data"]["outcome"]["status"], "ok");

    // The mock of the record: the lifecycle ends as against FastMCP.
    let direct = lifecycle.unwrap();
    let mock = Mock::start(&archive, &run);
    let selection = ["--scenario", "tasks-lifecycle"];
    let mocked = ends_alike(
        &suite,
        &selection,
        &mock.url,
        &dir.path().join("mocked"),
        &direct,
        "against `reel mcp mock` of FastMCP's record, against FastMCP",
    );
    let (ok, all) = passed(&mocked);
    println!(
        "FastMCP's tasks-lifecycle against the mock of its record: {ok}/{all}, as against FastMCP"
    );
    mock.stop();
}

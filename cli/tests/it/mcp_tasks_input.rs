//! A task's questions (SEP-2663: `inputRequests` in a `tasks/get` answer,
//! answered by `tasks/update`'s `inputResponses`) through `reel mcp
//! record --listen` and `reel mcp mock --listen`, with the conformance
//! suite's client (`tasks-mrtr-input`) against tasks_server.py:
//!
//! - the record files each question as the call's `elicit.requested`
//!   and the client's answer as its `elicit.answered`, as an
//!   `elicitation/create`'s, beside the exchanges' stages;
//! - the mock of that record takes the same answers (the scenario ends
//!   as against the server), and a different answer is a miss: a
//!   JSON-RPC error naming the field, and the mock exits 1;
//! - `reel mcp verify` of a record with tasks follows each live task to
//!   its end (tasks_server.py over stdio), answering its question as
//!   recorded, and compares that end with the recorded one.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::mcp_conformance::{differences, proxy, run_suite, suite};
use crate::mcp_mock_http::Mock;
use crate::mcp_tasks::{ask, interrupt, of_call, only_run, passed, stages, task_server};
use crate::support::reel_json;

#[test]
fn a_tasks_questions_are_recorded_as_elicitations_and_the_mock_checks_the_answers() {
    let suite = suite();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let (_server, url) = task_server();
    let input = ["--scenario", "tasks-mrtr-input"];
    let direct = run_suite(&suite, &input, &url, &dir.path().join("direct"), None);
    let (ok, all) = passed(&direct);
    assert_eq!(ok, all, "{}", direct.output);
    let (mut recording, proxy_url) = proxy(&archive, &url, &dir.path().join("config"));
    let proxied = run_suite(
        &suite,
        &input,
        &proxy_url,
        &dir.path().join("proxied"),
        None,
    );
    let differ = differences(&direct, &proxied);
    assert!(differ.is_empty(), "{differ:?}\n{}", proxied.output);
    interrupt(&mut recording);

    // The record: the question and the client's answer, as elicitation
    // facts of the task's call, and the update among its stages.
    let run = only_run(&archive);
    let shown = reel_json(&archive, &["show", &run, "--json"]);
    let facts = shown["facts"].as_array().unwrap();
    // The scenario's confirm_delete that was answered (another is
    // cancelled while it asks: its question ends unanswered).
    let facts_of = facts
        .iter()
        .filter(|f| f["kind"] == "call.started" && f["data"]["tool_name"] == "confirm_delete")
        .map(|f| of_call(facts, f["call"].as_str().unwrap()))
        .find(|c| stages(c).contains(&"mcp:tasks/update".to_owned()))
        .expect("a confirm_delete answered through tasks/update");
    let asked: Vec<&Value> = facts_of
        .iter()
        .filter(|f| f["kind"] == "elicit.requested")
        .copied()
        .collect();
    assert_eq!(asked.len(), 1, "one question, asked once: {facts_of:?}");
    let filename = facts_of[0]["data"]["args"]["filename"].as_str().unwrap();
    assert_eq!(
        asked[0]["data"]["message"],
        format!("Delete {filename}?"),
        "{}",
        asked[0]
    );
    let answered: Vec<&Value> = facts_of
        .iter()
        .filter(|f| f["kind"] == "elicit.answered")
        .copied()
        .collect();
    assert_eq!(answered.len(), 1, "{facts_of:?}");
    let update = facts_of
        .iter()
        .find(|f| f["data"]["stage"] == "mcp:tasks/update")
        .expect("the update is among the call's stages");
    let sent = update["data"]["value"]["request"]["inputResponses"]["confirm"].clone();
    let outcome = &answered[0]["data"]["outcome"];
    assert_eq!(outcome["outcome"], sent["action"], "{outcome} vs {sent}");
    if sent["action"] == "accept" {
        assert_eq!(outcome["content"], sent["content"], "{outcome} vs {sent}");
    }
    assert!(
        stages(&facts_of).contains(&"mcp:tasks/update".to_owned()),
        "{:?}",
        stages(&facts_of)
    );
    assert_eq!(facts_of.last().unwrap()["data"]["outcome"]["status"], "ok");

    // The mock of the record: the same answers end the scenario alike.
    let mock = Mock::start(&archive, &run);
    let mocked = run_suite(&suite, &input, &mock.url, &dir.path().join("mocked"), None);
    let differ = differences(&direct, &mocked);
    assert!(differ.is_empty(), "{differ:?}\n{}", mocked.output);
    mock.stop();

    // Another answer is a miss, loud: an error naming the field, exit 1.
    let mock = Mock::start(&archive, &run);
    let args = json!({"name": "confirm_delete", "arguments": facts_of[0]["data"]["args"]});
    let task = ask(&mock.addr, 1, "tools/call", args, "confirm_delete");
    let task_id = task["result"]["taskId"].as_str().unwrap().to_owned();
    let mut other = sent.clone();
    other["action"] = json!(if sent["action"] == "decline" {
        "accept"
    } else {
        "decline"
    });
    let params = json!({"taskId": task_id, "inputResponses": {"confirm": other}});
    let refused = ask(&mock.addr, 2, "tasks/update", params, &task_id);
    let error = &refused["error"];
    assert_eq!(error["code"], -32602, "{refused}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("/confirm/action"), "{message}");
    let said = mock.stop_missed();
    println!("a different answer to the task's question: {message}\nthe mock: {said}");
}

/// Polls task `task_id` through the proxy at `addr` (ids from `id` on)
/// until its status is not `working`: that answer.
fn until_not_working(addr: &str, id: &mut u64, task_id: &str) -> Value {
    loop {
        *id += 1;
        let poll = ask(
            addr,
            *id,
            "tasks/get",
            json!({ "taskId": task_id }),
            task_id,
        );
        let answer = poll["result"].clone();
        if answer["status"] != "working" {
            return answer;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `reel mcp verify RUN -- python3 tasks_server.py --stdio` on `archive`:
/// its exit code and what it printed.
/// With `suffix`, the server's slow_compute answers otherwise (a new
/// build).
fn verify(archive: &Path, run: &str, suffix: &str) -> (Option<i32>, String) {
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tasks_server.py");
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .env("TASKS_SERVER_SUFFIX", suffix)
        .arg("--archive")
        .arg(archive)
        .args(["--color", "never", "mcp", "verify", run, "--", "python3"])
        .arg(server)
        .arg("--stdio")
        .env("REEL_CONFIG_DIR", archive.with_file_name("config"))
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), said)
}

#[test]
fn verify_follows_each_live_task_to_its_end_and_compares_that() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let (_server, url) = task_server();
    let (mut recording, proxy_url) = proxy(&archive, &url, &dir.path().join("config"));
    let addr = proxy_url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    // A 2026-07-28 client that declares tasks: its listing, a plain call,
    // a task that completes, one that asks a question, one that fails.
    let opened = ask(&addr, 1, "server/discover", json!({}), "");
    assert!(opened["result"]["capabilities"].is_object(), "{opened}");
    let mut id = 2;
    let listed = ask(&addr, id, "tools/list", json!({}), "");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    id += 1;
    let greet = json!({"name": "greet", "arguments": {"name": "Ada"}});
    assert_eq!(
        ask(&addr, id, "tools/call", greet, "greet")["result"]["resultType"],
        "complete"
    );
    let task = |tool: &str, args: Value, id: &mut u64| {
        *id += 1;
        let params = json!({"name": tool, "arguments": args});
        let created = ask(&addr, *id, "tools/call", params, tool);
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        created["result"]["taskId"].as_str().unwrap().to_owned()
    };
    let slow = task(
        "slow_compute",
        json!({"seconds": 0.3, "label": "verify"}),
        &mut id,
    );
    assert_eq!(
        until_not_working(&addr, &mut id, &slow)["status"],
        "completed"
    );
    let confirm = task("confirm_delete", json!({"filename": "a.txt"}), &mut id);
    let asking = until_not_working(&addr, &mut id, &confirm);
    assert_eq!(asking["status"], "input_required", "{asking}");
    id += 1;
    let update = json!({"taskId": confirm, "inputResponses": {
        "confirm": {"action": "accept", "content": {"confirm": true}}}});
    let acked = ask(&addr, id, "tasks/update", update, &confirm);
    assert!(acked.get("error").is_none(), "{acked}");
    let done = until_not_working(&addr, &mut id, &confirm);
    assert_eq!(
        done["result"]["content"][0]["text"], "deleted a.txt",
        "{done}"
    );
    let crashed = task("protocol_error_job", json!({}), &mut id);
    assert_eq!(
        until_not_working(&addr, &mut id, &crashed)["status"],
        "failed"
    );
    interrupt(&mut recording);
    let run = only_run(&archive);

    // The live server makes tasks of its own: each followed to its end,
    // the question answered as recorded, and every end as recorded.
    let (code, said) = verify(&archive, &run, "");
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("all 4 calls matched"), "{said}");
    println!("verify of a record with tasks: {}", said.trim());

    // A new build whose task ends otherwise: that call diverges, named by
    // the field of its end.
    let (code, said) = verify(&archive, &run, " (v2)");
    assert_eq!(code, Some(1), "{said}");
    let line = said
        .lines()
        .find(|l| l.contains("`slow_compute`"))
        .unwrap_or_default();
    assert!(
        line.contains("/outcome/result/content/0/text") && line.contains("(v2)"),
        "{said}"
    );
    assert!(said.contains("1 of 4 calls diverged"), "{said}");
    println!("verify against a new build: {line}");
}

//! A span that comes after its run was written, sent by the OpenTelemetry
//! SDK's OTLP/HTTP exporter: `reel collect` never rewrites the run (it
//! has ended), and writes the late span as a run of its own linked to it,
//! which `reel runs` lists and `reel show` shows; the exporter's retries
//! of a late span and of a written one are stored once.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{reel, Killed};

/// `reel runs --json`'s runs.
fn runs(archive: &Path, config: &Path) -> Vec<Value> {
    let out = reel(
        config,
        &["--archive", archive.to_str().unwrap(), "runs", "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page: Value = serde_json::from_slice(&out.stdout).unwrap();
    page["runs"].as_array().unwrap().clone()
}

/// Waits (bounded, not a timing assertion) until `reel runs` lists
/// `run_id` as completed: written, not held.
fn wait_written(archive: &Path, config: &Path, run_id: &str) {
    for _ in 0..1200 {
        let listed = runs(archive, config);
        if listed
            .iter()
            .any(|r| r["run_id"] == run_id && r["state"] == "completed")
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{run_id} was not written within a minute");
}

/// The facts of `run_id`'s tape, as JSON.
fn facts(archive: &Path, config: &Path, run_id: &str) -> Vec<Value> {
    let out = reel(
        config,
        &[
            "--archive",
            archive.to_str().unwrap(),
            "export",
            run_id,
            "-o",
            "-",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|f| f.get("kind").is_some())
        .collect()
}

#[test]
fn a_span_exported_after_its_run_was_written_is_a_run_linked_to_it() {
    crate::collect::require_peers();
    let dir = tempfile::tempdir().unwrap();
    let (archive, config) = (dir.path().join("archive"), dir.path().join("config"));
    let (mut collector, port) = crate::collect_held::collector(&archive, &config, Stdio::piped());
    let mut agent = Killed(
        Command::new("python3")
            .arg(crate::collect::agents_dir().join("otel_late_agent.py"))
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{port}"),
            )
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 runs"),
    );
    let mut said = String::new();
    BufReader::new(agent.0.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    let trace = said
        .strip_prefix("root ")
        .map(str::trim)
        .unwrap_or_else(|| panic!("the agent said {said:?}"));
    let first = format!("otel-{trace}");

    // The root has ended and the grace period passed: the run is written,
    // one tool's call in it, the other's span still running.
    wait_written(&archive, &config, &first);
    agent.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let status = agent.0.wait().unwrap();
    let mut err = String::new();
    agent
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "the agent failed: {err}");
    let late = format!("{first}-late-1");
    wait_written(&archive, &config, &late);

    assert!(Command::new("kill")
        .args(["-TERM", &collector.0.id().to_string()])
        .status()
        .unwrap()
        .success());
    let status = collector.0.wait().unwrap();
    let mut stderr = String::new();
    collector
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "reel collect failed: {stderr}");
    assert!(
        stderr.contains(
            "2 run(s) written from 2 span(s); 2 retried span(s) dropped, 1 late (in 1 run(s) of \
             their own), 0 rejected"
        ),
        "{stderr}"
    );

    // The first run as it was written: never rewritten.
    let kinds = |facts: &[Value]| -> Vec<String> {
        facts
            .iter()
            .map(|f| f["kind"].as_str().unwrap().to_owned())
            .collect()
    };
    let written = facts(&archive, &config, &first);
    assert_eq!(
        kinds(&written),
        ["run.started", "call.started", "call.ended", "run.ended"]
    );
    assert_eq!(written[1]["data"]["tool_name"], "get_weather");

    // The late span: a run of its own, its head the first run's, linked.
    let facts = facts(&archive, &config, &late);
    assert_eq!(
        kinds(&facts),
        [
            "run.started",
            "log",
            "call.started",
            "call.ended",
            "run.ended"
        ]
    );
    let seqs: Vec<u64> = facts.iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4], "gapless");
    let head = &facts[0]["data"];
    assert_eq!(head["labels"]["reel.late_of"], json!(first));
    assert_eq!(head["labels"]["otel.trace_id"], trace);
    assert_eq!(head["identity"]["principal"], "ada");
    assert_eq!(head["producer"]["name"], "late-app");
    assert_eq!(facts[1]["data"]["logger"], "reel.late");
    assert_eq!(facts[1]["data"]["data"]["run"], json!(first));
    let call = &facts[2]["data"];
    assert_eq!(
        (&call["tool_name"], &call["call_id"], &call["args"]),
        (
            &json!("slow_lookup"),
            &json!("call-2"),
            &json!({"term": "tides"})
        )
    );
    assert_eq!(
        facts[3]["data"]["outcome"],
        json!({"status": "ok", "result": "high tide at noon"})
    );

    // Listed beside the first, and shown.
    let listed = runs(&archive, &config);
    let ids: Vec<&str> = listed
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&late.as_str()) && ids.contains(&first.as_str()));
    let out = reel(
        &config,
        &["--archive", archive.to_str().unwrap(), "show", &late],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8(out.stdout).unwrap();
    for part in [
        format!("reel.late_of={first}"),
        "log warning".to_owned(),
        format!("1 span(s) of trace {trace} came after its run"),
        "slow_lookup call.started ▶ args {\"term\":\"tides\"}".to_owned(),
        "→ \"high tide at noon\"".to_owned(),
    ] {
        assert!(shown.contains(&part), "{part:?} not in:\n{shown}");
    }

    // The first run's page names the run of its late spans.
    let out = reel(
        &config,
        &["--archive", archive.to_str().unwrap(), "show", &first],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(
        shown.ends_with(&format!(
            "late spans of its trace (they came after this run was written, which is never \
             rewritten): {late}\n"
        )),
        "{shown}"
    );

    // The console's page of the late run links to the first.
    let served = crate::console::serve(&archive);
    let (status, page) = crate::console::http_get(&served.base, &format!("/runs/{late}"), &[]);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(&format!(
            "<a id=\"late-of-link\" href=\"/runs/{first}\">the run these late spans came after</a>"
        )),
        "{page}"
    );
    drop(served);

    // A run like any taken in: its mock answers the late call as recorded,
    // and says the spans carried no definition of the tool.
    let asked = [(
        "slow_lookup".to_owned(),
        "call-2".to_owned(),
        Value::Null,
        json!({"term": "tides"}),
        Value::Null,
    )];
    let report = crate::collect::mock(&archive, &config, &late, &asked);
    assert_eq!(
        report["answers"],
        json!([{"isError": false, "text": ["high tide at noon"]}])
    );
    assert_eq!(
        report["tools"],
        json!([{
            "name": "slow_lookup",
            "description": reel_mcp::cassette::session::NO_DEFINITION,
            "inputSchema": {"type": "object"},
        }])
    );
}

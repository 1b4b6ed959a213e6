//! Spans arrive out of order, split across requests, and retried: a run
//! holds each span once, in span time order; spans of a run already
//! written are a run of their own linked to it, which never rewrites it.

use std::time::Duration;

use reel_archive::{Archive, ArchiveConfig};
use reel_collect::{CollectConfig, Collector};
use serde_json::json;

use crate::support::*;

fn agent_spans() -> (
    Vec<opentelemetry_proto::tonic::trace::v1::Span>,
    opentelemetry_proto::tonic::trace::v1::Span,
) {
    let root = span(
        1,
        0,
        "invoke_agent weather",
        0,
        1000,
        vec![
            kv("gen_ai.operation.name", "invoke_agent"),
            kv("gen_ai.agent.name", "weather"),
        ],
    );
    let children = vec![
        // A tool's span ends (and is exported) before the model span that
        // started before it, and both before the root.
        span(
            3,
            1,
            "execute_tool get_weather",
            300,
            400,
            vec![
                kv("gen_ai.operation.name", "execute_tool"),
                kv("gen_ai.tool.name", "get_weather"),
                kv("gen_ai.tool.call.id", "call-1"),
                kv("gen_ai.tool.call.arguments", r#"{"city":"Paris"}"#),
                kv("gen_ai.tool.call.result", "sunny"),
            ],
        ),
        span(
            2,
            1,
            "chat gpt",
            100,
            200,
            vec![
                kv("gen_ai.operation.name", "chat"),
                kv("gen_ai.request.model", "gpt"),
            ],
        ),
    ];
    (children, root)
}

#[test]
fn a_retried_batch_is_stored_once_and_spans_out_of_order_land_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), |_| {});
    let (children, root) = agent_spans();
    let first = protobuf(children);
    let second = protobuf(vec![root]);
    // Each batch sent twice: the exporter was not sure it arrived.
    for body in [&first, &first, &second, &second] {
        let (status, _) = post_protobuf(served.addr, body);
        assert_eq!(status, 200);
    }
    let (summary, archive) = served.stop();
    assert_eq!((summary.spans, summary.duplicates, summary.runs), (3, 3, 1));
    let runs = runs(&archive);
    assert_eq!(runs.len(), 1);
    let (run_id, facts) = &runs[0];
    assert_eq!(run_id, &format!("otel-{}", hex::encode(TRACE)));
    assert_eq!(
        kinds(facts),
        [
            "run.started",
            "model.called",
            "call.started",
            "call.ended",
            "run.ended"
        ]
    );
    assert_eq!(facts[2]["data"]["args"], json!({"city": "Paris"}));
    assert_eq!(
        facts[3]["data"]["outcome"],
        json!({"status": "ok", "result": "sunny"})
    );
    let offsets: Vec<u64> = facts
        .iter()
        .map(|f| f["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, [0, 100, 300, 400, 1000], "the spans' own times");
}

#[test]
fn a_trace_is_held_until_its_root_came_and_later_spans_are_a_run_linked_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let archive = Archive::open(dir.path(), ArchiveConfig::default()).unwrap();
    let mut config = CollectConfig::new(dir.path().into(), "127.0.0.1:0".parse().unwrap());
    config.grace = Duration::ZERO;
    let collector = Collector::with_archive(archive.clone(), &config);
    let (children, root) = agent_spans();
    let ct = Some("application/x-protobuf");
    let answered = collector.receive(ct, &protobuf(children));
    assert_eq!(answered.status(), 200);
    assert!(collector.write_ready(false).is_empty(), "no root yet: held");
    assert_eq!(collector.held(), 1);
    collector.receive(ct, &protobuf(vec![root]));
    let written = collector.write_ready(false);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].facts, 5);
    let first = format!("otel-{}", hex::encode(TRACE));
    // Two spans of the written run, one beneath the other, the first
    // beneath the run's root: late. A retry of a span the run holds, and
    // of a late one: duplicates.
    let late = span(
        9,
        1,
        "execute_tool late",
        900,
        950,
        vec![
            kv("gen_ai.operation.name", "execute_tool"),
            kv("gen_ai.tool.name", "slow"),
            kv("gen_ai.tool.call.arguments", r#"{"n":1}"#),
            kv("gen_ai.tool.call.result", "done late"),
        ],
    );
    let beneath = span(
        10,
        9,
        "GET",
        910,
        920,
        vec![kv("http.request.method", "GET")],
    );
    let (again, _) = agent_spans();
    collector.receive(ct, &protobuf(vec![beneath.clone(), again[0].clone()]));
    collector.receive(ct, &protobuf(vec![late.clone(), beneath]));
    assert_eq!(collector.held(), 1, "the late spans held for their trace");
    let written = collector.write_ready(false);
    let late_id = format!("{first}-late-1");
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].run_id, late_id);
    // A retry after the late run was written: a duplicate still.
    collector.receive(ct, &protobuf(vec![late]));
    assert!(collector.write_ready(true).is_empty());
    let summary = collector.summary();
    assert_eq!(
        (
            summary.late,
            summary.duplicates,
            summary.runs,
            summary.late_runs
        ),
        (2, 3, 2, 1)
    );
    let runs = runs(&archive);
    let (_, facts) = runs.iter().find(|(id, _)| id == &first).unwrap();
    assert_eq!(facts.len(), 5, "the first run was not rewritten");
    let (_, facts) = runs.iter().find(|(id, _)| id == &late_id).unwrap();
    assert_eq!(
        kinds(facts),
        [
            "run.started",
            "log",
            "call.started",
            "otel.span",
            "call.ended",
            "run.ended"
        ]
    );
    let seqs: Vec<u64> = facts.iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5], "gapless");
    // Its head is the first run's, linked to it.
    let labels = &facts[0]["data"]["labels"];
    assert_eq!(labels["reel.late_of"], json!(first));
    assert_eq!(labels["gen_ai.agent.name"], "weather");
    assert_eq!(facts[0]["data"]["producer"]["name"], "test-agent");
    let said = &facts[1]["data"]["data"];
    assert_eq!(
        (&said["run"], &said["remembered"]),
        (&json!(first), &json!(true))
    );
    assert_eq!(
        said["spans"],
        json!([
            {"span_id": "0909090909090909", "parent_span_id": "0101010101010101", "name": "execute_tool late"},
            {"span_id": "0a0a0a0a0a0a0a0a", "parent_span_id": "0909090909090909", "name": "GET"},
        ])
    );
    assert_eq!(facts[2]["data"]["tool_name"], "slow");
    assert_eq!(facts[2]["data"]["args"], json!({"n": 1}));
    assert_eq!(facts[3]["call"], facts[2]["call"], "nested as sent");
    assert_eq!(
        facts[4]["data"]["outcome"],
        json!({"status": "ok", "result": "done late"})
    );
    assert_eq!(facts[5]["data"]["status"], "completed");
    let offsets: Vec<u64> = facts
        .iter()
        .map(|f| f["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, [0, 0, 0, 10, 50, 50], "the spans' own times");
}

/// A trace whose run the archive holds already (a collector restarted
/// since) is written as late spans, never over the run; the run of them
/// says the collector did not remember which spans the first holds.
#[test]
fn a_trace_written_before_a_restart_is_not_written_over() {
    let dir = tempfile::tempdir().unwrap();
    let archive = Archive::open(dir.path(), ArchiveConfig::default()).unwrap();
    let mut config = CollectConfig::new(dir.path().into(), "127.0.0.1:0".parse().unwrap());
    config.grace = Duration::ZERO;
    let (children, root) = agent_spans();
    for _ in 0..3 {
        // A new collector each time: it remembers nothing.
        let collector = Collector::with_archive(archive.clone(), &config);
        let ct = Some("application/x-protobuf");
        collector.receive(ct, &protobuf(children.clone()));
        collector.receive(ct, &protobuf(vec![root.clone()]));
        assert_eq!(collector.write_ready(true).len(), 1);
    }
    let first = format!("otel-{}", hex::encode(TRACE));
    let mut ids: Vec<String> = runs(&archive).into_iter().map(|(id, _)| id).collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            first.clone(),
            format!("{first}-late-1"),
            format!("{first}-late-2")
        ]
    );
    let runs = runs(&archive);
    let (_, facts) = runs.iter().find(|(id, _)| id.ends_with("-late-2")).unwrap();
    assert_eq!(facts[1]["data"]["data"]["remembered"], false);
    assert_eq!(facts[0]["data"]["labels"]["reel.late_of"], json!(first));
}

#[test]
fn a_trace_whose_root_never_came_is_written_when_the_collector_stops() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), |_| {});
    let (children, _) = agent_spans();
    assert_eq!(post_protobuf(served.addr, &protobuf(children)).0, 200);
    let (summary, archive) = served.stop();
    assert_eq!(summary.runs, 1);
    let facts = &runs(&archive)[0].1;
    // The earliest span whose parent never came stands for the root.
    assert_eq!(
        kinds(facts),
        [
            "run.started",
            "model.called",
            "call.started",
            "call.ended",
            "run.ended"
        ]
    );
}

/// Redaction and the tripwire on what is taken in, as on recorded facts:
/// an API key under a secret-named argument, an `Authorization` header on
/// an HTTP client span, and a declared secret value wherever it appears
/// (learned values scrubbed from what follows).
#[test]
fn secrets_in_ingested_attributes_are_redacted_as_in_recorded_facts() {
    let dir = tempfile::tempdir().unwrap();
    let archive = Archive::open(dir.path(), ArchiveConfig::default()).unwrap();
    let mut config = CollectConfig::new(dir.path().into(), "127.0.0.1:0".parse().unwrap());
    config.secrets = vec![reel::context::Secret::new("hunter2-declared-value")];
    let collector = Collector::with_archive(archive.clone(), &config);
    let spans = vec![
        span(
            1,
            0,
            "invoke_agent a",
            0,
            100,
            vec![kv("gen_ai.operation.name", "invoke_agent")],
        ),
        span(
            2,
            1,
            "execute_tool fetch",
            10,
            50,
            vec![
                kv("gen_ai.operation.name", "execute_tool"),
                kv(
                    "gen_ai.tool.call.arguments",
                    r#"{"url":"https://x","api_key":"sk-live-1234567890abcdef"}"#,
                ),
                kv(
                    "gen_ai.tool.call.result",
                    "echo sk-live-1234567890abcdef and hunter2-declared-value",
                ),
            ],
        ),
        span(
            3,
            2,
            "GET",
            20,
            30,
            vec![
                kv("http.request.method", "GET"),
                kv(
                    "http.request.header.authorization",
                    "Bearer tok-abcdef0123456789",
                ),
            ],
        ),
    ];
    collector.receive(Some("application/x-protobuf"), &protobuf(spans));
    assert_eq!(collector.write_ready(true).len(), 1);
    let facts = &runs(&archive)[0].1;
    let text = serde_json::to_string(facts).unwrap();
    for secret in [
        "sk-live-1234567890abcdef",
        "hunter2-declared-value",
        "tok-abcdef0123456789",
    ] {
        assert!(
            !text.contains(secret),
            "{secret} reached the archive: {text}"
        );
    }
    // A keyed marker: the archive's key tells the same value again.
    let marker = facts[1]["data"]["args"]["api_key"].as_str().unwrap();
    assert!(
        marker.starts_with("[REDACTED:") && marker.len() == 27,
        "{marker}"
    );
    assert_eq!(facts[1]["data"]["args"]["url"], "https://x");
}

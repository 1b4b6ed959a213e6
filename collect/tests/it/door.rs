//! The HTTP door: OTLP/JSON as the specification writes it, bad input
//! answered 400/413/415 with a message naming what is wrong (never a
//! panic), a malformed span rejected alone, and the console's gate.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message as _;
use reel_collect::{CollectConfig, CollectError, Collector};
use reel_serve::Token;
use serde_json::json;

use crate::support::*;

/// OTLP/JSON as the specification writes it: hex ids, 64-bit integers
/// as strings, enums as numbers.
#[test]
fn otlp_json_with_hex_ids_and_string_integers_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), |_| {});
    let body = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "js-agent"}}]},
        "scopeSpans": [{"scope": {"name": "ai"}, "spans": [
            {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
             "name": "invoke_agent a", "kind": 1,
             "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000000900000",
             "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                            {"key": "user.id", "value": {"stringValue": "ana"}}],
             "status": {}},
            {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b175",
             "parentSpanId": "eee19b7ec3c1b174", "name": "execute_tool add", "kind": 1,
             "startTimeUnixNano": "1700000000000100000", "endTimeUnixNano": "1700000000000200000",
             "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                            {"key": "gen_ai.tool.name", "value": {"stringValue": "add"}},
                            {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": "{\"a\":1}"}},
                            {"key": "retries", "value": {"intValue": "3"}}],
             "status": {"code": 2, "message": "overflow"}}
        ]}]
    }]});
    let (status, answer) = post(
        served.addr,
        "/v1/traces",
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert!(answer.get("partialSuccess").is_none(), "{answer}");
    let (_, archive) = served.stop();
    let (run_id, facts) = &runs(&archive)[0];
    assert_eq!(run_id, "otel-5b8efff798038103d269b633813fc60c");
    assert_eq!(facts[0]["at"], 1_700_000_000_000_000_000i64);
    assert_eq!(facts[0]["data"]["identity"]["principal"], "ana");
    assert_eq!(facts[0]["data"]["producer"]["name"], "js-agent");
    assert_eq!(facts[1]["data"]["args"], json!({"a": 1}));
    assert_eq!(facts[1]["offset"], 100_000);
    assert_eq!(
        facts[2]["data"]["outcome"],
        json!({"status": "error", "error": "overflow"}),
        "no result captured: none invented"
    );
    assert_eq!(facts[2]["data"]["duration_ns"], 100_000);
}

#[test]
fn bad_input_is_refused_with_a_message_that_names_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), |c| c.max_body = 4096);
    // (headers, body, status, what the answer says)
    type Case<'a> = (Vec<(&'a str, &'a str)>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![("Content-Type", "application/x-protobuf")],
            vec![0xff; 40],
            400,
            "not an OTLP ExportTraceServiceRequest in protobuf",
        ),
        (
            vec![("Content-Type", "application/json")],
            br#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "not hex"}]}]}]}"#
                .to_vec(),
            400,
            "not an OTLP/JSON ExportTraceServiceRequest",
        ),
        (
            vec![("Content-Type", "text/plain")],
            b"hello".to_vec(),
            415,
            "unsupported Content-Type \"text/plain\"",
        ),
        (
            vec![
                ("Content-Type", "application/x-protobuf"),
                ("Content-Encoding", "br"),
            ],
            protobuf(vec![]),
            415,
            "Content-Encoding \"br\" is not supported",
        ),
        (
            vec![
                ("Content-Type", "application/x-protobuf"),
                ("Content-Encoding", "gzip"),
            ],
            protobuf(vec![]),
            400,
            "does not inflate as gzip",
        ),
        (
            vec![("Content-Type", "application/x-protobuf")],
            vec![0; 8192],
            413,
            "more than the limit of 4096 bytes",
        ),
        // A zip bomb: 40 KiB inflated from a body a tenth of the limit.
        (
            vec![
                ("Content-Type", "application/x-protobuf"),
                ("Content-Encoding", "gzip"),
            ],
            gzip(&vec![0; 40 << 10]),
            413,
            "inflates to more than the limit of 4096 bytes",
        ),
    ];
    for (headers, body, want, says) in cases {
        let (status, answer) = post(served.addr, "/v1/traces", &headers, &body);
        let text = String::from_utf8_lossy(&answer);
        assert_eq!(status, want, "{headers:?}: {text}");
        assert!(text.contains(says), "{headers:?}: {text}");
    }
    // A span with a malformed id is rejected alone, and named.
    let mut bad = span(2, 1, "execute_tool x", 1, 2, vec![]);
    bad.span_id = vec![1, 2, 3];
    let good = span(1, 0, "root", 0, 5, vec![]);
    let (status, answer) = post_protobuf(served.addr, &protobuf(vec![good, bad]));
    assert_eq!(status, 200);
    let answer = ExportTraceServiceResponse::decode(&answer[..]).unwrap();
    let partial = answer.partial_success.expect("a partial success");
    assert_eq!(partial.rejected_spans, 1);
    assert!(
        partial
            .error_message
            .contains("spans[1]: spanId is 3 bytes long"),
        "{}",
        partial.error_message
    );
    let (summary, _) = served.stop();
    assert_eq!((summary.spans, summary.rejected, summary.runs), (1, 1, 1));
}

/// `Content-Encoding: gzip` (OTEL_EXPORTER_OTLP_COMPRESSION=gzip): the
/// body inflated, then read as any other, protobuf and JSON alike; the
/// larger of the two is exactly at the limit once inflated, and taken.
#[test]
fn a_gzip_body_is_inflated_and_taken_in() {
    let dir = tempfile::tempdir().unwrap();
    let spans = vec![
        span(1, 0, "invoke_agent a", 0, 9, vec![]),
        span(
            2,
            1,
            "execute_tool add",
            1,
            2,
            vec![
                kv("gen_ai.operation.name", "execute_tool"),
                kv("gen_ai.tool.name", "add"),
            ],
        ),
    ];
    let plain = protobuf(spans);
    let json = serde_json::to_vec(&request(vec![span(3, 1, "step", 3, 4, vec![])])).unwrap();
    let served = Served::start(dir.path(), |c| c.max_body = plain.len().max(json.len()));
    let (status, answer) = post(
        served.addr,
        "/v1/traces",
        &[
            ("Content-Type", "application/x-protobuf"),
            ("Content-Encoding", "gzip"),
        ],
        &gzip(&plain),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let (status, answer) = post(
        served.addr,
        "/v1/traces",
        &[
            ("Content-Type", "application/json"),
            ("Content-Encoding", "GZIP"),
        ],
        &gzip(&json),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let (summary, archive) = served.stop();
    assert_eq!((summary.spans, summary.runs), (3, 1));
    let (_, facts) = &runs(&archive)[0];
    assert_eq!(facts[1]["data"]["tool_name"], "add");
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn off_loopback_needs_a_token_and_with_one_every_request_presents_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = CollectConfig::new(dir.path().into(), "0.0.0.0:4318".parse().unwrap());
    let archive = reel_archive::Archive::open(dir.path(), Default::default()).unwrap();
    let collector = Collector::with_archive(archive, &config);
    assert!(matches!(
        collector.router(&config),
        Err(CollectError::Listen(
            reel_serve::ServeError::NeedsToken { .. }
        ))
    ));
    config.tokens = vec![Token {
        secret: "short".into(),
        tenant: None,
    }];
    assert!(matches!(
        collector.router(&config),
        Err(CollectError::Listen(
            reel_serve::ServeError::WeakToken { .. }
        ))
    ));
    drop(collector);
    let token = "0123456789abcdef0123";
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), |c| {
        c.tokens = vec![Token {
            secret: token.into(),
            tenant: None,
        }]
    });
    let body = protobuf(vec![span(1, 0, "root", 0, 5, vec![])]);
    let ct = ("Content-Type", "application/x-protobuf");
    let (status, answer) = post(served.addr, "/v1/traces", &[ct], &body);
    assert_eq!(status, 401, "{}", String::from_utf8_lossy(&answer));
    let wrong = post(
        served.addr,
        "/v1/traces",
        &[ct, ("Authorization", "Bearer 0123456789abcdef0124")],
        &body,
    );
    assert_eq!(wrong.0, 401);
    let bearer = format!("Bearer {token}");
    let right = post(
        served.addr,
        "/v1/traces",
        &[ct, ("Authorization", &bearer)],
        &body,
    );
    assert_eq!(right.0, 200);
    let (summary, _) = served.stop();
    assert_eq!(summary.runs, 1);
}

/// OTLP/gRPC on the same port (HTTP/2 without TLS), through the same
/// gate: without the token refused, with it taken in.
#[test]
fn otlp_grpc_gzip_compressed_is_taken_in_on_the_same_port_behind_the_same_gate() {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;

    let token = "0123456789abcdef0123";
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), |c| {
        c.tokens = vec![Token {
            secret: token.into(),
            tenant: None,
        }]
    });
    let url = format!("http://{}", served.addr);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // Compressed as OTEL_EXPORTER_OTLP_COMPRESSION=gzip compresses.
        let mut client = TraceServiceClient::connect(url)
            .await
            .unwrap()
            .send_compressed(tonic::codec::CompressionEncoding::Gzip);
        let (children, root) = (
            span(
                2,
                1,
                "execute_tool add",
                10,
                20,
                vec![kv("gen_ai.operation.name", "execute_tool")],
            ),
            span(
                1,
                0,
                "invoke_agent a",
                0,
                30,
                vec![kv("gen_ai.operation.name", "invoke_agent")],
            ),
        );
        let refused = client.export(request(vec![children.clone()])).await;
        assert!(refused.is_err(), "no token: refused");
        for spans in [vec![children.clone()], vec![children], vec![root]] {
            let mut call = tonic::Request::new(request(spans));
            call.metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
            let answer = client.export(call).await.unwrap().into_inner();
            assert!(answer.partial_success.is_none());
        }
    });
    let (summary, archive) = served.stop();
    assert_eq!((summary.spans, summary.duplicates, summary.runs), (2, 1, 1));
    assert_eq!(
        kinds(&runs(&archive)[0].1),
        ["run.started", "call.started", "call.ended", "run.ended"]
    );
}

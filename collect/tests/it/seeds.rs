//! The `collect` fuzz target's committed seeds (fuzz/seeds/collect/: the
//! protobuf body the Python exporter sends for the Pydantic AI agent of
//! cli/tests/agents/pydantic_otel_agent.py, OTLP/JSON as the
//! specification writes it, spans whose parents form a cycle) through the
//! target's entry point, and what the real framework's bytes map to.

use std::path::Path;

use reel_collect::decode::{decode, Encoding};
use reel_collect::map::map_trace;

fn seeds() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/collect")
}

#[test]
fn every_seed_decodes_and_maps_within_the_stream_rules() {
    let mut n = 0;
    for entry in std::fs::read_dir(seeds()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        reel_collect::fuzzing::decode_and_map(&bytes);
        n += 1;
    }
    assert!(n >= 3);
}

#[test]
fn the_pydantic_ai_exporters_bytes_map_to_its_calls() {
    let bytes = std::fs::read(seeds().join("pydantic-ai.pb")).unwrap();
    let decoded = decode(&bytes, Encoding::Protobuf).unwrap();
    assert_eq!((decoded.spans.len(), decoded.rejected), (13, 0));
    let (_, facts) = map_trace(decoded.spans).unwrap();
    let tools: Vec<String> = facts
        .iter()
        .filter_map(|f| match &f.kind {
            reel::fact::FactKind::CallStarted(c) => Some(c.tool_name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        tools,
        [
            "get_weather",
            "add",
            "flaky",
            "ask_helper",
            "agent:helper",
            "lookup",
            "flaky"
        ]
    );
}

#[test]
fn spans_whose_parents_form_a_cycle_hang_under_the_root_and_none_is_dropped() {
    let bytes = std::fs::read(seeds().join("parent-cycle.json")).unwrap();
    let decoded = decode(&bytes, Encoding::Json).unwrap();
    let (_, facts) = map_trace(decoded.spans).unwrap();
    // No span without a parent: the first stands for the root (a call of
    // the run), the other hangs beneath it.
    let names: Vec<&str> = facts.iter().map(|f| f.kind.name()).collect();
    assert_eq!(
        names,
        [
            "run.started",
            "call.started",
            "call.started",
            "call.ended",
            "call.ended",
            "run.ended"
        ]
    );
    let calls: Vec<Option<&str>> = facts.iter().map(|f| f.call.as_deref()).collect();
    let (a, b) = (Some("1111111111111111"), Some("2222222222222222"));
    assert_eq!(calls, [None, a, b, b, a, None]);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..Default::default()
    })]

    /// The real exporter's bytes cut short and with bytes changed: read
    /// or refused, and whatever is read maps within the stream rules.
    #[test]
    fn a_mutated_exporter_body_never_panics(
        cut in 0usize..40_000,
        flips in proptest::collection::vec((0usize..40_000, proptest::prelude::any::<u8>()), 0..8),
    ) {
        let mut bytes = std::fs::read(seeds().join("pydantic-ai.pb")).unwrap();
        bytes.truncate(cut.min(bytes.len()));
        for (at, b) in flips {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = b;
            }
        }
        reel_collect::fuzzing::decode_and_map(&bytes);
    }
}

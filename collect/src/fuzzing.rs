//! The `collect` fuzz target's entry point (doc-hidden): arbitrary bytes
//! read as a protobuf and as an OTLP/JSON request, every trace they hold
//! assembled and mapped, also as late spans (a run of their own), and each
//! run's facts checked against the stream rules (what
//! `Archive::append_numbered` checks before it writes).

use std::time::Instant;

use reel::rules::StreamRules;

use crate::assemble::Assembler;
use crate::decode::{decode, Encoding};
use crate::map::{map_late, map_trace};

/// Decodes `data` both ways and maps what it holds; panics only when a
/// mapped run breaks a stream rule (a bug).
pub fn decode_and_map(data: &[u8]) {
    for encoding in [Encoding::Protobuf, Encoding::Json] {
        let Ok(decoded) = decode(data, encoding) else {
            continue;
        };
        let mut assembler = Assembler::new();
        let now = Instant::now();
        for span in decoded.spans {
            assembler.offer(span, now);
        }
        for ready in assembler.take_ready(now, std::time::Duration::ZERO, true) {
            let late = crate::map::Late {
                of: "otel-first".into(),
                run_id: "otel-late".into(),
                head: None,
                remembered: true,
            };
            let late = map_late(ready.spans.clone(), late);
            let Some((run_id, facts)) = map_trace(ready.spans) else {
                continue;
            };
            check(&run_id, &facts);
            check("otel-late", &late.unwrap_or_default());
        }
    }
}

fn check(run_id: &str, facts: &[reel::fact::Fact]) {
    let mut rules = StreamRules::new(run_id);
    for fact in facts {
        if let Err(v) = rules.check(fact) {
            panic!("a mapped run breaks a stream rule: {v:?}");
        }
    }
}

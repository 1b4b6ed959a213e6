//! Replay reports beside a tape: `<tape>.report.json`.
//!
//! The replayer (`reel-replayer`) writes its report as JSON; the language
//! server reads it back as the same type, [`ReplayReport`], which lives in
//! the core (`reel_core::report`) so that neither side names the other's
//! fields: a renamed field fails to compile, not to show.

use std::path::{Path, PathBuf};

use reel_core::report::ReplayReport;

/// Where the report of a tape sits: the tape's path plus `.report.json`
/// (the replayer's [`ReplayReport::path_beside`]).
pub fn report_path(tape: &Path) -> PathBuf {
    ReplayReport::path_beside(tape)
}

/// Reads a report's JSON text.
pub fn parse_report(text: &str) -> Result<ReplayReport, String> {
    serde_json::from_str(text).map_err(|e| {
        if serde_json::from_str::<serde_json::Value>(text).is_ok() {
            format!("not a reel replay report: {e}")
        } else {
            format!("not valid JSON: {e}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_core::report::{
        CallReport, Divergence, DivergenceKind, ReplayReport, ResultCheck, Verdict,
    };

    fn call(call_id: &str, divergence: Option<Divergence>) -> CallReport {
        CallReport {
            call_id: call_id.into(),
            tool: "walk".into(),
            parent: None,
            verdict: if divergence.is_some() {
                Verdict::Diverged
            } else {
                Verdict::Matched
            },
            divergence,
            facts_expected: 3,
            facts_replayed: 3,
            unrecorded_effects: vec![],
            result: ResultCheck {
                expected: None,
                actual: None,
                matches: true,
            },
            unproven: vec![],
        }
    }

    #[test]
    fn reads_the_report_the_replayer_writes() {
        let report = ReplayReport {
            source: "t.tape.jsonl".into(),
            run_id: "r".into(),
            outside_run: false,
            calls: vec![
                call("c1", None),
                call(
                    "c2",
                    Some(Divergence {
                        kind: DivergenceKind::ExtraFact,
                        index: 3,
                        seq: None,
                        expected: None,
                        actual: None,
                        diff: vec![],
                        line: "extra".into(),
                    }),
                ),
            ],
            facts: vec![],
            matched_facts: 2,
            summary: Default::default(),
        };
        let text = serde_json::to_string(&report).unwrap();
        assert_eq!(parse_report(&text).unwrap(), report);
        let e = parse_report("[]").unwrap_err();
        assert!(e.starts_with("not a reel replay report"), "{e}");
        let e = parse_report("{").unwrap_err();
        assert!(e.starts_with("not valid JSON"), "{e}");
    }

    #[test]
    fn the_report_sits_beside_the_tape() {
        assert_eq!(
            report_path(Path::new("/t/run.tape.jsonl")),
            PathBuf::from("/t/run.tape.jsonl.report.json")
        );
    }
}

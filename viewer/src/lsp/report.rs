//! Replay reports beside a tape: `<tape>.report.json`.
//!
//! The replayer (`reel-replayer`) writes its `ReplayReport` as JSON. The
//! viewer library does not depend on the replayer, so the report is read
//! generically, by field names. **This is a coupling by name** with
//! `reel_replayer::ReplayReport` (and `CallReport`, `Divergence`), on
//! exactly these fields:
//!
//! ```text
//! { "run_id": "...",
//!   "calls": [ { "call_id": "...",
//!                "divergence": null | { "kind": "fact_mismatch", "index": 1,
//!                                       "seq": 2 | null, "line": "..." } } ] }
//! ```
//!
//! Anything else in the report is ignored; a missing or mistyped field of a
//! divergence leaves that part out (a divergence without `seq` is placed by
//! its call and `index`, the call's `call.started` being index 0). The
//! viewer's test `lsp::divergences_of_a_real_replay_report` serializes a
//! real `ReplayReport` and reads it back through this module, so a rename
//! on either side fails a test.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One divergence named by a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportDivergence {
    /// The call that diverged.
    pub call_id: Option<String>,
    /// What kind of difference (`fact_mismatch`, `extra_fact`, ...).
    pub kind: String,
    /// Fact index within the call (`call.started` is 0).
    pub index: Option<u64>,
    /// The recorded seq where it diverged, when there is one.
    pub seq: Option<u64>,
    /// The report's readable line.
    pub line: String,
}

/// What the viewer reads from a replay report.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// The run the report is about.
    pub run_id: Option<String>,
    /// The divergences, in the report's call order.
    pub divergences: Vec<ReportDivergence>,
}

/// Where the report of a tape sits: the tape's path plus `.report.json`.
pub fn report_path(tape: &Path) -> PathBuf {
    let mut name = tape.as_os_str().to_owned();
    name.push(".report.json");
    PathBuf::from(name)
}

/// Reads a report's JSON text.
pub fn parse_report(text: &str) -> Result<Report, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let Some(calls) = value.get("calls").and_then(Value::as_array) else {
        return Err("no `calls` list: is this a reel replay report?".into());
    };
    let divergences = calls
        .iter()
        .filter_map(|call| {
            let d = call.get("divergence").filter(|d| d.is_object())?;
            Some(ReportDivergence {
                call_id: call.get("call_id").and_then(Value::as_str).map(Into::into),
                kind: d
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("divergence")
                    .to_owned(),
                index: d.get("index").and_then(Value::as_u64),
                seq: d.get("seq").and_then(Value::as_u64),
                line: d
                    .get("line")
                    .and_then(Value::as_str)
                    .unwrap_or("the replay diverged here")
                    .to_owned(),
            })
        })
        .collect();
    Ok(Report {
        run_id: value.get("run_id").and_then(Value::as_str).map(Into::into),
        divergences,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_divergences_by_field_name() {
        let r = parse_report(
            r#"{"run_id":"r","calls":[
                {"call_id":"c1","divergence":null},
                {"call_id":"c2","divergence":{"kind":"extra_fact","index":3,"seq":null,"line":"extra"}},
                {"call_id":"c3","divergence":{"kind":"fact_mismatch","index":1,"seq":7,"line":"differs"}}
            ]}"#,
        )
        .unwrap();
        assert_eq!(r.run_id.as_deref(), Some("r"));
        assert_eq!(r.divergences.len(), 2);
        assert_eq!(r.divergences[0].seq, None);
        assert_eq!(r.divergences[0].index, Some(3));
        assert_eq!(r.divergences[1].seq, Some(7));
        assert!(parse_report("[]").is_err());
        assert!(parse_report("{").is_err());
    }

    #[test]
    fn the_report_sits_beside_the_tape() {
        assert_eq!(
            report_path(Path::new("/t/run.tape.jsonl")),
            PathBuf::from("/t/run.tape.jsonl.report.json")
        );
    }
}

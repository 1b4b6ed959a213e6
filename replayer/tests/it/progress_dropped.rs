//! Progress reports dropped by the recorder (its queue over
//! `progress_bound`; seed 000: "with nothing listening it is a no-op that
//! drops the report") are recorded as `progress.dropped { count }` in call
//! order, counted in the next report's `count`, and a replay of the call
//! does not diverge because of them: the replayed reports in a dropped
//! place are swallowed and counted, and the drop is filed as recorded.

use reel::context::*;
use reel::fact::*;
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::{FingerprintKey, TapeExt};
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use reel_replayer::{replay, Recording, ReplayOptions};
use serde_json::{json, Value};

const REPORTS: u64 = 20_000;

async fn storm(ctx: ToolContext, _: Value) -> Result<Value, ToolError> {
    // No await between reports: the queue fills faster than it drains.
    for i in 0..REPORTS {
        ctx.progress(json!({ "message": format!("step {i}") }));
    }
    ctx.log(Level::Info, "done");
    Ok(json!({ "reported": REPORTS }))
}

#[tokio::test]
async fn dropped_reports_are_recorded_counted_and_replay_matches() {
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([3; 32]),
        serve_live: false,
        progress_bound: 16,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(dir.path().join("archive"), config)
        .await
        .unwrap();
    let run = recorder.start_run(RunStart::new("storm")).await.unwrap();
    run.call("storm", json!({})).invoke(storm).await.unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let path = dir.path().join("storm.tape.jsonl");
    Tape::export(&archive, "storm")
        .unwrap()
        .write(std::fs::File::create(&path).unwrap())
        .unwrap();
    let recording = Recording::from_tape_file(&path).unwrap();

    // The record is honest: every report is either there or counted as
    // dropped, in order, and each count says how many came before.
    let call = recording.calls.values().next().unwrap();
    let (mut counted, mut kept, mut drops) = (0u64, 0u64, 0u64);
    for f in &call.facts {
        match &f.kind {
            FactKind::Progress(p) => {
                counted += 1;
                kept += 1;
                assert_eq!(p.count, counted, "seq {}", f.seq);
                assert_eq!(p.payload["message"], format!("step {}", counted - 1));
            }
            FactKind::ProgressDropped(d) => {
                assert!(d.count > 0);
                counted += d.count;
                drops += 1;
            }
            _ => {}
        }
    }
    assert_eq!(counted, REPORTS);
    assert!(drops > 0, "nothing was dropped with a bound of 16");
    assert!(kept > 0 && kept < REPORTS);

    let tools = Tools::new().register("storm", storm);
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
}

/// Reports through `progress_mcp` with no await between them, then once
/// after respond; returns the booleans it got (FrontMCP's `progress`
/// returns one: here, whether the report was recorded).
async fn mcp_storm(ctx: ToolContext, _: Value) -> Result<Value, ToolError> {
    let mut got = Vec::new();
    for i in 0..REPORTS {
        got.push(ctx.progress_mcp(McpProgress::new(i as f64).total(REPORTS as f64)));
    }
    let kept = got.iter().filter(|b| **b).count();
    let _ = ctx.respond(json!({ "kept": kept, "got": got.clone() }));
    let after = ctx.progress_mcp(1.0);
    Ok(json!({ "after": after }))
}

/// A client that asked for progress (an MCP request with a
/// `progressToken`): every report is handed on to it.
struct Client;

impl reel_recorder::ProgressListener for Client {
    fn progress(&self, _call_id: &str, _payload: &Value) -> bool {
        true
    }
}

/// Seed 004's `progress` boolean (FrontMCP: "sent to the client"): true
/// for each report a client was sent, false with nothing listening (even
/// though the report is filed, or dropped by the queue's bound) and after
/// `respond`. The record keeps the answer (`delivered`), and a replay gives
/// the tool the same booleans.
#[tokio::test]
async fn progress_mcp_says_whether_a_client_was_sent_the_report_and_replays_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([3; 32]),
        serve_live: false,
        progress_bound: 16,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(dir.path().join("archive"), config)
        .await
        .unwrap();
    let run = recorder
        .start_run(RunStart::new("mcp-storm"))
        .await
        .unwrap();
    let alone = run
        .call("storm", json!({}))
        .invoke(mcp_storm)
        .await
        .unwrap();
    let listened = run
        .call("storm", json!({}))
        .progress_listener(std::sync::Arc::new(Client))
        .invoke(mcp_storm)
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let path = dir.path().join("mcp-storm.tape.jsonl");
    Tape::export(&archive, "mcp-storm")
        .unwrap()
        .write(std::fs::File::create(&path).unwrap())
        .unwrap();
    let recording = Recording::from_tape_file(&path).unwrap();
    let reports = |call: &str| -> Vec<bool> {
        recording.calls[call]
            .facts
            .iter()
            .filter_map(|f| match &f.kind {
                FactKind::Progress(p) => Some(p.delivered),
                _ => None,
            })
            .collect()
    };
    // Nobody listening: every answer false, the reports filed (or dropped)
    // all the same.
    let got: Vec<bool> = serde_json::from_value(alone["got"].clone()).unwrap();
    assert!(got.iter().all(|b| !b));
    assert!(!reports("c1").is_empty() && reports("c1").iter().all(|d| !d));
    // A client listening: every report sent, each on the record as such
    // (a report a client has is never dropped).
    let got: Vec<bool> = serde_json::from_value(listened["got"].clone()).unwrap();
    assert_eq!(got.len() as u64, REPORTS);
    assert!(got.iter().all(|b| *b));
    assert_eq!(reports("c2"), vec![true; REPORTS as usize]);
    // After respond: false (the record flags what the tool returned).
    let flagged = recording.calls["c2"]
        .facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::Log(l) if l.logger.as_deref() == Some(AFTER_RESPOND_LOGGER) => {
                l.data.get("returned").cloned()
            }
            _ => None,
        })
        .expect("the return after respond is flagged");
    assert_eq!(flagged, json!({ "ok": { "after": false } }));
    // Replay gives the tool the same booleans (its result holds them).
    let tools = Tools::new().register("storm", mcp_storm);
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
}

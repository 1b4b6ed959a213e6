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

//! A diverging replay leaves its report beside the tape (where `reel lsp`
//! shows it); a matching one removes a stale report.

use reel::context::{ToolContext, ToolError};
use reel::report::ReplayReport;
use reel::tools::Tools;
use reel_replayer::support::{assert_matched, replay_tape};
use reel_replayer::ReplayOptions;
use serde_json::json;

async fn hop(ctx: ToolContext, n: u32) -> Result<u32, ToolError> {
    ctx.progress(json!({ "message": format!("Hop 1 of {n}") }));
    Ok(n)
}

async fn hop_changed(ctx: ToolContext, n: u32) -> Result<u32, ToolError> {
    ctx.progress(json!({ "message": format!("Hop 1 of {}", n + 1) }));
    Ok(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_divergence_is_written_beside_the_tape_and_cleared_on_match() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = reel_recorder::Recorder::open(dir.path().join("a"), Default::default())
        .await
        .unwrap();
    let run = recorder
        .start_run(reel_recorder::RunStart::new("r"))
        .await
        .unwrap();
    run.call("hop", 12).invoke(hop).await.unwrap();
    run.end(reel::fact::RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let tape = dir.path().join("hop.tape.jsonl");
    <reel::tape::Tape as reel_archive::TapeExt>::export(&archive, "r")
        .unwrap()
        .write(std::fs::File::create(&tape).unwrap())
        .unwrap();
    let tape_str = tape.to_str().unwrap().to_owned();
    let beside = ReplayReport::path_beside(&tape);

    let changed = Tools::new().register("hop", hop_changed);
    let report = replay_tape("/", &tape_str, &changed, &ReplayOptions::default());
    let failed = std::panic::catch_unwind(|| assert_matched("/", &tape_str, &report));
    let message = *failed
        .expect_err("a divergence fails the test")
        .downcast::<String>()
        .unwrap();
    assert!(
        message.contains(r#"expected "Hop 1 of 12", got "Hop 1 of 13""#),
        "{message}"
    );
    assert!(message.contains(&beside.display().to_string()), "{message}");
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&beside).unwrap()).unwrap();
    assert_eq!(written["calls"][0]["divergence"]["seq"], json!(2));

    let same = Tools::new().register("hop", hop);
    let report = replay_tape("/", &tape_str, &same, &ReplayOptions::default());
    assert_matched("/", &tape_str, &report);
    assert!(
        !beside.exists(),
        "a matching replay removes the stale report"
    );
}

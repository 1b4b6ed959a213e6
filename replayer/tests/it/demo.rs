//! Every demo run, recorded into a real archive, replays with no divergence,
//! from the archive and from its exported tape alike, borrowed or moved
//! into the replay, or indexed for one replay.

use reel::tape::Tape;

use reel::report::{ReplayReport, Verdict};
use reel_archive::TapeExt;
use reel_recorder::{Recorder, RecorderConfig};
use reel_replayer::{replay, Recording, ReplayInput, ReplayOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_demo_run_replays_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path(), RecorderConfig::default())
        .await
        .unwrap();
    let ids = reel_demo::record(&recorder).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let tools = reel_demo::tools();
    for id in &ids {
        let from_archive = Recording::from_archive(&archive, id).unwrap();
        let report = replay(&from_archive, &tools, &ReplayOptions::default()).await;
        assert!(report.is_match(), "{id}:\n{report}");
        assert!(report
            .calls
            .iter()
            .all(|c| c.verdict != Verdict::MissingTool));

        let mut bytes = Vec::new();
        Tape::export(&archive, id)
            .unwrap()
            .write(&mut bytes)
            .unwrap();
        let tape = Tape::read(&bytes[..]).unwrap();
        let from_tape = Recording::from_tape(format!("{id}.tape.jsonl"), tape).unwrap();
        let again = replay(&from_tape, &tools, &ReplayOptions::default()).await;
        assert_eq!(
            again.calls, report.calls,
            "{id}: tape and archive replays differ"
        );
        // Moved into the replay instead of borrowed: the same report, fact
        // for fact (dispatched children, artifacts and all).
        let moved = replay(from_tape, &tools, &ReplayOptions::default()).await;
        assert_same(&moved, &again, &format!("{id}, moved"));
        // Indexed for one replay (facts moved into their calls): the same
        // report, with the tools and without any (every call served).
        for tools in [tools.clone(), reel::tools::Tools::new()] {
            let borrowed =
                Recording::from_tape(format!("{id}.tape.jsonl"), Tape::read(&bytes[..]).unwrap())
                    .unwrap();
            let expected = replay(&borrowed, &tools, &ReplayOptions::default()).await;
            let input =
                ReplayInput::from_tape(format!("{id}.tape.jsonl"), Tape::read(&bytes[..]).unwrap())
                    .unwrap();
            let got = replay(input, &tools, &ReplayOptions::default()).await;
            assert_same(&got, &expected, &format!("{id}, the tape's index"));
        }
    }
}

/// A hand-made tape where a call id is started twice (a run's second call
/// renamed to its first's id): indexed for one replay, it replays exactly
/// as the `Recording` of the same tape does, re-driven and served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tape_with_a_call_id_started_twice_replays_as_its_recording() {
    use reel::context::{ToolContext, ToolError};
    use reel::fact::{FactKind, RunStatus};
    use reel_recorder::RunStart;
    use serde_json::json;

    async fn hop(ctx: ToolContext, n: u32) -> Result<u32, ToolError> {
        for i in 1..=n {
            ctx.progress(json!({ "message": format!("Hop {i} of {n}") }));
        }
        Ok(n)
    }
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path(), RecorderConfig::default())
        .await
        .unwrap();
    let run = recorder.start_run(RunStart::new("twice")).await.unwrap();
    run.call("hop", 2).invoke(hop).await.unwrap();
    run.call("hop", 3).invoke(hop).await.unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();

    let mut tape = Tape::export(&archive, "twice").unwrap();
    let starts: Vec<String> = tape
        .facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CallStarted(c) => Some(c.call_id.clone()),
            _ => None,
        })
        .collect();
    let [first, second] = &starts[..] else {
        panic!("two calls were recorded: {starts:?}");
    };
    for f in &mut tape.facts {
        if f.call.as_deref() == Some(second.as_str()) {
            f.call = Some(first.clone());
        }
        if let FactKind::CallStarted(c) = &mut f.kind {
            if &c.call_id == second {
                c.call_id = first.clone();
            }
        }
    }
    for tools in [
        reel::tools::Tools::new().register("hop", hop),
        reel::tools::Tools::new(),
    ] {
        let recording = Recording::from_tape("twice".into(), tape.clone()).unwrap();
        let expected = replay(&recording, &tools, &ReplayOptions::default()).await;
        let input = ReplayInput::from_tape("twice", tape.clone()).unwrap();
        let got = replay(input, &tools, &ReplayOptions::default()).await;
        assert_same(&got, &expected, "twice, the tape's index");
    }
}

/// Two replays of the same record give the same report: each call's
/// verdict and facts, the re-derived timeline, the facts matched.
#[track_caller]
fn assert_same(got: &ReplayReport, expected: &ReplayReport, what: &str) {
    assert_eq!(got.calls, expected.calls, "{what}: the calls differ");
    assert_eq!(
        got.facts, expected.facts,
        "{what}: the facts re-derived differ"
    );
    assert_eq!(
        got.matched_facts, expected.matched_facts,
        "{what}: facts matched"
    );
}

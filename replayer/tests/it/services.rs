//! Typed services (seed 004's `get(token)`, by type): recorder-wide ones
//! every call of every run gets, a call's own winning for its type, and a
//! dispatched child getting its parent's services, the same `Arc`s. Live
//! through a real recorder, and in replay of the exported tapes, where
//! `ReplayOptions::service` gives them to every re-driven call, children
//! included.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use reel::context::{ContextError, ToolContext, ToolError};
use reel::fact::RunStatus;
use reel::report::{ReplayReport, Verdict};
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::Archive;
use reel_archive::FingerprintKey;
use reel_archive::TapeExt;
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use reel_replayer::{replay, Recording, ReplayOptions};
use serde_json::{json, Value};

use crate::support::assert_clean;

/// A database handle, named so that the test sees which one a call got.
struct Db(&'static str);

/// Counts the calls that used it: shared, so the same `Arc` everywhere.
#[derive(Default)]
struct Uses(AtomicUsize);

/// Never registered.
struct Mailer;

/// What a call sees of its services (and counts one use).
fn seen(ctx: &ToolContext) -> Result<Value, ToolError> {
    ctx.get::<Uses>()?.0.fetch_add(1, Ordering::SeqCst);
    let missing = match ctx.get::<Mailer>() {
        Err(e @ ContextError::NoService { .. }) => e.to_string(),
        other => format!("unexpected: {:?}", other.map(|_| ())),
    };
    Ok(json!({ "db": ctx.get::<Db>()?.0, "missing": missing }))
}

fn tools() -> Tools {
    Tools::new()
        .register(
            "leaf",
            |ctx: ToolContext, _: Value| async move { seen(&ctx) },
        )
        .register("parent", |ctx: ToolContext, _: Value| async move {
            let me = seen(&ctx)?;
            let child = ctx.dispatch("leaf", json!({})).await?;
            Ok::<_, ToolError>(json!({ "me": me, "child": child }))
        })
}

fn tape_of(archive: &Archive, dir: &std::path::Path, id: &str) -> Recording {
    let path = dir.join(format!("{id}.tape.jsonl"));
    let mut file = std::fs::File::create(&path).unwrap();
    Tape::export(archive, id).unwrap().write(&mut file).unwrap();
    drop(file);
    Recording::from_tape_file(&path).unwrap()
}

/// Clean, and every call re-driven, not served.
fn assert_redriven(report: &ReplayReport) {
    assert_clean(report);
    for c in &report.calls {
        assert_eq!(
            c.verdict,
            Verdict::Matched,
            "re-driven, not served: {report}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorder_wide_services_reach_every_call_a_calls_own_wins_and_children_inherit() {
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([5; 32]),
        serve_live: false,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(dir.path().join("archive"), config)
        .await
        .unwrap();
    let uses = Arc::new(Uses::default());
    recorder
        .service(Arc::new(Db("recorder-wide")))
        .service(uses.clone());
    let t = tools();

    // A call with its own Db: it and the child it dispatches get that one,
    // and the recorder-wide `Uses` (the same Arc: both uses land in it).
    let run = recorder.start_run(RunStart::new("own")).await.unwrap();
    let out = run
        .call("parent", json!({}))
        .service(Arc::new(Db("the call's own")))
        .dispatcher(t.clone())
        .invoke_tool(&t)
        .await
        .unwrap();
    assert_eq!(out["me"]["db"], "the call's own", "{out}");
    assert_eq!(
        out["child"]["db"], "the call's own",
        "the child inherits: {out}"
    );
    let missing = out["child"]["missing"].as_str().unwrap();
    assert!(
        missing.contains("services::Mailer"),
        "names the type: {missing}"
    );
    assert_eq!(
        uses.0.load(Ordering::SeqCst),
        2,
        "parent and child share it"
    );
    run.end(RunStatus::Completed).await.unwrap();

    // Another run, a call with none of its own: the recorder's, for the
    // parent and for its child.
    let run = recorder.start_run(RunStart::new("wide")).await.unwrap();
    let out = run
        .call("parent", json!({}))
        .dispatcher(t.clone())
        .invoke_tool(&t)
        .await
        .unwrap();
    assert_eq!(out["me"]["db"], "recorder-wide", "{out}");
    assert_eq!(out["child"]["db"], "recorder-wide", "{out}");
    assert_eq!(uses.0.load(Ordering::SeqCst), 4);
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();

    // Replay re-drives parent and child, both with the test's services.
    for (id, db) in [("own", "the call's own"), ("wide", "recorder-wide")] {
        let replay_uses = Arc::new(Uses::default());
        let options = ReplayOptions::default()
            .service(Arc::new(Db(db)))
            .service(replay_uses.clone());
        let report = replay(&tape_of(&archive, dir.path(), id), &t, &options).await;
        assert_redriven(&report);
        assert_eq!(report.calls.len(), 2, "{report}");
        assert_eq!(
            replay_uses.0.load(Ordering::SeqCst),
            2,
            "{id}: the replayed child got the same services as its parent"
        );
    }

    // A replay without the Db: the child (like the parent) is told which
    // type is missing, and the result diverges rather than passing.
    let options = ReplayOptions::default().service(Arc::new(Uses::default()));
    let report = replay(&tape_of(&archive, dir.path(), "wide"), &t, &options).await;
    assert!(!report.is_match(), "{report}");
}

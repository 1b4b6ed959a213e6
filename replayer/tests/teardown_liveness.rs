//! Seed 000's teardown liveness: "Registering twice under one (tool, scope,
//! key) is a no-op that keeps the FIRST cleanup (it holds the live handle)
//! and refreshes liveness, so calling this on every execute is the intended
//! shape for a reused session." Each holder counts the registrations per key
//! and keeps the time of the last one; `teardown.registered` records the
//! count and its time, `teardown.ran` the count and the last time. Recorded
//! through the real recorder, read back from the archive and from exported
//! tapes, and replayed.

use std::path::Path;

use reel::context::{ToolContext, ToolError};
use reel::fact::{
    FactKind, Identity, RunStatus, TeardownOutcome, TeardownRan, TeardownRegistered, TeardownScope,
};
use reel::tape::Tape;
use reel::tools::Tools;
use reel::Fact;
use reel_archive::Archive;
use reel_archive::FingerprintKey;
use reel_archive::TapeExt;
use reel_recorder::{Recorder, RecorderConfig, Run, RunStart};
use reel_replayer::{replay, Recording, ReplayOptions, ReplayReport};
use serde_json::{json, Value};

/// A reused session: every execute registers the session's cleanup again.
async fn browse(ctx: ToolContext, url: String) -> Result<Value, ToolError> {
    let key = ctx.teardown_key(TeardownScope::Session)?;
    let first = ctx.on_teardown(TeardownScope::Session, key.as_str(), || async {
        Ok::<_, String>(())
    })?;
    Ok(json!({ "url": url, "first": first }))
}

/// A run-scoped registration on every execute.
async fn scratch(ctx: ToolContext, _n: u32) -> Result<bool, ToolError> {
    let key = ctx.teardown_key(TeardownScope::Run)?;
    Ok(ctx.on_teardown(TeardownScope::Run, key.as_str(), || async {
        Ok::<_, String>(())
    })?)
}

fn tools() -> Tools {
    Tools::new()
        .register("browse", browse)
        .register("scratch", scratch)
}

fn config() -> RecorderConfig {
    RecorderConfig {
        fingerprint_key: FingerprintKey::Key([7; 32]),
        serve_live: false,
        ..RecorderConfig::default()
    }
}

fn acme() -> Identity {
    Identity {
        tenant: Some("acme".into()),
        principal: Some("ann".into()),
        conversation: None,
    }
}

async fn call(run: &Run, tool: &str, args: Value) -> Value {
    let tools = tools();
    run.call(tool, args)
        .invoke_erased(tools.get(tool).unwrap())
        .await
        .unwrap()
}

fn facts(archive: &Archive, id: &str) -> Vec<Fact> {
    archive
        .facts(id, ..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn registered(facts: &[Fact]) -> Vec<TeardownRegistered> {
    facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::TeardownRegistered(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn ran(facts: &[Fact]) -> Vec<TeardownRan> {
    facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::TeardownRan(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// The run `id` loaded from the archive and from its exported tape.
fn recordings(archive: &Archive, dir: &Path, id: &str) -> [Recording; 2] {
    let path = dir.join(format!("{id}.tape.jsonl"));
    let mut file = std::fs::File::create(&path).unwrap();
    Tape::export(archive, id).unwrap().write(&mut file).unwrap();
    drop(file);
    [
        Recording::from_archive(archive, id).unwrap(),
        Recording::from_tape_file(&path).unwrap(),
    ]
}

fn assert_clean(report: &ReplayReport) {
    assert!(report.is_match(), "{report}");
    for c in &report.calls {
        assert!(c.result.matches, "{report}");
        assert_eq!(c.facts_replayed, c.facts_expected, "{report}");
    }
}

#[tokio::test]
async fn a_session_cleanup_kept_alive_by_three_executes_in_three_runs_says_so_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path().join("archive"), config())
        .await
        .unwrap();
    let start = |id: &str| RunStart::new(id).identity(acme()).session("sess-1");
    let ids = ["r-1", "r-2", "r-3"];
    for id in ids {
        let run = recorder.start_run(start(id)).await.unwrap();
        let out = call(&run, "browse", json!("https://example.test")).await;
        assert_eq!(out["first"], json!(id == "r-1"), "{id}: {out}");
        if id == "r-3" {
            run.end_session().await.unwrap();
        }
        run.end(RunStatus::Completed).await.unwrap();
    }
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();

    // One registration per run, counted across the runs of the session.
    let regs: Vec<TeardownRegistered> = ids
        .iter()
        .flat_map(|id| registered(&facts(&archive, id)))
        .collect();
    assert_eq!(
        regs.iter().map(|r| r.registrations).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(
        regs.iter().map(|r| r.first).collect::<Vec<_>>(),
        [true, false, false]
    );
    assert!(regs.iter().all(|r| r.registered_at > 0), "{regs:?}");
    assert!(
        regs.windows(2)
            .all(|w| w[0].registered_at <= w[1].registered_at),
        "registration times follow the runs: {regs:?}"
    );
    assert!(regs.iter().all(|r| r.key_hash == regs[0].key_hash));

    // The session ended in r-3: its one cleanup ran there, once, and says
    // how many registrations kept it alive and when the last one was.
    assert!(ran(&facts(&archive, "r-1")).is_empty());
    assert!(ran(&facts(&archive, "r-2")).is_empty());
    let ran3 = ran(&facts(&archive, "r-3"));
    assert_eq!(ran3.len(), 1, "{ran3:?}");
    assert_eq!(ran3[0].scope, TeardownScope::Session);
    assert_eq!(ran3[0].key_hash, regs[0].key_hash);
    assert_eq!(ran3[0].outcome, TeardownOutcome::Ok);
    assert_eq!(ran3[0].registrations, 3);
    assert_eq!(ran3[0].last_registered_at, regs[2].registered_at);

    // Each run replays, from the archive and from its tape: the replayed
    // registration has the recorded count, first and time.
    for (i, id) in ids.iter().enumerate() {
        for recording in recordings(&archive, dir.path(), id) {
            let report = replay(&recording, &tools(), &ReplayOptions::default()).await;
            assert_clean(&report);
            assert_eq!(
                registered(&report.facts),
                [regs[i].clone()],
                "{}",
                recording.source
            );
        }
    }
}

#[tokio::test]
async fn a_run_cleanup_counts_its_repeats_and_replay_counts_them_again() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path().join("archive"), config())
        .await
        .unwrap();
    let run = recorder.start_run(RunStart::new("run")).await.unwrap();
    for n in 0..3 {
        assert_eq!(call(&run, "scratch", json!(n)).await, json!(n == 0));
    }
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();

    let recorded = facts(&archive, "run");
    let regs = registered(&recorded);
    assert_eq!(
        regs.iter().map(|r| r.registrations).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let ran = ran(&recorded);
    assert_eq!(
        ran.len(),
        1,
        "one cleanup, kept from the first registration"
    );
    assert_eq!(ran[0].registrations, 3);
    assert_eq!(ran[0].last_registered_at, regs[2].registered_at);

    for recording in recordings(&archive, dir.path(), "run") {
        let report = replay(&recording, &tools(), &ReplayOptions::default()).await;
        assert_clean(&report);
        assert_eq!(registered(&report.facts), regs);
    }

    // Replay counts the run's registrations itself: a tool that now
    // registers under a fresh key every time is told each is a first, and
    // the change is reported.
    let fresh = Tools::new().register("scratch", |ctx: ToolContext, n: u32| async move {
        let key = format!("{}#{n}", ctx.teardown_key(TeardownScope::Run)?);
        Ok::<_, ToolError>(
            ctx.on_teardown(TeardownScope::Run, &key, || async { Ok::<_, String>(()) })?,
        )
    });
    let recording = Recording::from_archive(&archive, "run").unwrap();
    let report = replay(&recording, &fresh, &ReplayOptions::default()).await;
    assert!(!report.is_match(), "{report}");
    let d = report.calls[0].divergence.as_ref().unwrap();
    let paths: Vec<&str> = d.diff.iter().map(|x| x.path.as_str()).collect();
    assert!(paths.contains(&"teardown.registered.key_hash"), "{paths:?}");
}

#[test]
fn teardown_facts_recorded_before_liveness_still_read_and_write_back_unchanged() {
    let old = json!({ "scope": "run", "key_hash": "sha256:aa", "first": false });
    let r: TeardownRegistered = serde_json::from_value(old.clone()).unwrap();
    assert_eq!((r.registrations, r.registered_at), (0, 0));
    assert_eq!(serde_json::to_value(&r).unwrap(), old);
    let old = json!({
        "scope": "session", "key_hash": "sha256:bb",
        "outcome": { "outcome": "ok" }, "duration_ns": 12
    });
    let r: TeardownRan = serde_json::from_value(old.clone()).unwrap();
    assert_eq!((r.registrations, r.last_registered_at), (0, 0));
    assert_eq!(serde_json::to_value(&r).unwrap(), old);
}

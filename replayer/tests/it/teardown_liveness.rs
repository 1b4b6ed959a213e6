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
use reel_replayer::{replay, Recording, ReplayOptions};
use serde_json::{json, Value};

use crate::support::assert_clean;

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
    // the change is reported. (The first call's key is bound to the
    // recorded hash, see `keyed_teardown_hashes_...` below: the second
    // call's fresh key is where it diverges.)
    let fresh = Tools::new().register("scratch", |ctx: ToolContext, n: u32| async move {
        let key = format!("{}#{n}", ctx.teardown_key(TeardownScope::Run)?);
        Ok::<_, ToolError>(
            ctx.on_teardown(TeardownScope::Run, &key, || async { Ok::<_, String>(()) })?,
        )
    });
    let recording = Recording::from_archive(&archive, "run").unwrap();
    let report = replay(&recording, &fresh, &ReplayOptions::default()).await;
    assert!(!report.is_match(), "{report}");
    assert!(report.calls[0].divergence.is_none(), "{report}");
    let d = report.calls[1].divergence.as_ref().unwrap();
    let paths: Vec<&str> = d.diff.iter().map(|x| x.path.as_str()).collect();
    assert!(
        paths.contains(&"teardown.registered:/key_hash"),
        "{paths:?}"
    );
}

/// Registers a call-scoped cleanup under the key it is given (a PIN).
async fn pin(ctx: ToolContext, key: String) -> Result<bool, ToolError> {
    Ok(ctx.on_teardown(TeardownScope::Call, &key, || async { Ok::<_, String>(()) })?)
}

/// Teardown keys are recorded as a hash keyed under the fingerprint key,
/// which a replay does not have: the replay binds each key to the recorded
/// hash at its place, so the same keys in the same places replay clean
/// from the archive and from a tape (on any machine: no key is read), and
/// a key registered where the record holds another one diverges.
#[tokio::test]
async fn keyed_teardown_hashes_replay_without_the_key_and_a_changed_key_diverges() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path().join("archive"), config())
        .await
        .unwrap();
    let run = recorder.start_run(RunStart::new("pins")).await.unwrap();
    let pins = Tools::new().register("pin", pin);
    for key in ["4711", "0042", "4711"] {
        run.call("pin", json!(key))
            .invoke_erased(pins.get("pin").unwrap())
            .await
            .unwrap();
    }
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();

    let hashes: Vec<String> = registered(&facts(&archive, "pins"))
        .into_iter()
        .map(|r| r.key_hash)
        .collect();
    assert_eq!(hashes.len(), 3);
    assert!(
        hashes.iter().all(|h| h.starts_with("hmac-sha256:")),
        "{hashes:?}"
    );
    assert_eq!(hashes[0], hashes[2], "one key, one hash");
    assert_ne!(hashes[0], hashes[1]);
    assert_eq!(
        hashes[0],
        reel_recorder::teardown_key_hash(&archive, "pin", TeardownScope::Call, "4711")
    );
    assert_ne!(
        hashes[0],
        reel::context::teardown_key_hash("pin", TeardownScope::Call, "4711"),
        "not the unkeyed hash anyone can compute"
    );

    let keyed = ReplayOptions::default().keyed(&archive.keyring());
    for recording in recordings(&archive, dir.path(), "pins") {
        assert_clean(&replay(&recording, &pins, &keyed).await);
        let report = replay(&recording, &pins, &ReplayOptions::default()).await;
        assert_clean(&report);
        let replayed: Vec<String> = registered(&report.facts)
            .into_iter()
            .map(|r| r.key_hash)
            .collect();
        assert_eq!(replayed, hashes);
    }

    // The third call now registers the second call's key: its hash is
    // already bound to that key, the record wants the first call's.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let changed = Tools::new().register("pin", |ctx: ToolContext, key: String| async move {
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        pin(ctx, if n == 2 { "0042".to_owned() } else { key }).await
    });
    let recording = Recording::from_archive(&archive, "pins").unwrap();
    let report = replay(&recording, &changed, &ReplayOptions::default()).await;
    assert!(!report.is_match(), "{report}");
    let diverged: Vec<&str> = report
        .calls
        .iter()
        .filter_map(|c| c.divergence.as_ref())
        .flat_map(|d| d.diff.iter().map(|x| x.path.as_str()))
        .collect();
    assert_eq!(diverged[0], "teardown.registered:/key_hash", "{report}");
    assert!(report.calls[..2].iter().all(|c| c.divergence.is_none()));
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

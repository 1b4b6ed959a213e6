//! Isolation under replay (issue 11, section 1): what a live run learnt
//! from the host's isolation (a session registration that repeats one of an
//! earlier run, a composed artifact scope, unguessable ids, a refusal for a
//! missing session) replays from the record, from the archive and from the
//! exported tape, with no divergence; and answering from the record never
//! hides a tool that changed.

use std::path::Path;

use reel::context::{ContextError, ToolContext, ToolError};
use reel::fact::{FactKind, Identity, RunStatus, TeardownScope};
use reel::report::DivergenceKind;
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::Archive;
use reel_archive::TapeExt;
use reel_recorder::{MemoryArtifactStore, Recorder, RecorderConfig, Run, RunStart};
use reel_replayer::{replay, Recording, ReplayOptions};
use serde_json::{json, Value};
use std::sync::Arc;

use crate::support::assert_clean;

/// Registers a session-scoped cleanup under `key` (falling back to the run
/// scope when the run has no session id); returns whether it was the first.
async fn browser(ctx: ToolContext, key: String) -> Result<Value, ToolError> {
    let cleanup = || async { Ok::<_, String>(()) };
    match ctx.on_teardown(TeardownScope::Session, &key, cleanup) {
        Ok(first) => Ok(json!({ "scope": "session", "first": first })),
        Err(ContextError::NoSession | ContextError::ScopeNotHonoured { .. }) => {
            let first = ctx.on_teardown(TeardownScope::Run, &key, cleanup)?;
            Ok(json!({ "scope": "run", "first": first }))
        }
        Err(e) => Err(e.into()),
    }
}

/// Puts a note, reads it back, and tries an id of another scope.
async fn notes(ctx: ToolContext, foreign: String) -> Result<Value, ToolError> {
    let meta = ctx
        .artifacts()
        .put("text/plain", b"my notes".to_vec())
        .await?;
    let own = ctx.artifacts().get(&meta.id).await?;
    let other = ctx.artifacts().get(&foreign).await?;
    Ok(json!({
        "id": meta.id,
        "scope": meta.scope,
        "own": own.map(|(m, b)| (m.id, b.len())),
        "foreign": other.is_some(),
    }))
}

fn tools() -> Tools {
    Tools::new()
        .register("browser", browser)
        .register("notes", notes)
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
        .artifacts(store())
        .invoke_erased(tools.get(tool).unwrap())
        .await
        .unwrap()
}

fn store() -> Arc<MemoryArtifactStore> {
    static STORE: std::sync::OnceLock<Arc<MemoryArtifactStore>> = std::sync::OnceLock::new();
    STORE
        .get_or_init(|| Arc::new(MemoryArtifactStore::new()))
        .clone()
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

/// Records the two runs of one session: `s-1` registers `browser` first,
/// `s-2` (the same caller and session) repeats it and ends the session.
async fn record_session_runs(dir: &Path) -> Archive {
    let recorder = Recorder::open(dir.join("archive"), RecorderConfig::default())
        .await
        .unwrap();
    let start = |id: &str| RunStart::new(id).identity(acme()).session("sess-1");
    let s1 = recorder.start_run(start("s-1")).await.unwrap();
    let out = call(&s1, "browser", json!("browser")).await;
    assert_eq!(out, json!({ "scope": "session", "first": true }));
    s1.end(RunStatus::Completed).await.unwrap();
    let s2 = recorder.start_run(start("s-2")).await.unwrap();
    let out = call(&s2, "browser", json!("browser")).await;
    assert_eq!(
        out,
        json!({ "scope": "session", "first": false }),
        "a cross-run repeat"
    );
    s2.end_session().await.unwrap();
    s2.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    archive
}

fn registered_firsts(facts: &[reel::Fact]) -> Vec<bool> {
    facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::TeardownRegistered(r) => Some(r.first),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_recorded_cross_run_session_repeat_replays_from_the_archive_and_the_tape() {
    let dir = tempfile::tempdir().unwrap();
    let archive = record_session_runs(dir.path()).await;
    for recording in recordings(&archive, dir.path(), "s-2") {
        assert_eq!(registered_firsts(&recording.facts), [false]);
        let keyed = ReplayOptions::default().keyed(&archive.keyring());
        assert_clean(&replay(&recording, &tools(), &keyed).await);
        let report = replay(&recording, &tools(), &ReplayOptions::default()).await;
        assert_clean(&report);
        assert_eq!(
            registered_firsts(&report.facts),
            [false],
            "{}: the replayed tool was told it repeated the earlier run's registration",
            recording.source
        );
    }
    for recording in recordings(&archive, dir.path(), "s-1") {
        let report = replay(&recording, &tools(), &ReplayOptions::default()).await;
        assert_clean(&report);
        assert_eq!(registered_firsts(&report.facts), [true]);
    }
}

#[tokio::test]
async fn the_recorded_answer_does_not_hide_a_tool_that_registers_another_key() {
    let dir = tempfile::tempdir().unwrap();
    let archive = record_session_runs(dir.path()).await;
    // Today's tool registers under another key: the record's `first`
    // belongs to the old key and is not given out; the change is reported.
    // The key's hash is keyed under the archive's fingerprint key: the
    // replay that has the key sees the new key (one without it binds the
    // only key of the run to the only recorded hash, and cannot).
    let changed = Tools::new().register("browser", |ctx, _key: String| {
        browser(ctx, "browser-v2".into())
    });
    let keyed = ReplayOptions::default().keyed(&archive.keyring());
    for recording in recordings(&archive, dir.path(), "s-2") {
        let unkeyed = replay(&recording, &changed, &ReplayOptions::default()).await;
        assert!(unkeyed.is_match(), "{unkeyed}");
        let report = replay(&recording, &changed, &keyed).await;
        assert!(!report.is_match(), "{report}");
        let d = report.calls[0].divergence.as_ref().unwrap();
        assert_eq!(d.kind, DivergenceKind::FactMismatch, "{report}");
        let paths: Vec<&str> = d.diff.iter().map(|x| x.path.as_str()).collect();
        assert!(
            paths.contains(&"teardown.registered:/key_hash"),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"teardown.registered:/first"),
            "{paths:?}: a new key is a first"
        );
    }
}

#[tokio::test]
async fn a_session_refusal_on_a_run_without_a_session_id_replays() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path().join("archive"), RecorderConfig::default())
        .await
        .unwrap();
    let run = recorder
        .start_run(RunStart::new("no-session").teardown_scopes([
            TeardownScope::Call,
            TeardownScope::Run,
            TeardownScope::Session,
        ]))
        .await
        .unwrap();
    let out = call(&run, "browser", json!("browser")).await;
    assert_eq!(out, json!({ "scope": "run", "first": true }));
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    for recording in recordings(&archive, dir.path(), "no-session") {
        let kinds: Vec<&str> = recording.facts.iter().map(|f| f.kind.name()).collect();
        assert!(kinds.contains(&"teardown.refused"), "{kinds:?}");
        let report = replay(&recording, &tools(), &ReplayOptions::default()).await;
        assert_clean(&report);
    }
}

#[tokio::test]
async fn artifact_scopes_and_ids_replay_as_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path().join("archive"), RecorderConfig::default())
        .await
        .unwrap();
    // Another tenant's artifact, whose id the recorded run tries.
    let other = recorder
        .start_run(RunStart::new("other").identity(Identity {
            tenant: Some("globex".into()),
            ..acme()
        }))
        .await
        .unwrap();
    let foreign = call(&other, "notes", json!("none")).await;
    other.end(RunStatus::Completed).await.unwrap();
    let run = recorder
        .start_run(RunStart::new("mine").identity(acme()).session("sess-1"))
        .await
        .unwrap();
    let out = call(&run, "notes", foreign["id"].clone()).await;
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    assert_eq!(
        out["foreign"],
        json!(false),
        "another tenant's id reads as nothing"
    );
    assert_eq!(out["own"][1], json!(8));
    assert_eq!(
        out["scope"],
        json!({ "tenant": "acme", "principal": "ann", "conversation": "session:sess-1" })
    );
    let id = out["id"].as_str().unwrap();
    assert!(id.starts_with("art-") && id.len() == 36, "{id}");

    for recording in recordings(&archive, dir.path(), "mine") {
        let report = replay(&recording, &tools(), &ReplayOptions::default()).await;
        assert_clean(&report);
        let metas = |facts: &[reel::Fact]| {
            facts
                .iter()
                .filter_map(|f| match &f.kind {
                    FactKind::ArtifactPut(p) => Some(json!(p.meta)),
                    FactKind::ArtifactGet(g) => Some(json!([g.id, g.meta])),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let replayed = metas(&report.facts);
        assert_eq!(replayed, metas(&recording.facts), "{}", recording.source);
        assert_eq!(replayed.len(), 3);
        assert_eq!(
            replayed[0]["id"],
            json!(id),
            "the recorded id is given back"
        );
        assert_eq!(
            replayed[0]["scope"], out["scope"],
            "the recorded scope is given back"
        );
        assert_eq!(
            replayed[2][1],
            Value::Null,
            "the foreign get finds nothing again"
        );
    }
}

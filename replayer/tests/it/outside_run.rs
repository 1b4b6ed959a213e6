//! A call outside any run (seed 000: `runId` is absent where there is no
//! run, as for a call served over MCP). Recorded through the real recorder
//! into a real archive: the tool sees no run id, the archive keeps the call
//! as a stream of its own under the key the recorder assigned (no run id is
//! invented, no `run.started` is filed), the stream ends with the call's
//! own `call.ended`, the tape carries it, the archive verifies, and the
//! replay gives the tool the same answers.

use std::sync::Arc;

use reel::context::*;
use reel::fact::*;
use reel::tape::Tape;
use reel::tools::Tools;
use reel::RunState;
use reel_archive::TapeExt;
use reel_archive::{Archive, ArchiveConfig};
use reel_archive::{FingerprintKey, RunFilter};
use reel_recorder::{Caller, MemoryArtifactStore, Recorder, RecorderConfig};
use reel_replayer::{replay, Recording, ReplayOptions};
use serde_json::{json, Value};

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
        principal: Some("ada".into()),
        conversation: None,
    }
}

/// What a tool can see of where it stands, as a value the record keeps.
fn whereabouts(ctx: &ToolContext) -> Value {
    json!({
        "run_id": ctx.run_id(),
        "outside": matches!(ctx.home(), Home::OutsideRun { .. }),
        "diagnostics_run": ctx.diagnostics().map(|d| d.run_id.clone()),
        "session": ctx.session_id(),
        "scopes": ctx.teardown_scopes().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    })
}

fn tools() -> Tools {
    Tools::new()
        .register("child", |ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(whereabouts(&ctx))
        })
        .register("lookup", |ctx: ToolContext, args: Value| async move {
            let me = whereabouts(&ctx);
            // The call scope is honoured, under a key naming this stream.
            let key = ctx.teardown_key(TeardownScope::Call)?;
            ctx.on_teardown(TeardownScope::Call, key.as_str(), || async {
                Ok::<_, String>(())
            })?;
            // There is no run to tie a cleanup to, nor a session end.
            let run_refusal = ctx
                .on_teardown(TeardownScope::Run, "k", || async { Ok::<_, String>(()) })
                .unwrap_err()
                .to_string();
            let session_refusal = ctx
                .on_teardown(TeardownScope::Session, "k", || async {
                    Ok::<_, String>(())
                })
                .unwrap_err()
                .to_string();
            let meta = ctx.artifacts().put("text/plain", b"hello".to_vec()).await?;
            ctx.progress(json!({ "message": "half way" }));
            let child = ctx.dispatch("child", json!({})).await?;
            Ok::<_, ToolError>(json!({
                "me": me,
                "child": child,
                "call_key": key.as_str(),
                "run_refusal": run_refusal,
                "session_refusal": session_refusal,
                "scope": meta.scope,
                "origin_run": meta.origin.run_id,
                "q": args["q"],
            }))
        })
        .register("fails", |_: ToolContext, _: Value| async move {
            Err::<Value, _>(ToolError::msg("no such page"))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_outside_any_run_is_kept_as_itself_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path().join("archive"), config())
        .await
        .unwrap();
    let t = tools();
    let call = recorder
        .call_from(
            Caller::new()
                .session("mcp-session-1")
                .identity(acme())
                .label("door", "mcp"),
            "lookup",
            json!({ "q": "tides" }),
        )
        .unwrap()
        .artifacts(Arc::new(MemoryArtifactStore::new()))
        .dispatcher(t.clone());
    let key = call.key().to_owned();
    assert!(key.starts_with("call-") && key.len() == 37, "{key}");
    let out = call.invoke_tool(&t).await.unwrap();
    let failing = recorder.call("fails", json!({}));
    let failing_key = failing.key().to_owned();
    assert_ne!(failing_key, key, "each call outside a run has its own key");
    failing.invoke_tool(&t).await.unwrap_err();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();

    // The tool saw no run id, anywhere it could look.
    for who in [&out["me"], &out["child"]] {
        assert_eq!(who["run_id"], Value::Null, "{out}");
        assert_eq!(who["diagnostics_run"], Value::Null, "{out}");
        assert_eq!(who["outside"], true, "{out}");
        assert_eq!(who["session"], "mcp-session-1", "{out}");
        assert_eq!(who["scopes"], json!(["call"]), "{out}");
    }
    // The call scope's key names the stream, not a run.
    let call_key = out["call_key"].as_str().unwrap();
    assert!(
        call_key.contains(&key) && !call_key.contains(";run="),
        "{call_key}"
    );
    // Refusals name the door, and the scopes it honours.
    let refusal = out["run_refusal"].as_str().unwrap();
    assert!(
        refusal.contains("serving a call outside any run") && refusal.contains("honours: call"),
        "{refusal}"
    );
    assert!(out["session_refusal"]
        .as_str()
        .unwrap()
        .contains("serving a call outside any run"));
    // Artifacts: scoped to the session, put by no run.
    assert_eq!(out["scope"]["conversation"], "session:mcp-session-1");
    assert_eq!(out["origin_run"], Value::Null);

    // The archive keeps the call under its own key: no run.started, the
    // call.started heads the stream, the call.ended closes it.
    let record = archive.run(&key).unwrap();
    assert_eq!(record.outside_run.as_deref(), Some("c1"));
    assert_eq!(record.run(), None);
    assert_eq!(record.state, RunState::Completed);
    assert_eq!(record.tenant(), Some("acme"));
    assert_eq!(record.session_id.as_deref(), Some("mcp-session-1"));
    assert!(record.ended_at.is_some());
    let facts: Vec<Fact> = archive
        .facts(&key, ..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(facts
        .iter()
        .all(|f| !matches!(f.kind, FactKind::RunStarted(_) | FactKind::RunEnded(_))));
    let FactKind::CallStarted(head) = &facts[0].kind else {
        panic!("{:?}", facts[0]);
    };
    let outside = head.outside_run.as_deref().unwrap();
    assert_eq!(outside.key, key);
    assert_eq!(outside.identity, Some(acme()));
    assert_eq!(outside.labels.get("door").map(String::as_str), Some("mcp"));
    assert_eq!(outside.teardown_scopes, [TeardownScope::Call]);
    assert!(
        matches!(&facts.last().unwrap().kind, FactKind::CallEnded(_))
            && facts.last().unwrap().call.as_deref() == Some("c1")
    );
    // The child is in the same stream, and carries no head of its own.
    let child = facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::CallStarted(c) if c.parent_call.is_some() => Some(c),
            _ => None,
        })
        .unwrap();
    assert!(child.outside_run.is_none());

    // A failed call outside any run is a failed stream.
    assert_eq!(archive.run(&failing_key).unwrap().state, RunState::Failed);
    // Listing by tenant finds the call (an index read, like a run's).
    let page = archive
        .list_runs(&RunFilter {
            tenant: Some("acme".into()),
            ..RunFilter::default()
        })
        .unwrap();
    assert_eq!(
        page.runs
            .iter()
            .map(|r| r.run_id.as_str())
            .collect::<Vec<_>>(),
        [key.as_str()]
    );
    // The stream keeps the rules; nothing more can be appended to it.
    assert!(archive.verify().unwrap().is_ok());
    let late = archive.append(
        &key,
        vec![NewFact {
            at: 0,
            offset: 0,
            call: Some("c1".into()),
            kind: FactKind::CancelRequested(CancelRequested { reason: None }),
        }],
    );
    assert!(late.is_err(), "{late:?}");

    // The tape says "no run" in its header, imports into another archive,
    // and replays with the same answers.
    let tape = Tape::export(&archive, &key).unwrap();
    assert_eq!(tape.header.run.outside_run.as_deref(), Some("c1"));
    let mut bytes = Vec::new();
    tape.write(&mut bytes).unwrap();
    let other = Archive::open(
        dir.path().join("other"),
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([7; 32]),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let imported = Tape::read(&bytes[..]).unwrap().import(&other).unwrap();
    assert_eq!(imported.outside_run.as_deref(), Some("c1"));
    assert_eq!(imported.run_id, key);

    let recording = Recording::from_archive(&archive, &key).unwrap();
    assert_eq!(recording.head.run_id(), None);
    let report = replay(&recording, &t, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.outside_run);
    assert!(
        report
            .to_string()
            .starts_with("replay of a call outside any run"),
        "{report}"
    );
    assert_eq!(report.facts.len(), facts.len());
}

/// A tool that asks for its run id gets `None` outside a run, and the
/// replay of a tool that (wrongly) assumed a run diverges: the answer is on
/// the record, not made up in replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_gives_back_no_run_id_and_a_run_call_keeps_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path().join("archive"), config())
        .await
        .unwrap();
    let t = Tools::new().register("where", |ctx: ToolContext, _: Value| async move {
        Ok::<_, ToolError>(json!(ctx.run_id()))
    });
    let outside = recorder.call("where", json!({}));
    let key = outside.key().to_owned();
    assert_eq!(outside.invoke_tool(&t).await.unwrap(), Value::Null);
    let run = recorder
        .start_run(reel_recorder::RunStart::new("r1"))
        .await
        .unwrap();
    assert_eq!(run.call("where", json!({})).key(), "r1");
    assert_eq!(
        run.call("where", json!({})).invoke_tool(&t).await.unwrap(),
        "r1"
    );
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    assert_eq!(archive.run("r1").unwrap().outside_run, None);
    assert_eq!(archive.run("r1").unwrap().run(), Some("r1"));

    let recording = Recording::from_archive(&archive, &key).unwrap();
    assert!(replay(&recording, &t, &ReplayOptions::default())
        .await
        .is_match());
    // A tool that makes up a run id where there is none diverges.
    let invents = Tools::new().register("where", |ctx: ToolContext, _: Value| async move {
        Ok::<_, ToolError>(json!(ctx.run_id().unwrap_or("run-1")))
    });
    let report = replay(&recording, &invents, &ReplayOptions::default()).await;
    assert!(!report.is_match(), "{report}");
}

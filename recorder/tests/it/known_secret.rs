//! `RunStart::secret` and `Run::secret`: a value the host knows is secret is scrubbed from
//! every fact of the run, its `run.started` (labels) included, and reaches
//! no file of the archive.

use reel::context::{Secret, ToolContext, ToolError};
use reel::fact::{FactKind, RunStatus};
use reel_archive::FingerprintKey;
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

const TOKEN: &str = "ghp_known0secret0value0for0the0run0123456";

async fn echo(ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    ctx.progress(json!({ "message": format!("using {TOKEN}") }));
    Ok(args)
}

fn files_holding(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    crate::canary::files_under(dir)
        .into_iter()
        .filter(|path| {
            std::fs::read(path)
                .unwrap()
                .windows(needle.len())
                .any(|w| w == needle)
        })
        .collect()
}

/// A recorder into `dir` with a fixed fingerprint key and no live socket.
async fn recorder(dir: &std::path::Path) -> Recorder {
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([5; 32]),
        serve_live: false,
        ..RecorderConfig::default()
    };
    Recorder::open(dir, config).await.unwrap()
}

#[tokio::test]
async fn a_known_secret_is_scrubbed_from_every_fact_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = recorder(dir.path()).await;
    let run = recorder
        .start_run(
            RunStart::new("known-secret")
                .label("command", format!("server --token {TOKEN}"))
                .secret(Secret::new(TOKEN)),
        )
        .await
        .unwrap();
    let out = run
        .call("echo", json!({ "note": TOKEN }))
        .invoke(echo)
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({ "note": TOKEN }),
        "the tool itself sees the value"
    );
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();

    let mut labels = None;
    let mut shown = String::new();
    for fact in archive.facts("known-secret", ..).unwrap() {
        let fact = fact.unwrap();
        if let FactKind::RunStarted(s) = &fact.kind {
            labels = Some(s.labels.clone());
        }
        shown.push_str(&serde_json::to_string(&fact).unwrap());
    }
    // Marked by the host's secret's keyed tag, the same everywhere.
    let command = labels.unwrap()["command"].clone();
    let marker = command.strip_prefix("server --token ").unwrap();
    assert!(marker.starts_with("[REDACTED:"), "{command}");
    assert!(!shown.contains(TOKEN), "{shown}");
    assert!(shown.contains(&format!(r#""note":"{marker}""#)), "{shown}");
    drop(archive);
    assert_eq!(
        files_holding(dir.path(), TOKEN.as_bytes()),
        Vec::<std::path::PathBuf>::new()
    );
}

/// `Run::secret`: a value learnt once the run is going (a secure argument
/// a proxy receives with a call) is scrubbed from the `call.started` of
/// the call that carries it and from everything after, whenever the
/// writer happens to drain; a fact filed before it keeps its own values.
#[tokio::test]
async fn a_secret_learnt_during_the_run_is_scrubbed_from_the_next_call_on() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = recorder(dir.path()).await;
    let run = recorder
        .start_run(RunStart::new("learnt-secret"))
        .await
        .unwrap();
    // Nothing secret yet: the earlier call holds its value as it was.
    run.call("before", json!({ "note": "plain" }))
        .invoke(|_ctx: ToolContext, args: Value| async move { Ok::<_, ToolError>(args) })
        .await
        .unwrap();
    run.secret(Secret::new(TOKEN));
    run.secret(Secret::new(""));
    run.call("echo", json!({ "note": TOKEN }))
        .invoke(echo)
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();

    let mut started = Vec::new();
    for fact in archive.facts("learnt-secret", ..).unwrap() {
        let fact = fact.unwrap();
        if let FactKind::CallStarted(c) = &fact.kind {
            started.push(c.args["note"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(started[0], "plain");
    assert!(started[1].starts_with("[REDACTED:"), "{started:?}");
    drop(archive);
    assert_eq!(
        files_holding(dir.path(), TOKEN.as_bytes()),
        Vec::<std::path::PathBuf>::new()
    );
}

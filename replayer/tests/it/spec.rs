//! Tool specs and the seeds' promises around them, each recorded through a
//! real recorder into a real archive, exported as a tape, and replayed from
//! that tape with no divergence: a rejected input never runs the tool;
//! every declared credential is reachable by name; a want resolves into
//! the args (and `wanted` is present only then); a sync tool is recorded
//! as sync; the invocation id is shared by a call's start and end; the
//! diagnostics are the record's, live and in replay; the spec is on the
//! record and given back in replay.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use reel::context::*;
use reel::fact::*;
use reel::report::ReplayReport;
use reel::spec::{claim_ticket, Annotations, InputError, JsonSchema, ToolSpec, ToolSpecExt};
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::TapeExt;
use reel_recorder::{MemoryArtifactStore, MemoryVault, Recorder, RecorderConfig, Run, RunStart};
use reel_replayer::{replay, Recording, ReplayOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::support::result_of;

// ---------------------------------------------------------------------------
// Recording and replaying
// ---------------------------------------------------------------------------

fn acme() -> Identity {
    Identity {
        tenant: Some("acme".into()),
        principal: Some("ann".into()),
        conversation: None,
    }
}

/// Records one run named `name` (the host's calls are `host`) in a fresh
/// archive, exports it as a tape and loads the tape back: what replay
/// reads is the file, not the archive.
async fn record<F, Fut>(name: &str, host: F) -> Recording
where
    F: FnOnce(Run) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path().join("archive"), RecorderConfig::default())
        .await
        .unwrap();
    let run = recorder
        .start_run(RunStart::new(name).identity(acme()))
        .await
        .unwrap();
    host(run.clone()).await;
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let path = dir.path().join(format!("{name}.tape.jsonl"));
    let mut file = std::fs::File::create(&path).unwrap();
    Tape::export(&archive, name)
        .unwrap()
        .write(&mut file)
        .unwrap();
    drop(file);
    Recording::from_tape_file(&path).unwrap()
}

/// Replays `recording` against `tools` and asserts that every call matched,
/// its facts and its result.
async fn replays_clean(recording: &Recording, tools: &Tools) -> ReplayReport {
    let report = replay(recording, tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
    assert_eq!(report.calls.len(), recording.calls.len(), "{report}");
    report
}

fn started<'a>(recording: &'a Recording, call: &str) -> &'a CallStarted {
    &recording.calls[call].started
}

fn ended<'a>(recording: &'a Recording, call: &str) -> &'a CallEnded {
    recording.calls[call].ended().expect("the call ended")
}

fn kinds(recording: &Recording, call: &str) -> Vec<String> {
    recording.calls[call]
        .facts
        .iter()
        .map(|f| f.kind.name().to_owned())
        .collect()
}

fn error_of(recording: &Recording, call: &str) -> String {
    match &ended(recording, call).outcome {
        CallOutcome::Error { error, .. } => error.clone(),
        other => panic!("call {call} ended {other:?}, not with an error"),
    }
}

// ---------------------------------------------------------------------------
// Input validation
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Env {
    Prod,
    Staging,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct DeployArgs {
    service: String,
    #[schemars(range(min = 1, max = 10))]
    replicas: u8,
    env: Env,
}

fn deploy_spec() -> ToolSpec {
    ToolSpec::new::<DeployArgs, Value>("deploy")
        .title("Deploy a service")
        .annotations(Annotations {
            destructive_hint: Some(true),
            ..Annotations::default()
        })
        .needs(["github"])
}

async fn deploy(
    ctx: ToolContext,
    args: DeployArgs,
    ran: Arc<AtomicUsize>,
) -> Result<Value, ToolError> {
    ran.fetch_add(1, Ordering::SeqCst);
    ctx.progress(json!({ "message": format!("deploying {}", args.service) }));
    Ok(json!({ "service": args.service, "replicas": args.replicas }))
}

fn deploy_tools(spec: ToolSpec, ran: Arc<AtomicUsize>) -> Tools {
    Tools::new().tool(spec, move |ctx, args: DeployArgs| {
        deploy(ctx, args, ran.clone())
    })
}

fn vault() -> Arc<MemoryVault> {
    Arc::new(
        MemoryVault::new()
            .with("github", "ghp_specTestSecret1")
            .with("registry", "reg_specTestSecret2")
            .with("slack", "xoxb_specTestSecret3"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_input_is_recorded_and_the_tool_never_runs() {
    let ran = Arc::new(AtomicUsize::new(0));
    let tools = deploy_tools(deploy_spec(), ran.clone());
    let bad = json!({ "service": 7, "replicas": 0, "env": "qa" });
    let t = tools.clone();
    let b = bad.clone();
    let recording = record("rejected", |run| async move {
        let out = run
            .call("deploy", &b)
            .credentials(vault())
            .invoke_tool(&t)
            .await;
        let Err(ToolError::InvalidInput { tool, errors, .. }) = out else {
            panic!("expected a rejected input, got {out:?}");
        };
        assert_eq!(tool, "deploy");
        let mut pointers: Vec<&str> = errors.iter().map(|e| e.pointer.as_str()).collect();
        pointers.sort();
        assert_eq!(pointers, ["/env", "/replicas", "/service"], "{errors:?}");
        // A good input runs, in the same run.
        run.call(
            "deploy",
            json!({ "service": "billing", "replicas": 2, "env": "prod" }),
        )
        .credentials(vault())
        .invoke_tool(&t)
        .await
        .unwrap();
    })
    .await;
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only the good input ran");

    // Recorded with its args, ended with an error naming each pointer; no
    // credential was resolved for it.
    assert_eq!(started(&recording, "c1").args, bad);
    assert_eq!(kinds(&recording, "c1"), ["call.started", "call.ended"]);
    let error = error_of(&recording, "c1");
    for part in [
        "tool \"deploy\" rejected its input, so it did not run",
        "/env: ",
        "/replicas: 0 is less than the minimum of 1",
        "/service: 7 is not of type \"string\"",
        "send arguments that match the tool's input schema",
    ] {
        assert!(error.contains(part), "{part:?} is not in {error:?}");
    }
    assert_eq!(
        kinds(&recording, "c2")[..3],
        [
            "call.started",
            "credential.requested",
            "credential.resolved"
        ]
    );

    // Replay: the same input fails the same way, and the tool never runs.
    let replayed = Arc::new(AtomicUsize::new(0));
    let report = replays_clean(&recording, &deploy_tools(deploy_spec(), replayed.clone())).await;
    assert_eq!(replayed.load(Ordering::SeqCst), 1, "{report}");
    assert_eq!(
        report.calls[0].result.actual,
        Some(ended(&recording, "c1").outcome.clone())
    );

    // Today's looser schema accepts the input: the tool runs, and the
    // replay says where that differs (the spec difference ignored).
    let loose = deploy_spec().input_schema(json!({ "type": "object" }));
    let report = replay(
        &recording,
        &Tools::new().tool(loose, |ctx: ToolContext, args: Value| async move {
            ctx.progress(json!({ "message": "deploying anyway" }));
            Ok::<_, ToolError>(args)
        }),
        &ReplayOptions::default().ignore("call.started", "/spec"),
    )
    .await;
    assert!(!report.is_match(), "{report}");
    assert_eq!(
        report.problems()[0],
        "call c1 `deploy`, fact 1: the record has no fact here, the tool filed \"credential.requested\"",
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatched_child_is_validated_too() {
    let ran = Arc::new(AtomicUsize::new(0));
    let children = deploy_tools(deploy_spec(), ran.clone());
    let parent = |ctx: ToolContext, replicas: u8| async move {
        let out = ctx
            .dispatch(
                "deploy",
                json!({ "service": "billing", "replicas": replicas, "env": "prod" }),
            )
            .await;
        Ok::<_, ToolError>(json!({ "child": out.map_err(|e| e.to_string()) }))
    };
    let tools = children.clone().register("rollout", parent);
    let t = tools.clone();
    let recording = record("dispatch", |run| async move {
        run.call("rollout", 11u8)
            .credentials(vault())
            .dispatcher(t.clone())
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(kinds(&recording, "c2"), ["call.started", "call.ended"]);
    assert!(
        error_of(&recording, "c2").contains("/replicas: 11 is greater than the maximum of 10"),
        "{}",
        error_of(&recording, "c2")
    );
    replays_clean(&recording, &tools).await;
}

// ---------------------------------------------------------------------------
// Declared credentials
// ---------------------------------------------------------------------------

fn who(c: Option<&Credential>) -> Value {
    c.map_or(Value::Null, |c| json!(c.fingerprint.0))
}

async fn publish(ctx: ToolContext, _args: Value) -> Result<Value, ToolError> {
    Ok(json!({
        "first": ctx.declared_credential().map(|c| c.need.clone()),
        "all": ctx.declared_credentials().iter().map(|c| c.need.clone()).collect::<Vec<_>>(),
        "github": who(ctx.declared("github")),
        "registry": who(ctx.declared("registry")),
        "slack": who(ctx.declared("slack")),
        "undeclared": who(ctx.declared("pager")),
    }))
}

fn publish_tools() -> Tools {
    Tools::new().tool(
        ToolSpec::new::<Value, Value>("publish").needs(["github", "registry"]),
        publish,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_declared_credential_is_reachable_by_name() {
    let tools = publish_tools();
    let t = tools.clone();
    let recording = record("needs", |run| async move {
        // The host's own needs add to the spec's; one declared twice
        // resolves once.
        run.call("publish", json!({}))
            .needs("slack")
            .needs("github")
            .credentials(vault())
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    let out = result_of(&recording, "c1");
    assert_eq!(out["first"], "github", "declared_credential() is the first");
    assert_eq!(out["all"], json!(["github", "registry", "slack"]));
    assert_eq!(out["undeclared"], Value::Null);
    let fingerprints: Vec<&str> = ["github", "registry", "slack"]
        .iter()
        .map(|n| out[*n].as_str().unwrap())
        .collect();
    assert!(
        fingerprints.iter().all(|f| f.starts_with("hmac-sha256:")),
        "{out}"
    );
    assert_ne!(fingerprints[0], fingerprints[1]);
    assert_ne!(fingerprints[1], fingerprints[2]);
    let requested: Vec<(String, CredentialMode)> = recording.calls["c1"]
        .facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CredentialRequested(r) => Some((r.need.clone(), r.mode)),
            _ => None,
        })
        .collect();
    assert_eq!(
        requested,
        [
            ("github".to_owned(), CredentialMode::Declared),
            ("registry".to_owned(), CredentialMode::Declared),
            ("slack".to_owned(), CredentialMode::Declared),
        ]
    );
    // No secret reached the record.
    let text = serde_json::to_string(&recording.facts).unwrap();
    assert!(!text.contains("specTestSecret"), "{text}");

    // Replay hands out stand-ins with the recorded fingerprints, by name.
    replays_clean(&recording, &tools).await;
}

// ---------------------------------------------------------------------------
// Wants
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Plan {
    steps: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct ApplyArgs {
    plan: Plan,
    env: String,
}

/// Stores a plan as a JSON artifact and returns its ticket.
async fn draft(ctx: ToolContext, steps: Vec<String>) -> Result<ArtifactMeta, ToolError> {
    let bytes = serde_json::to_vec(&Plan { steps }).unwrap();
    Ok(ctx.artifacts().put("application/json", bytes).await?)
}

async fn apply(ctx: ToolContext, args: ApplyArgs) -> Result<Value, ToolError> {
    Ok(json!({
        "steps": args.plan.steps,
        "wanted": ctx.wanted().map(|w| w.keys().cloned().collect::<Vec<_>>()),
    }))
}

/// Declares no wants: a ticket in its args is just data.
async fn echo(ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    Ok(json!({ "args": args, "wanted": ctx.wanted().is_some() }))
}

fn wants_tools() -> Tools {
    Tools::new()
        .register("draft", draft)
        .tool(
            ToolSpec::new::<ApplyArgs, Value>("apply").wants(["plan"]),
            apply,
        )
        .tool(ToolSpec::new::<Value, Value>("echo"), echo)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_want_resolves_into_the_args_and_wanted_is_present_only_then() {
    let tools = wants_tools();
    let t = tools.clone();
    let store = Arc::new(MemoryArtifactStore::new());
    let recording = record("wants", |run| async move {
        let meta: ArtifactMeta = run
            .call("draft", ["build", "push"])
            .artifacts(store.clone())
            .invoke(draft)
            .await
            .unwrap();
        let ticket = claim_ticket(&meta);
        // c2: resolved.
        run.call("apply", json!({ "plan": ticket, "env": "prod" }))
            .artifacts(store.clone())
            .invoke_tool(&t)
            .await
            .unwrap();
        // c3: wants declared, the data passed inline: none resolved.
        run.call(
            "apply",
            json!({ "plan": { "steps": ["inline"] }, "env": "prod" }),
        )
        .artifacts(store.clone())
        .invoke_tool(&t)
        .await
        .unwrap();
        // c4: no wants declared: the ticket stays as it is.
        run.call("echo", json!({ "plan": ticket }))
            .artifacts(store.clone())
            .invoke_tool(&t)
            .await
            .unwrap();
        // c5: a ticket to nothing in this scope: it does not resolve, and
        // the input is rejected, saying so.
        let mut missing = meta.clone();
        missing.id = "art-404".into();
        let out = run
            .call(
                "apply",
                json!({ "plan": claim_ticket(&missing), "env": "prod" }),
            )
            .artifacts(store.clone())
            .invoke_tool(&t)
            .await;
        assert!(
            matches!(out, Err(ToolError::InvalidInput { .. })),
            "{out:?}"
        );
    })
    .await;
    let meta = match &ended(&recording, "c1").outcome {
        CallOutcome::Ok { result } => {
            serde_json::from_value::<ArtifactMeta>(result.clone()).unwrap()
        }
        other => panic!("{other:?}"),
    };

    // Resolved: the data replaced the ticket in the recorded args, and
    // `wanted` names the ticket.
    let c2 = started(&recording, "c2");
    assert_eq!(c2.args["plan"], json!({ "steps": ["build", "push"] }));
    assert_eq!(
        c2.wanted,
        Some(BTreeMap::from([("plan".to_owned(), meta.clone())]))
    );
    assert_eq!(
        result_of(&recording, "c2"),
        json!({ "steps": ["build", "push"], "wanted": ["plan"] })
    );

    // None resolved: absent, not empty.
    assert_eq!(started(&recording, "c3").wanted, None);
    assert_eq!(result_of(&recording, "c3")["wanted"], Value::Null);

    // No wants declared: absent, and the ticket untouched.
    let c4 = started(&recording, "c4");
    assert_eq!(c4.wanted, None);
    assert_eq!(c4.args["plan"], claim_ticket(&meta));
    assert_eq!(result_of(&recording, "c4")["wanted"], json!(false));

    // Unresolved: the ticket stays, validation rejects it and says why.
    assert_eq!(started(&recording, "c5").wanted, None);
    let error = error_of(&recording, "c5");
    assert!(error.contains("/plan: "), "{error}");
    assert!(
        error.contains("wanted argument plan still holds a claim ticket"),
        "{error}"
    );

    // Replay gives the tools the recorded data and tickets, offline.
    replays_clean(&recording, &tools).await;
}

// ---------------------------------------------------------------------------
// Sync tools
// ---------------------------------------------------------------------------

/// A plain function: the same context, its sync capabilities.
fn count(ctx: ToolContext, n: u32) -> Result<Value, ToolError> {
    for i in 1..=n {
        ctx.progress(json!({ "message": format!("{i} of {n}") }));
    }
    let at = ctx.now();
    ctx.log(Level::Info, json!({ "counted": n }));
    ctx.check_cancel()?;
    Ok(json!({
        "mode": ctx.mode(),
        "spec_mode": ctx.spec().map(|s| s.mode),
        "clock_read": at > 0,
    }))
}

fn count_spec() -> ToolSpec {
    ToolSpec::new::<u32, Value>("count").title("Count")
}

fn sync_tools() -> Tools {
    Tools::new()
        .tool_sync(count_spec(), count)
        .register_sync("tally", count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_tool_is_recorded_as_sync() {
    let tools = sync_tools();
    let t = tools.clone();
    let recording = record("sync", |run| async move {
        run.call("count", 3u32).invoke_tool(&t).await.unwrap();
        run.call("tally", 2u32).invoke_tool(&t).await.unwrap();
        // The host's own path: a spec set by hand says async; the function
        // invoked is sync, and that is what the record says.
        let out = run
            .call("count", 1u32)
            .spec(count_spec())
            .invoke_sync(count)
            .await
            .unwrap();
        assert_eq!(out["mode"], "sync");
    })
    .await;
    for call in ["c1", "c2", "c3"] {
        let s = started(&recording, call);
        assert_eq!(s.mode, CallMode::Sync, "{call}");
        assert_eq!(result_of(&recording, call)["mode"], "sync", "{call}");
    }
    assert_eq!(
        started(&recording, "c1").spec.as_ref().unwrap().mode,
        CallMode::Sync
    );
    assert_eq!(
        started(&recording, "c3").spec.as_ref().unwrap().mode,
        CallMode::Sync
    );
    assert_eq!(started(&recording, "c2").spec, None);
    assert_eq!(
        kinds(&recording, "c1"),
        [
            "call.started",
            "progress",
            "progress",
            "progress",
            "clock",
            "log",
            "call.ended"
        ]
    );

    replays_clean(&recording, &tools).await;

    // The same body registered as an async tool is a different fact.
    let as_async = Tools::new()
        .tool(count_spec(), |ctx, n: u32| async move { count(ctx, n) })
        .register("tally", |ctx, n: u32| async move { count(ctx, n) });
    let report = replay(&recording, &as_async, &ReplayOptions::default()).await;
    assert_eq!(
        report.problems()[0],
        "call c1 `count`, fact 0 (seq 1), call.started:/mode: expected \"sync\", got \"async\"",
        "{report}"
    );
}

// ---------------------------------------------------------------------------
// Invocation ids and diagnostics
// ---------------------------------------------------------------------------

async fn whoami(ctx: ToolContext, child: bool) -> Result<Value, ToolError> {
    let diagnostics = ctx.diagnostics().map(|d| {
        json!({
            "run_id": d.run_id,
            "call_id": d.call_id,
            "invocation_id": d.invocation_id,
            "producer": d.producer.name,
        })
    });
    // On the record, so that replay must give back the same values.
    ctx.log(Level::Debug, json!({ "diagnostics": diagnostics }));
    let nested = if child {
        Some(ctx.dispatch("whoami", false).await?)
    } else {
        None
    };
    Ok(json!({
        "invocation_id": ctx.invocation_id(),
        "diagnostics": diagnostics,
        "child": nested,
    }))
}

fn inv_tools() -> Tools {
    Tools::new().register("whoami", whoami)
}

fn is_generated(id: &str) -> bool {
    id.len() == 36 && id.starts_with("inv-") && id[4..].chars().all(|c| c.is_ascii_hexdigit())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_invocation_id_is_shared_by_start_and_end() {
    let tools = inv_tools();
    let t = tools.clone();
    let recording = record("invocations", |run| async move {
        let call = run.call("whoami", false);
        let generated = call.invocation().to_owned();
        assert!(is_generated(&generated), "{generated}");
        let out = call.invoke_tool(&t).await.unwrap();
        assert_eq!(out["invocation_id"], generated.as_str());
        run.call("whoami", false).invoke_tool(&t).await.unwrap();
        run.call("whoami", true)
            .invocation_id("receipt-42")
            .dispatcher(t.clone())
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    let mut seen = Vec::new();
    for call in ["c1", "c2", "c3", "c4"] {
        let start = started(&recording, call).invocation_id.clone().unwrap();
        assert_eq!(
            ended(&recording, call).invocation_id.as_deref(),
            Some(start.as_str()),
            "{call}"
        );
        seen.push(start);
    }
    assert!(
        is_generated(&seen[0]) && is_generated(&seen[1]) && is_generated(&seen[3]),
        "{seen:?}"
    );
    assert_ne!(seen[0], seen[1], "each call gets its own");
    assert_eq!(seen[2], "receipt-42", "the host's own id");
    assert_eq!(started(&recording, "c4").parent_call.as_deref(), Some("c3"));
    assert_eq!(
        result_of(&recording, "c1")["invocation_id"],
        seen[0].as_str()
    );

    // Replay gives the tool the recorded ids and files them on call.ended.
    let report = replays_clean(&recording, &tools).await;
    let ended_ids: Vec<Option<String>> = report
        .facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CallEnded(e) => Some(e.invocation_id.clone()),
            _ => None,
        })
        .collect();
    // c4 (the child) ends before its parent c3.
    let want = [&seen[0], &seen[1], &seen[3], &seen[2]].map(|s| Some(s.clone()));
    assert_eq!(ended_ids, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_are_present_when_recording_and_the_records_in_replay() {
    let tools = inv_tools();
    let t = tools.clone();
    let recording = record("diagnostics", |run| async move {
        run.call("whoami", false).invoke_tool(&t).await.unwrap();
    })
    .await;
    let d = &result_of(&recording, "c1")["diagnostics"];
    assert_eq!(d["run_id"], "diagnostics");
    assert_eq!(d["call_id"], "c1");
    assert_eq!(
        d["invocation_id"],
        started(&recording, "c1")
            .invocation_id
            .clone()
            .unwrap()
            .as_str()
    );
    assert_eq!(d["producer"], "reel-recorder");
    // The log fact holding them matches in replay: the same values.
    replays_clean(&recording, &tools).await;
}

/// A backend for a context built by hand, without recording: answers
/// nothing, files nothing.
/// A backend with no providers that keeps what it is given to file; with
/// `slow` set, a progress report says it has begun filing and takes a
/// while to finish (to race a close against it).
#[derive(Default)]
struct Bare(
    std::sync::Mutex<Vec<FactKind>>,
    std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>,
);

impl CallBackend for Bare {
    fn emit(&self, kind: FactKind) {
        let slow = self.1.lock().unwrap().clone();
        if let (FactKind::Progress(_), Some(begun)) = (&kind, slow) {
            begun.send(()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        self.0.lock().unwrap().push(kind);
    }
    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    fn has_credentials(&self) -> bool {
        false
    }
    fn credential<'a>(
        &'a self,
        _need: &'a CredentialNeed,
        _mode: CredentialMode,
    ) -> BoxFuture<'a, Result<Credential, String>> {
        Box::pin(async { Err("none".to_owned()) })
    }
    fn has_artifacts(&self) -> bool {
        false
    }
    fn put_artifact<'a>(
        &'a self,
        _media_type: &'a str,
        _bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<ArtifactMeta, String>> {
        Box::pin(async { Err("none".to_owned()) })
    }
    fn get_artifact<'a>(
        &'a self,
        _id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FoundArtifact>, String>> {
        Box::pin(async { Ok(None) })
    }
    fn has_elicitor(&self) -> bool {
        false
    }
    fn elicit<'a>(&'a self, _q: &'a Elicitation) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        Box::pin(async { Err("none".to_owned()) })
    }
    fn effect<'a>(
        &'a self,
        _name: &'a str,
        _request: &'a Value,
        _run: EffectFn,
    ) -> BoxFuture<'a, EffectOutcome> {
        Box::pin(async { EffectOutcome::Err("none".to_owned()) })
    }
    fn clock(&self) -> i64 {
        0
    }
    fn random(&self) -> u64 {
        0
    }
    fn register_teardown(
        &self,
        _scope: TeardownScope,
        _holder: &TeardownKey,
        _key_hash: &str,
        _cleanup: Cleanup,
    ) -> Registration {
        Registration {
            first: false,
            registrations: 0,
            at: 0,
        }
    }
    fn can_dispatch(&self) -> bool {
        false
    }
    fn dispatch<'a>(
        &'a self,
        tool: &'a str,
        _args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move { Err(ToolError::UnknownTool(tool.to_owned())) })
    }
    fn deliver_log(&self, _level: Level, _data: &Value) -> bool {
        false
    }
    fn content_logging(&self) -> bool {
        false
    }
}

#[tokio::test]
async fn a_context_built_by_hand_has_no_diagnostics() {
    let started = CallStarted {
        call_id: "h1".into(),
        tool_name: "whoami".into(),
        tool_id: None,
        parent_call: None,
        iteration: 0,
        invocation_id: None,
        mode: CallMode::Async,
        protocol: None,
        platform: None,
        client_info: None,
        args: json!(false),
        wanted: None,
        attached: None,
        spec: None,
        dispatch_tools: None,
        outside_run: None,
    };
    let info = CallInfo {
        home: Home::Run("by-hand".into()),
        session_id: None,
        identity: None,
        teardown_scopes: Vec::new(),
        started,
        diagnostics: None,
    };
    let ctx = ToolContext::new(info, Arc::new(Bare::default()), None, &CancelHandle::new());
    assert!(ctx.diagnostics().is_none());
    assert!(ctx.spec().is_none());
    assert!(ctx.declared_credentials().is_empty());
    // Without an invocation id on its record, the call id stands in.
    assert_eq!(ctx.invocation_id(), "h1");
    let out = whoami(ctx, false).await.unwrap();
    assert_eq!(out["diagnostics"], Value::Null);
}

/// A call of `walk` as a host builds it by hand (no recorder).
fn walk_by_hand() -> CallInfo {
    let started: CallStarted = serde_json::from_value(json!({
        "call_id": "h1", "tool_name": "walk", "mode": "async", "args": {},
    }))
    .unwrap();
    CallInfo {
        home: Home::Run("by-hand".into()),
        session_id: None,
        identity: None,
        teardown_scopes: Vec::new(),
        started,
        diagnostics: None,
    }
}

/// Seed 000's progress on a context a host built by hand (no recorder):
/// `progress` hands the backend the payload untouched, `progress_mcp` the
/// MCP payload with its named parts, answering whether a client was sent
/// it (none here); after `respond`, neither files anything.
#[tokio::test]
async fn progress_and_progress_mcp_on_a_context_built_by_hand() {
    let info = walk_by_hand();
    let backend = Arc::new(Bare::default());
    let ctx = ToolContext::new(info, backend.clone(), None, &CancelHandle::new());
    ctx.progress(json!({ "message": "Planning", "done": 1 }));
    // Filed, but sent to no client: nothing listens on a bare backend.
    assert!(!ctx.progress_mcp(McpProgress::new(3.0).total(12.0).message("Hop 3 of 12")));
    assert!(!ctx.progress_mcp(4.0));
    // `respond` ends the execution: its Err carries the value out.
    assert!(ctx.respond(json!("done")).is_err());
    assert!(!ctx.progress_mcp(5.0), "nothing is filed after respond");
    ctx.progress(json!({ "message": "late" }));
    let filed: Vec<Value> = backend
        .0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|k| match k {
            FactKind::Progress(p) => Some(json!([p.payload, p.count])),
            _ => None,
        })
        .collect();
    assert_eq!(
        filed,
        [
            json!([{ "message": "Planning", "done": 1 }, 0]),
            json!([{ "progress": 3.0, "total": 12.0, "message": "Hop 3 of 12" }, 0]),
            json!([{ "progress": 4.0 }, 0]),
        ]
    );
}

/// Seed 000: nothing of a call lands after its end. A clone of the
/// context files a progress report on another thread while the host
/// closes the context and files the call's end: the close waits for the
/// report being filed, so the end comes after it (before the gate, the end
/// was filed first and the report landed after it), and a report after
/// the close is refused.
#[test]
fn a_report_racing_the_calls_end_never_lands_after_it() {
    let info = walk_by_hand();
    let backend = Arc::new(Bare::default());
    let (begun, filing) = std::sync::mpsc::channel();
    *backend.1.lock().unwrap() = Some(begun);
    let ctx = ToolContext::new(info, backend.clone(), None, &CancelHandle::new());
    let clone = ctx.clone();
    let reporter = std::thread::spawn(move || clone.progress(json!({ "message": "late" })));
    filing.recv().unwrap();
    // The host: the tool returned; close, then file the end.
    ctx.close();
    backend.emit(FactKind::CallEnded(CallEnded {
        outcome: CallOutcome::Ok {
            result: json!(null),
        },
        duration_ns: 0,
        invocation_id: None,
    }));
    reporter.join().unwrap();
    ctx.progress(json!({ "message": "after the close" }));
    let names: Vec<String> = backend
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|k| k.name().to_owned())
        .collect();
    assert_eq!(names, ["progress", "call.ended"]);
}

// ---------------------------------------------------------------------------
// The spec on the record
// ---------------------------------------------------------------------------

async fn describe(ctx: ToolContext, _args: Value) -> Result<Value, ToolError> {
    let spec = ctx.spec().ok_or_else(|| ToolError::msg("no spec"))?;
    Ok(json!({
        "title": spec.title,
        "hints": spec.annotations.map(|a| a.words()),
        "tool_id": ctx.tool_id(),
    }))
}

fn describe_spec() -> ToolSpec {
    ToolSpec::new::<Value, Value>("describe")
        .id("tools/describe@2")
        .title("Describe itself")
        .description("Returns what its spec says.")
        .annotations(Annotations {
            read_only_hint: Some(true),
            idempotent_hint: Some(true),
            ..Annotations::default()
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_is_on_the_record_and_given_back_in_replay() {
    let tools = Tools::new().tool(describe_spec(), describe);
    let t = tools.clone();
    let recording = record("described", |run| async move {
        run.call("describe", json!({}))
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    let s = started(&recording, "c1");
    assert_eq!(s.spec.as_deref(), Some(&describe_spec()));
    assert_eq!(
        s.tool_id.as_deref(),
        Some("tools/describe@2"),
        "the spec's id is the call's"
    );
    assert_eq!(
        result_of(&recording, "c1"),
        json!({ "title": "Describe itself", "hints": ["read-only", "idempotent"], "tool_id": "tools/describe@2" })
    );
    // MCP's `tools/list` entry comes from the same spec.
    let listed: Vec<Value> = tools.specs().map(ToolSpec::mcp_tool).collect();
    assert_eq!(
        listed[0]["annotations"],
        json!({ "readOnlyHint": true, "idempotentHint": true })
    );
    assert_eq!(listed[0]["title"], "Describe itself");

    replays_clean(&recording, &tools).await;

    // A registry that declares the tool differently today diverges where
    // the spec says so.
    let changed = Tools::new().tool(describe_spec().title("Describe"), describe);
    let report = replay(&recording, &changed, &ReplayOptions::default()).await;
    assert_eq!(
        report.problems()[0],
        "call c1 `describe`, fact 0 (seq 1), call.started:/spec/title: expected \"Describe itself\", got \"Describe\"",
        "{report}"
    );
    // Registered without a spec, the tool gets the recorded one back.
    let plain = Tools::new().register("describe", describe);
    replays_clean(&recording, &plain).await;
}

#[test]
fn input_errors_name_their_pointer() {
    let e = InputError {
        pointer: "/plan/steps/0".into(),
        message: "1 is not of type \"string\"".into(),
    };
    assert_eq!(e.to_string(), "/plan/steps/0: 1 is not of type \"string\"");
    let root = InputError {
        pointer: String::new(),
        message: "\"env\" is a required property".into(),
    };
    assert_eq!(root.to_string(), "(root): \"env\" is a required property");
}

//! # reel-demo: the demo tools and runs
//!
//! A handful of realistic runs that together use every fact kind
//! (including a failed run, a cancelled run and nested dispatch). `reel
//! demo` records them; the example tests replay them with [`tools`]. Not
//! part of the recording library (`reel-recorder`): a host records its own
//! tools.
//!
//! The tools' side effects are simulated (no network), but go through
//! journaled effects exactly as real ones would.
#![warn(missing_docs)]

use std::sync::Arc;

use reel::context::{
    ContextError, Elicitation, McpProgress, Report, Stage, ToolContext, ToolError,
};
use reel::fact::{ElicitOutcome, Identity, Level, RunStatus, TeardownScope};
use reel::spec::{Annotations, ToolSpec, ToolSpecExt};
use reel::tools::Tools;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use reel_recorder::{
    Canceller, LogListener, MemoryArtifactStore, MemoryVault, Recorder, RecorderError, RunStart,
    ScriptedElicitor,
};

/// Arguments of `deploy`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DeployArgs {
    /// Service to deploy.
    pub service: String,
    /// Target environment.
    pub env: String,
}

/// A deployment plan (what the simulated `github.plan` effect returns).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// Steps of the plan.
    pub steps: Vec<String>,
    /// The deployment session the plan opened.
    pub session_key: String,
}

/// The spec of `deploy`: destructive, needs `github`.
pub fn deploy_spec() -> ToolSpec {
    ToolSpec::new::<DeployArgs, Value>("deploy")
        .title("Deploy a service")
        .description("Plans a deployment of one service to one environment, asks the user to confirm it, and applies it.")
        .annotations(Annotations {
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(false),
            open_world_hint: Some(true),
        })
        .needs(["github"])
}

/// `deploy`: declared credential, effects, a confirmation question, an
/// artifact, run- and session-scoped cleanups, progress and logs.
pub async fn deploy(ctx: ToolContext, args: DeployArgs) -> Result<Value, ToolError> {
    let token = ctx
        .declared("github")
        .cloned()
        .ok_or_else(|| ToolError::msg("deploy needs its declared github credential"))?;
    ctx.progress(json!({ "message": "Planning", "done": 1, "total": 3 }));
    let service = args.service.clone();
    let env = args.env.clone();
    let plan: Plan = ctx
        .effect("github.plan", &args, move || async move {
            // A real tool would call the GitHub API with `token` here.
            drop(token);
            Ok::<_, String>(Plan {
                steps: vec![
                    format!("build {service}"),
                    format!("push {service} to {env}"),
                ],
                session_key: format!("deploy-session:{service}:{env}"),
            })
        })
        .await?;
    let schema = json!({
        "type": "object",
        "properties": { "confirm": { "type": "boolean" } },
        "required": ["confirm"]
    });
    let answer = ctx
        .elicit(
            Elicitation::form(format!("Deploy {} to {}?", args.service, args.env), schema)
                .ttl_ms(60_000),
        )
        .await?;
    match answer.outcome {
        ElicitOutcome::Accept { content } if content["confirm"] == json!(true) => {}
        other => {
            ctx.log(
                Level::Notice,
                json!({ "message": "deployment not confirmed", "answer": format!("{other:?}") }),
            );
            return Ok(json!({ "deployed": false }));
        }
    }
    let report = format!("# Plan for {}\n\n{}\n", args.service, plan.steps.join("\n"));
    let meta = ctx
        .artifacts()
        .put("text/markdown", report.into_bytes())
        .await?;
    let key = plan.session_key.clone();
    ctx.on_teardown(TeardownScope::Run, &key, || async { Ok::<_, String>(()) })?;
    // Registering again on every execute is the intended shape: the first wins.
    ctx.on_teardown(TeardownScope::Run, &key, || async { Ok::<_, String>(()) })?;
    if ctx.teardown_scopes().contains(&TeardownScope::Session) {
        ctx.on_teardown(TeardownScope::Session, "deploy-cache", || async {
            Err::<(), _>("cache directory was already gone")
        })?;
    }
    ctx.progress(json!({ "message": "Applying", "done": 2, "total": 3 }));
    let started = ctx.now();
    let applied: Value = ctx
        .effect("github.apply", &json!({ "steps": plan.steps }), move || async move {
            Ok::<_, String>(json!({ "status": "applied", "started": started }))
        })
        .await?;
    ctx.log(
        Level::Info,
        json!({ "message": "deployed", "apply": applied["status"] }),
    );
    ctx.set_output_as(json!({ "plan": plan.steps }), Stage::new("plan"));
    ctx.progress(json!({ "message": "Done", "done": 3, "total": 3 }));
    Ok(json!({ "deployed": true, "report": meta.id, "digest": meta.digest }))
}

/// `walk`: a long walk of hops that reports each one and honours
/// cancellation between hops.
pub async fn walk(ctx: ToolContext, hops: u32) -> Result<Value, ToolError> {
    let seed = ctx.random();
    for i in 1..=hops {
        ctx.check_cancel()?;
        let hop = format!("hop-{:04x}", (seed.wrapping_mul(i as u64 + 1) >> 48) as u16);
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        ctx.progress(json!({ "message": format!("Hop {i} of {hops} — {hop}"), "done": i, "total": hops, "hop": hop }));
        ctx.notify(json!({ "hop": i }));
    }
    Ok(json!({ "hops": hops }))
}

/// `patrol`: a slow walk of `hops` hops, `pause_ms` apart, for watching a
/// live run (`reel demo --live-hops N`, then `reel tail` elsewhere).
pub async fn patrol(ctx: ToolContext, (hops, pause_ms): (u32, u64)) -> Result<Value, ToolError> {
    for i in 1..=hops {
        ctx.check_cancel()?;
        tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
        ctx.progress(
            json!({ "message": format!("Patrol hop {i} of {hops}"), "done": i, "total": hops }),
        );
    }
    Ok(json!({ "hops": hops }))
}

/// The spec of `fetch`: reads the open web.
pub fn fetch_spec() -> ToolSpec {
    ToolSpec::new::<String, Value>("fetch")
        .title("Fetch a page")
        .description("GETs a URL and stores the body as an artifact.")
        .annotations(Annotations {
            read_only_hint: Some(true),
            open_world_hint: Some(true),
            ..Annotations::default()
        })
}

/// `fetch`: a journaled HTTP GET whose body becomes an artifact.
pub async fn fetch(ctx: ToolContext, url: String) -> Result<Value, ToolError> {
    ctx.progress_mcp(
        McpProgress::new(0.0)
            .total(1.0)
            .message(format!("Fetching {url}")),
    );
    let u = url.clone();
    let body: String = ctx
        .effect("http.get", &json!({ "url": url }), move || async move {
            Ok::<_, String>(format!(
                "<html><title>{u}</title><p>Results for {u}</p></html>"
            ))
        })
        .await?;
    let meta = ctx.artifacts().put("text/html", body.into_bytes()).await?;
    ctx.progress_mcp(McpProgress::new(1.0).total(1.0));
    Ok(json!({ "url": url, "artifact": meta.id }))
}

/// The spec of `search`: read-only.
pub fn search_spec() -> ToolSpec {
    ToolSpec::new::<String, Value>("search")
        .title("Search the sources")
        .description("Fetches each source's results page and reports what it found.")
        .annotations(Annotations {
            read_only_hint: Some(true),
            idempotent_hint: Some(true),
            open_world_hint: Some(true),
            ..Annotations::default()
        })
}

/// `search`: dispatches `fetch` for each source (nested calls), reads the
/// pages back from the artifact store and logs through a sub-flow logger.
pub async fn search(ctx: ToolContext, query: String) -> Result<Value, ToolError> {
    let log = ctx.subflow_logger();
    log.log(
        Level::Debug,
        json!({ "message": "searching", "query": query }),
    );
    let mut pages = Vec::new();
    for source in ["docs", "issues"] {
        let fetched = ctx
            .dispatch(
                "fetch",
                format!("https://{source}.example/search?q={query}"),
            )
            .await?;
        let id = fetched["artifact"].as_str().unwrap_or_default().to_owned();
        if let Some((meta, bytes)) = ctx.artifacts().get(&id).await? {
            pages.push(json!({ "source": source, "bytes": bytes.len(), "digest": meta.digest }));
        }
        // Same instance every time within a call.
        ctx.subflow_logger()
            .log(Level::Debug, json!({ "fetched": source }));
    }
    ctx.report(Report {
        used_model: Some(false),
        payload: Some(json!({ "pages": pages.len() })),
    });
    ctx.set_output_as(
        json!({ "pages": pages }),
        Stage::new("draft").note("before ranking"),
    );
    ctx.respond(json!({ "query": query, "pages": pages }))
}

/// `audit`: works in degraded mode when nothing is attached; every refusal
/// is recorded.
pub async fn audit(ctx: ToolContext, subject: String) -> Result<Value, ToolError> {
    let mut notes = Vec::new();
    if let Err(e) = ctx.credential("audit-db").await {
        notes.push(e.to_string());
    }
    if let Err(e) = ctx
        .artifacts()
        .put("text/plain", subject.clone().into_bytes())
        .await
    {
        notes.push(e.to_string());
    }
    if let Err(e) = ctx
        .elicit(Elicitation::form(
            format!("Include archived records of {subject}?"),
            json!({ "type": "object", "properties": { "archived": { "type": "boolean" } } }),
        ))
        .await
    {
        notes.push(e.to_string());
    }
    if let Err(e @ ContextError::ScopeNotHonoured { .. }) =
        ctx.on_teardown(TeardownScope::Session, &subject, || async {
            Ok::<_, String>(())
        })
    {
        notes.push(e.to_string());
    }
    ctx.log(
        Level::Warning,
        json!({ "message": "audit ran degraded", "password": "hunter2", "notes": notes.len() }),
    );
    Ok(json!({ "subject": subject, "degraded": true, "notes": notes }))
}

/// Every demo tool, by name (`deploy`, `fetch` and `search` with their
/// specs; the others declare nothing).
pub fn tools() -> Tools {
    Tools::new()
        .tool(deploy_spec(), deploy)
        .register("walk", walk)
        .tool(fetch_spec(), fetch)
        .tool(search_spec(), search)
        .register("audit", audit)
        .register("patrol", patrol)
}

/// Cancels a call once the tool has reported a given hop, as a person
/// watching a live status would.
struct StopAtHop {
    hop: u64,
    canceller: Canceller,
}

impl LogListener for StopAtHop {
    fn deliver(&self, _call_id: &str, _level: Level, data: &Value) -> bool {
        if data["hop"].as_u64() == Some(self.hop) {
            self.canceller.cancel(Some("stopped by the user"));
        }
        true
    }
}

/// Records one slow `patrol` run (`hops` hops, `pause_ms` apart) named
/// `demo-live` (with a `-N` suffix when taken), for live inspection.
pub async fn record_live(
    recorder: &Recorder,
    hops: u32,
    pause_ms: u64,
) -> Result<String, RecorderError> {
    let archive = recorder.archive();
    let mut id = "demo-live".to_owned();
    let mut n = 1;
    while archive.run(&id).is_ok() {
        n += 1;
        id = format!("demo-live-{n}");
    }
    let run = recorder.start_run(RunStart::new(id.clone())).await?;
    let result = run.call("patrol", (hops, pause_ms)).invoke(patrol).await;
    run.end(if result.is_ok() {
        RunStatus::Completed
    } else {
        RunStatus::Failed
    })
    .await?;
    Ok(id)
}

/// The names of the demo's runs, in the order they are recorded: each run's
/// id is `demo-<name><suffix>`.
pub const RUN_NAMES: [&str; 5] = [
    "deploy",
    "search",
    "walk-cancelled",
    "deploy-failed",
    "audit-degraded",
];

/// The tenant each demo run is recorded under, by name (see
/// [`RUN_NAMES`]): what a store that claims run ids by tenant needs to
/// claim them ahead.
pub fn tenant_of(name: &str) -> Option<&'static str> {
    (name != "audit-degraded").then_some("acme")
}

/// The demo's run ids for a suffix (`""`, `"-2"`, ...), in [`RUN_NAMES`]'
/// order.
pub fn run_ids(suffix: &str) -> Vec<String> {
    RUN_NAMES
        .iter()
        .map(|name| format!("demo-{name}{suffix}"))
        .collect()
}

/// The suffix after `suffix` in the demo's order: `""`, `"-2"`, `"-3"`, ...
pub fn next_suffix(suffix: &str) -> String {
    let n: u64 = suffix
        .strip_prefix('-')
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    format!("-{}", n + 1)
}

/// The first suffix from `from` on none of whose run ids `archive` holds.
pub fn free_suffix(archive: &reel_archive::Archive, from: &str) -> String {
    let mut suffix = from.to_owned();
    while run_ids(&suffix).iter().any(|id| archive.run(id).is_ok()) {
        suffix = next_suffix(&suffix);
    }
    suffix
}

/// Records the demo runs into the recorder's archive and returns their ids,
/// the deploy run first. Ids get a `-N` suffix when earlier demo runs exist.
pub async fn record(recorder: &Recorder) -> Result<Vec<String>, RecorderError> {
    let suffix = free_suffix(recorder.archive(), "");
    record_as(recorder, &suffix).await
}

/// Records the demo runs under the ids [`run_ids`] gives for `suffix` (a
/// host that shares the id space with other writers claims them first),
/// and returns their ids, the deploy run first.
pub async fn record_as(recorder: &Recorder, suffix: &str) -> Result<Vec<String>, RecorderError> {
    let id = |name: &str| format!("demo-{name}{suffix}");
    let tools = tools();
    let acme = |principal: &str| Identity {
        tenant: Some("acme".into()),
        principal: Some(principal.into()),
        conversation: Some("conv-42".into()),
    };
    let store = Arc::new(MemoryArtifactStore::new());
    let mut ids = Vec::new();

    // 1. A deployment: credentials, effects, a question, an artifact, cleanups.
    let run = recorder
        .start_run(
            RunStart::new(id("deploy"))
                .identity(acme("ann"))
                .session("sess-7")
                .label("env", "prod"),
        )
        .await?;
    let vault = Arc::new(MemoryVault::new().with("github", "ghp_demoSecretValue123"));
    let elicitor = Arc::new(ScriptedElicitor::new([ElicitOutcome::Accept {
        content: json!({ "confirm": true }),
    }]));
    let args = DeployArgs {
        service: "billing".into(),
        env: "prod".into(),
    };
    let result = run
        .call("deploy", &args)
        .credentials(vault.clone())
        .artifacts(store.clone())
        .elicitor(elicitor)
        .platform("claude")
        .protocol("mcp")
        .invoke_tool(&tools)
        .await;
    run.end_session().await?;
    run.end(if result.is_ok() {
        RunStatus::Completed
    } else {
        RunStatus::Failed
    })
    .await?;
    ids.push(run.id().to_owned());

    // 2. A search with nested dispatch, artifacts and early respond.
    let run = recorder
        .start_run(RunStart::new(id("search")).identity(acme("bob")))
        .await?;
    let _ = run
        .call("search", "sled block layout")
        .artifacts(store.clone())
        .dispatcher(tools.clone())
        .iteration(1)
        .invoke_tool(&tools)
        .await;
    run.end(RunStatus::Completed).await?;
    ids.push(run.id().to_owned());

    // 3. A walk the user stops at hop 3; a second stop arrives after the end.
    let run = recorder
        .start_run(RunStart::new(id("walk-cancelled")).identity(acme("ann")))
        .await?;
    let call = run.call("walk", 12);
    let canceller = call.canceller();
    let listener = Arc::new(StopAtHop {
        hop: 3,
        canceller: canceller.clone(),
    });
    let walked = call.listener(listener).invoke(walk).await;
    canceller.cancel(Some("stop pressed again"));
    run.end(if walked.is_ok() {
        RunStatus::Completed
    } else {
        RunStatus::Cancelled
    })
    .await?;
    ids.push(run.id().to_owned());

    // 4. A deployment whose declared credential fails: the tool never runs.
    let run = recorder
        .start_run(RunStart::new(id("deploy-failed")).identity(acme("carol")))
        .await?;
    let failing = Arc::new(
        MemoryVault::new().failing("github", "token expired; re-authorise the GitHub app"),
    );
    let failed = run
        .call("deploy", &args)
        .credentials(failing)
        .invoke_tool(&tools)
        .await;
    run.end(if failed.is_ok() {
        RunStatus::Completed
    } else {
        RunStatus::Failed
    })
    .await?;
    ids.push(run.id().to_owned());

    // 5. A tool at a door with nothing attached and no caller identity.
    let run = recorder
        .start_run(RunStart::new(id("audit-degraded")).teardown_scopes([TeardownScope::Call]))
        .await?;
    let _ = run.call("audit", "billing").invoke(audit).await;
    run.end(RunStatus::Completed).await?;
    ids.push(run.id().to_owned());

    recorder.flush().await?;
    Ok(ids)
}

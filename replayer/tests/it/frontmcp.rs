//! Seed 004's FrontMCP surface on the context: metadata, typed input and
//! its history, the latest output, client info and the platform detected
//! from it, protocol and parent call, `notify` with an optional level and a
//! named logger, and typed services. Each case is recorded through a real
//! recorder into a real archive, exported as a tape, and replayed from that
//! tape with no divergence: replay gives back the same values.

use std::sync::{Arc, Mutex};

use reel::context::*;
use reel::fact::*;
use reel::report::ReplayReport;
use reel::spec::{ToolSpec, ToolSpecExt};
use reel::tools::Tools;
use reel_replayer::{replay, Recording, ReplayOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::support::{record, result_of};

async fn replays_clean_with(
    recording: &Recording,
    tools: &Tools,
    options: ReplayOptions,
) -> ReplayReport {
    let report = replay(recording, tools, &options).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
    assert_eq!(report.calls.len(), recording.calls.len(), "{report}");
    report
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct Lookup {
    id: String,
    limit: u8,
}

/// A tool that reports what the context tells it about the call.
async fn introspect(ctx: ToolContext, args: Lookup) -> Result<Value, ToolError> {
    let typed: Lookup = ctx.input()?;
    assert_eq!(typed, args);
    let wrong = ctx.input::<Vec<u8>>().unwrap_err();
    assert!(wrong.to_string().contains("alloc::vec::Vec<u8>"), "{wrong}");
    assert_eq!(ctx.output(), None, "no output before any");
    ctx.set_output(json!({ "draft": 1 }));
    let latest = ctx.output();
    ctx.set_output_as(json!({ "draft": 2 }), Stage::new("ranked"));
    let client = ctx.client_info().cloned();
    Ok(json!({
        "metadata": ctx.metadata().name,
        "input": ctx.input_json(),
        "input_history": ctx.input_history(),
        "latest_after_first": latest,
        "latest": ctx.output(),
        "output_history": ctx.output_history(),
        "client": client.map(|c| json!([c.name, c.version, c.title])),
        "platform": ctx.platform().as_str(),
        "protocol": ctx.protocol(),
        "parent": ctx.parent_call(),
    }))
}

fn lookup_tools() -> Tools {
    Tools::new().tool(ToolSpec::new::<Lookup, Value>("lookup"), introspect)
}

fn client(name: &str, title: Option<&str>) -> ClientInfo {
    ClientInfo {
        name: name.into(),
        version: Some("1.0.0".into()),
        title: title.map(Into::into),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_gives_back_input_output_client_and_platform_as_recorded() {
    let tools = lookup_tools();
    let t = tools.clone();
    let recording = record("frontmcp-surface", RunStatus::Completed, |run| async move {
        let args = json!({ "id": "doc-1", "limit": 3 });
        run.call("lookup", &args)
            .protocol("mcp")
            .client_info(client("claude-ai", Some("Claude")))
            .invoke_tool(&t)
            .await
            .unwrap();
        // The host's platform wins over detection.
        run.call("lookup", &args)
            .client_info(client("claude-ai", None))
            .platform(Platform::Gemini)
            .invoke_tool(&t)
            .await
            .unwrap();
        // Detected from the title when the name says nothing.
        run.call("lookup", &args)
            .client_info(client("mcp-client", Some("Vercel AI SDK")))
            .invoke_tool(&t)
            .await
            .unwrap();
        // No client info: unknown.
        run.call("lookup", &args).invoke_tool(&t).await.unwrap();
    })
    .await;

    let c1 = result_of(&recording, "c1");
    assert_eq!(c1["metadata"], json!("lookup"));
    assert_eq!(c1["input"], json!({ "id": "doc-1", "limit": 3 }));
    assert_eq!(c1["input_history"], json!([{ "id": "doc-1", "limit": 3 }]));
    assert_eq!(c1["latest_after_first"], json!({ "draft": 1 }));
    assert_eq!(c1["latest"], json!({ "draft": 2 }));
    assert_eq!(
        c1["output_history"],
        json!([{ "draft": 1 }, { "draft": 2 }])
    );
    assert_eq!(c1["client"], json!(["claude-ai", "1.0.0", "Claude"]));
    assert_eq!(c1["platform"], json!("claude"));
    assert_eq!(c1["protocol"], json!("mcp"));
    assert_eq!(c1["parent"], Value::Null);
    assert_eq!(result_of(&recording, "c2")["platform"], json!("gemini"));
    assert_eq!(result_of(&recording, "c3")["platform"], json!("vercel-ai"));
    assert_eq!(result_of(&recording, "c4")["platform"], json!("unknown"));
    assert_eq!(result_of(&recording, "c4")["client"], Value::Null);
    // The title is on the record.
    assert_eq!(
        recording.calls["c1"].started.client_info,
        Some(client("claude-ai", Some("Claude")))
    );

    // Replay gives the tool the same values, from the tape alone.
    replays_clean_with(&recording, &tools, ReplayOptions::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_defaults_to_info_and_names_its_logger() {
    let tools = Tools::new().register("chatty", |ctx: ToolContext, _: Value| async move {
        let before = ctx.notify("Processing started");
        ctx.set_logger("chatty.steps");
        ctx.notify_at(Level::Debug, json!({ "step": 1, "status": "validating" }));
        ctx.log(Level::Warning, "almost done");
        Ok(json!({ "delivered_before_logger": before }))
    });
    let t = tools.clone();
    let recording = record("frontmcp-notify", RunStatus::Completed, |run| async move {
        run.call("chatty", json!({})).invoke_tool(&t).await.unwrap();
    })
    .await;
    let logs: Vec<(Level, Option<String>, Value, bool)> = recording.calls["c1"]
        .facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::Log(l) => Some((l.level, l.logger.clone(), l.data.clone(), l.delivered)),
            _ => None,
        })
        .collect();
    assert_eq!(
        logs,
        [
            (Level::Info, None, json!("Processing started"), false),
            (
                Level::Debug,
                Some("chatty.steps".into()),
                json!({ "step": 1, "status": "validating" }),
                false
            ),
            (
                Level::Warning,
                Some("chatty.steps".into()),
                json!("almost done"),
                false
            ),
        ]
    );
    // No client listens here, and notify said so.
    assert_eq!(
        result_of(&recording, "c1"),
        json!({ "delivered_before_logger": false })
    );
    replays_clean_with(&recording, &tools, ReplayOptions::default()).await;
}

/// A service the host gives the tool.
struct Catalog {
    names: Vec<&'static str>,
    asked: Mutex<u32>,
}

struct Unregistered;

async fn catalogued(ctx: ToolContext, _: Value) -> Result<Value, ToolError> {
    let catalog = ctx.get::<Catalog>()?;
    *catalog.asked.lock().unwrap() += 1;
    let Err(missing) = ctx.get::<Unregistered>() else {
        panic!("no Unregistered was registered");
    };
    Ok(json!({ "names": catalog.names, "missing": missing.to_string() }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_services_are_the_hosts_live_and_the_tests_in_replay() {
    let tools = Tools::new().register("catalogued", catalogued);
    let t = tools.clone();
    let live = Arc::new(Catalog {
        names: vec!["a", "b"],
        asked: Mutex::new(0),
    });
    let l = live.clone();
    let recording = record(
        "frontmcp-services",
        RunStatus::Completed,
        |run| async move {
            run.call("catalogued", json!({}))
                .service(l)
                .invoke_tool(&t)
                .await
                .unwrap();
        },
    )
    .await;
    assert_eq!(*live.asked.lock().unwrap(), 1);
    let c1 = result_of(&recording, "c1");
    assert_eq!(c1["names"], json!(["a", "b"]));
    assert!(c1["missing"].as_str().unwrap().contains(concat!(
        "no service of type ",
        module_path!(),
        "::Unregistered"
    )));

    // Replay: the test registers the service; the tool gets it.
    let double = Arc::new(Catalog {
        names: vec!["a", "b"],
        asked: Mutex::new(0),
    });
    replays_clean_with(
        &recording,
        &tools,
        ReplayOptions::default().service(double.clone()),
    )
    .await;
    assert_eq!(
        *double.asked.lock().unwrap(),
        1,
        "c1 asked the test's service"
    );
    // Without it, replay diverges on c1: the tool now fails, naming the
    // type it asked for.
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(!report.is_match(), "{report}");
    let actual = serde_json::to_string(&report.calls[0].result.actual).unwrap();
    assert!(
        actual.contains(concat!("no service of type ", module_path!(), "::Catalog")),
        "{actual}"
    );
}

/// Seed 004: every tool has `metadata`. One without a spec has minimal
/// metadata derived from the call (name, id, mode, an input schema taking
/// any object) and claims nothing more; the same in replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_without_a_spec_has_minimal_metadata() {
    fn describe(ctx: &ToolContext) -> Value {
        let m = ctx.metadata();
        json!({
            "name": m.name, "id": m.id, "tool_id": m.tool_id(), "mode": m.mode.as_str(),
            "input_schema": m.input_schema, "title": m.title, "description": m.description,
            "needs": m.needs, "declared": ctx.spec().is_some(),
        })
    }
    let tools = Tools::new()
        .register_sync("tally", |ctx: ToolContext, _: Value| {
            Ok::<_, ToolError>(describe(&ctx))
        })
        .register("fetch", |ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(describe(&ctx))
        });
    let t = tools.clone();
    let recording = record("spec-less", RunStatus::Completed, |run| async move {
        run.call("tally", json!({})).invoke_tool(&t).await.unwrap();
        run.call("fetch", json!({})).invoke_tool(&t).await.unwrap();
    })
    .await;
    assert_eq!(
        result_of(&recording, "c1"),
        json!({
            "name": "tally", "id": null, "tool_id": "tally", "mode": "sync",
            "input_schema": { "type": "object" }, "title": null, "description": null,
            "needs": [], "declared": false,
        })
    );
    assert_eq!(result_of(&recording, "c2")["mode"], "async");
    let report = replays_clean_with(&recording, &tools, ReplayOptions::default()).await;
    assert!(report.is_exact(), "{report}");
}

/// A host's receipt (a `call.output` of stage `reel.receipt` the host
/// filed after the tool returned) is a host fact: replay puts the
/// recorded one back in its timeline and the call replays exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_receipt_replays_from_the_record() {
    let tools = lookup_tools();
    let t = tools.clone();
    let recording = record("receipt", RunStatus::Completed, |run| async move {
        run.call("lookup", json!({ "id": "doc-1", "limit": 3 }))
            .receipt(|ctx, result| json!({ "tool": ctx.tool_name(), "ok": result.is_ok() }))
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    let report = replays_clean_with(&recording, &tools, ReplayOptions::default()).await;
    assert!(report.is_exact(), "{report}");
    let receipts: Vec<&Value> = report
        .facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CallOutput(o) if o.stage.as_deref() == Some(reel::marker::RECEIPT_STAGE) => {
                Some(&o.value)
            }
            _ => None,
        })
        .collect();
    assert_eq!(receipts, [&json!({ "tool": "lookup", "ok": true })]);
}

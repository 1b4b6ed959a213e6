//! Nested dispatch: a child inherits its parent's iteration, platform,
//! protocol and client info and gets its own call and invocation ids; a
//! tool tells an absent dispatch from an empty one and lists what it can
//! dispatch to. Recorded through a real recorder, exported as a tape and
//! replayed from it with no divergence (the replay gives the same answers).

use crate::support::record;

use reel::context::*;
use reel::fact::*;
use reel::tools::Tools;
use reel_replayer::{replay, ReplayOptions};
use serde_json::{json, Value};

fn about(ctx: &ToolContext) -> Value {
    json!({
        "iteration": ctx.iteration(),
        "protocol": ctx.call().protocol,
        "platform": ctx.call().platform,
        "client": ctx.call().client_info.as_ref().map(|c| (c.name.clone(), c.version.clone())),
        "call": ctx.call_id(),
        "invocation": ctx.invocation_id(),
        "tools": ctx.tools(),
    })
}

fn tools() -> Tools {
    Tools::new()
        .register("leaf", |ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(about(&ctx))
        })
        .register("parent", |ctx: ToolContext, _: Value| async move {
            let child = ctx.dispatch("leaf", json!({})).await?;
            Ok::<_, ToolError>(json!({ "me": about(&ctx), "child": child }))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_inherits_the_callers_context_and_gets_its_own_ids() {
    let t = tools();
    let recording = record("inherit", RunStatus::Completed, |run| async move {
        let out = run
            .call("parent", json!({}))
            .iteration(4)
            .protocol("mcp")
            .platform("claude")
            .client_info(ClientInfo {
                name: "claude-desktop".into(),
                version: Some("1.2".into()),
                title: Some("Claude".into()),
            })
            .dispatcher(t.clone())
            .invoke_tool(&t)
            .await
            .unwrap();
        let (me, child) = (&out["me"], &out["child"]);
        for field in ["iteration", "protocol", "platform", "client"] {
            assert_eq!(child[field], me[field], "{field}: {out}");
        }
        assert_eq!(child["iteration"], 4);
        assert_eq!(child["platform"], "claude");
        assert_eq!(child["client"], json!(["claude-desktop", "1.2"]));
        assert_ne!(child["call"], me["call"]);
        assert_ne!(child["invocation"], me["invocation"]);
        assert!(child["invocation"].as_str().unwrap().starts_with("inv-"));
        // The parent lists what it can dispatch to; the child, attached the
        // same dispatcher, too.
        assert_eq!(me["tools"], json!(["leaf", "parent"]));
        // No dispatch at this door: None, not an empty list.
        let bare = run.call("leaf", json!({})).invoke_tool(&t).await.unwrap();
        assert_eq!(bare["tools"], Value::Null);
        // A dispatch with no tools: an empty list.
        let empty = run
            .call("leaf", json!({}))
            .dispatcher(Tools::new())
            .invoke_tool(&t)
            .await
            .unwrap();
        assert_eq!(empty["tools"], json!([]));
    })
    .await;
    let child = recording
        .calls
        .values()
        .find(|c| c.started.parent_call.is_some())
        .expect("the child");
    assert_eq!(child.started.iteration, 4);
    assert_eq!(child.started.protocol.as_deref(), Some("mcp"));
    let report = replay(&recording, &tools(), &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
    assert_eq!(report.calls.len(), 4, "{report}");
}

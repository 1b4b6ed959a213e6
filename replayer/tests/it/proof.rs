//! A replay that cannot show equality says so: a call whose record holds
//! what redaction left (`[REDACTED]`) is "unproven", never "exact", and
//! the report's summary counts calls replayed, exact, divergent and
//! unproven (text and JSON). A tool changed to read the clock directly
//! is divergent. Recorded through a real recorder, exported as a tape,
//! replayed from it.

use crate::support::record;

use reel::context::*;
use reel::fact::*;
use reel::report::{ReplaySummary, Verdict};
use reel::tools::Tools;
use reel_replayer::{replay, ReplayOptions};
use serde_json::{json, Value};

fn tools() -> Tools {
    Tools::new()
        // An input the record keeps only as a marker: the replay re-drives
        // the tool with the marker, not with the password it had.
        .register("login", |_ctx: ToolContext, args: Value| async move {
            Ok::<_, ToolError>(json!({ "user": args["user"], "ok": true }))
        })
        // A result the record keeps only as a marker.
        .register("mint", |_ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(json!({ "token": "tok-3f9a", "expires_in": 60 }))
        })
        .register("add", |_ctx: ToolContext, (a, b): (i64, i64)| async move {
            Ok::<_, ToolError>(a + b)
        })
        .register("stamp", |_ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(json!({ "at": "2026-12-05T10:00:00Z" }))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_redaction_hid_are_unproven_and_the_summary_counts_each_verdict() {
    let t = tools();
    let recording = record("proof", RunStatus::Completed, |run| async move {
        run.call("login", json!({ "user": "ann", "password": "hunter2" }))
            .invoke_tool(&t)
            .await
            .unwrap();
        run.call("mint", json!({})).invoke_tool(&t).await.unwrap();
        run.call("add", (2, 3)).invoke_tool(&t).await.unwrap();
        run.call("stamp", json!({})).invoke_tool(&t).await.unwrap();
    })
    .await;

    // The tool changed since: it reads the wall clock itself.
    let changed = tools().register("stamp", |_ctx: ToolContext, _: Value| async move {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Ok::<_, ToolError>(json!({ "at": now.to_string() }))
    });
    let report = replay(&recording, &changed, &ReplayOptions::default()).await;

    let verdicts: Vec<(&str, Verdict)> = report
        .calls
        .iter()
        .map(|c| (c.tool.as_str(), c.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("login", Verdict::Unproven),
            ("mint", Verdict::Unproven),
            ("add", Verdict::Matched),
            ("stamp", Verdict::Diverged),
        ],
        "{report}"
    );
    assert_eq!(report.calls[0].unproven, ["call.started:/args/password"]);
    assert_eq!(
        report.calls[1].unproven,
        ["call.ended:/outcome/result/token"]
    );
    assert!(report.calls[2].unproven.is_empty());
    let summary = ReplaySummary {
        replayed: 4,
        exact: 1,
        divergent: 1,
        unproven: 2,
        missing_tool: 0,
        served: 0,
    };
    assert_eq!(report.summary, summary);
    assert!(!report.is_match() && !report.is_exact());

    let text = report.to_string();
    assert!(
        text.contains("4 calls replayed: 1 exact, 1 divergent, 2 unproven"),
        "{text}"
    );
    assert!(
        text.contains("not shown equal: redaction hid call.started:/args/password"),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["summary"]["unproven"], 2);
    assert_eq!(json["calls"][0]["verdict"], "unproven");

    // Without the changed tool nothing differs, but the two calls stay
    // unproven: a match, never an exact one.
    let again = replay(&recording, &tools(), &ReplayOptions::default()).await;
    assert!(again.is_match() && !again.is_exact(), "{again}");
    assert_eq!((again.summary.exact, again.summary.unproven), (2, 2));
}

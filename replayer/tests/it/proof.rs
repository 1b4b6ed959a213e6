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

/// A tool that puts what it holds where redaction hides it: a minted
/// token in its result, and its credential in a request's header and URL.
fn keyed_tools(token: &'static str) -> Tools {
    Tools::new()
        .register("mint", move |_ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(json!({ "token": token, "expires_in": 60 }))
        })
        .register("fetch", |ctx: ToolContext, _: Value| async move {
            let c = ctx.credential("github").await?;
            let secret = c.secret().expose().to_owned();
            Ok::<_, ToolError>(json!({
                "sent": { "authorization": format!("Bearer {secret}") },
                "url": format!("https://api.test/?key={secret}"),
            }))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_recording_key_a_hidden_value_is_proven_and_a_changed_one_diverges() {
    let t = keyed_tools("tok-3f9a-long");
    let recording = record("keyed", RunStatus::Completed, |run| async move {
        run.call("mint", json!({})).invoke_tool(&t).await.unwrap();
        let vault = std::sync::Arc::new(
            reel_recorder::MemoryVault::new().with("github", "ghp_realSecret42"),
        );
        run.call("fetch", json!({}))
            .credentials(vault)
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    // The record keeps keyed markers, never the values.
    let tape = serde_json::to_string(&recording.facts).unwrap();
    assert!(!tape.contains("tok-3f9a-long") && !tape.contains("ghp_realSecret42"));
    assert!(tape.contains("[REDACTED:"), "{tape}");

    // The support's recorder keys with [9; 32].
    let keys = reel_archive::Keyring::new(&reel_archive::FingerprintKey::Key([9; 32])).unwrap();
    let keyed = ReplayOptions::default().keyed(&keys);
    let verdicts = |r: &reel::report::ReplayReport| -> Vec<Verdict> {
        r.calls.iter().map(|c| c.verdict).collect()
    };

    // The same code, with the key: both calls exact. The credential is a
    // stand-in carrying the recorded fingerprint, which marks it alike.
    let proven = replay(&recording, &keyed_tools("tok-3f9a-long"), &keyed).await;
    assert_eq!(
        verdicts(&proven),
        [Verdict::Matched, Verdict::Matched],
        "{proven}"
    );
    assert!(proven.is_exact(), "{proven}");

    // Without the key the token cannot be shown equal; the credential's
    // places still can (its marker is its fingerprint's).
    let unkeyed = replay(
        &recording,
        &keyed_tools("tok-3f9a-long"),
        &ReplayOptions::default(),
    )
    .await;
    assert_eq!(
        verdicts(&unkeyed),
        [Verdict::Unproven, Verdict::Unproven],
        "{unkeyed}"
    );
    assert_eq!(
        unkeyed.calls[0].unproven,
        ["call.ended:/outcome/result/token"]
    );
    // The header was hidden whole (a secret-named key): keyed over
    // "Bearer " and the credential's marker, so unproven without the key.
    assert_eq!(
        unkeyed.calls[1].unproven,
        ["call.ended:/outcome/result/sent/authorization"]
    );

    // The token changed: with the key, a divergence at its pointer;
    // without it, still only unproven (it cannot tell).
    let changed = keyed_tools("tok-0000-other");
    let caught = replay(&recording, &changed, &keyed).await;
    assert_eq!(verdicts(&caught)[0], Verdict::Diverged, "{caught}");
    let d = caught.calls[0].divergence.as_ref().unwrap();
    let paths: Vec<&str> = d.diff.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["call.ended:/outcome/result/token"], "{caught}");
    assert!(!caught.to_string().contains("tok-0000-other"), "{caught}");
    let blind = replay(&recording, &changed, &ReplayOptions::default()).await;
    assert_eq!(verdicts(&blind)[0], Verdict::Unproven, "{blind}");

    // A key that is not the recording's tags every learned value apart:
    // never reported exact.
    let wrong = reel_archive::Keyring::new(&reel_archive::FingerprintKey::Key([8; 32])).unwrap();
    let misuse = replay(
        &recording,
        &keyed_tools("tok-3f9a-long"),
        &ReplayOptions::default().keyed(&wrong),
    )
    .await;
    assert!(!misuse.is_exact(), "{misuse}");
}

//! A call outside any run, through the `reel` binary: `runs`, `show` (text
//! and `--json`), `export`, `import` and `verify` say "no run" and never
//! name a run id, and the exported tape's header says the same. The call is
//! recorded by the real recorder into a real archive.

use std::path::Path;

use reel::context::{ToolContext, ToolError};
use reel::tools::Tools;
use reel_archive::FingerprintKey;
use reel_recorder::{Caller, Recorder, RecorderConfig};
use serde_json::{json, Value};

use crate::support;

fn reel(config: &Path, args: &[&str]) -> (String, String) {
    let out = support::reel(config, args);
    assert!(
        out.status.success(),
        "reel {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_viewer_says_no_run() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("archive");
    let config = tmp.path().join("config");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let key = runtime.block_on(async {
        let recorder = Recorder::open(
            &archive,
            RecorderConfig {
                fingerprint_key: FingerprintKey::Key([3; 32]),
                serve_live: false,
                ..RecorderConfig::default()
            },
        )
        .await
        .unwrap();
        let tools = Tools::new().register("lookup", |ctx: ToolContext, _: Value| async move {
            ctx.progress(json!({ "message": "looking" }));
            Ok::<_, ToolError>(json!({ "run": ctx.run_id() }))
        });
        let call = recorder
            .call_from(Caller::new().session("mcp-7"), "lookup", json!({}))
            .unwrap();
        let key = call.key().to_owned();
        call.invoke_tool(&tools).await.unwrap();
        recorder.shutdown().await.unwrap();
        key
    });
    drop(runtime);
    let a = archive.to_str().unwrap();

    let (runs, _) = reel(&config, &["--archive", a, "runs"]);
    assert!(runs.contains(&format!("{key} (no run)")), "{runs}");
    assert!(runs.contains("completed"), "{runs}");

    let (show, _) = reel(&config, &["--archive", a, "show", &key]);
    let first = show.lines().next().unwrap();
    assert!(
        first.starts_with("no run  call c1 (kept as call-") && first.contains("completed"),
        "{show}"
    );
    assert!(show.contains("outside any run, by "), "{show}");
    assert!(show.contains("session mcp-7"), "{show}");
    // A stream that ends with its call is not flagged as an unended run.
    assert!(!show.to_lowercase().contains("never ended"), "{show}");

    let (json_out, _) = reel(&config, &["--archive", a, "show", &key, "--json"]);
    assert!(json_out.contains("\"outside_run\""), "{json_out}");

    let tape = tmp.path().join("call.tape.jsonl");
    reel(
        &config,
        &["--archive", a, "export", &key, "-o", tape.to_str().unwrap()],
    );
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&tape)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["run"]["outside_run"], "c1");
    let other = tmp.path().join("other");
    let (imported, _) = reel(
        &config,
        &[
            "--archive",
            other.to_str().unwrap(),
            "import",
            tape.to_str().unwrap(),
        ],
    );
    assert!(
        imported.starts_with("imported no run (call c1, kept as call-"),
        "{imported}"
    );
    let (verified, _) = reel(&config, &["--archive", a, "verify"]);
    assert!(!verified.contains("damage"), "{verified}");
}

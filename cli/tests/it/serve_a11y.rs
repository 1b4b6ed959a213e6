//! The console's pages pass axe-core (npm) in Debian's chromium with no
//! serious or critical violation: the runs table (plain and filtered),
//! a run, a big run's partial first look, an error page.
//!
//! axe-core's `axe.min.js` is found at `REEL_AXE` (`cargo xtask test`
//! installs it and sets it; `cargo xtask provision` installs it only);
//! without it the test fails, saying so, rather than skip.

use crate::console;

use std::path::PathBuf;

use console::*;
use fantoccini::Client;
use serde_json::Value;

fn axe_source() -> String {
    let install = "run `cargo xtask provision` (it installs axe-core from npm) and set \
                   REEL_AXE=~/.cache/reel/axe-core/node_modules/axe-core/axe.min.js, \
                   or run the tests with `cargo xtask test`, which does both";
    let file: PathBuf = std::env::var_os("REEL_AXE")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| panic!("REEL_AXE is not set, so axe-core cannot run: {install}"))
        .into();
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("REEL_AXE={}: {e}: {install}", file.display()))
}

/// The serious and critical violations axe-core finds on the page open in
/// `c`, each as `id: help (targets)`.
async fn violations(c: &Client, axe: &str) -> Vec<String> {
    c.execute(&format!("{axe}\n;return typeof axe"), vec![])
        .await
        .expect("axe-core loads");
    let found = c
        .execute(
            "return axe.run(document, { resultTypes: ['violations'] }) \
               .then(function (r) { return r.violations.map(function (v) { \
                 return { id: v.id, impact: v.impact, help: v.help, \
                          targets: v.nodes.map(function (n) { return n.target.join(' '); }) }; }); }) \
               .catch(function (e) { return 'axe failed: ' + e; });",
            vec![],
        )
        .await
        .expect("axe.run answers");
    let Value::Array(found) = found else {
        panic!("{found}")
    };
    found
        .iter()
        .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
        .map(|v| format!("{}: {} ({})", v["id"], v["help"], v["targets"]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_pass_axe_core() {
    let axe = axe_source();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    demo(&dir);
    hostile_run(&dir);
    long_run(&dir, "huge", 60_000, 1000);
    let served = serve(&dir);
    let driver = driver();
    let c = browser(&driver).await;
    // A page of 2,000 facts takes axe-core a while.
    c.update_timeouts(fantoccini::wd::TimeoutConfiguration::new(
        Some(std::time::Duration::from_secs(300)),
        None,
        None,
    ))
    .await
    .unwrap();
    let base = &served.base;
    let mut failed = Vec::new();
    for path in [
        "/",
        "/?status=failed&q=deploy&anomaly=1",
        "/?principal=nobody",
        "/tools",
        "/tools?status=failed&since=2000-01-01",
        "/runs/demo-deploy",
        "/runs/demo-deploy-failed#seq-3",
        "/runs/hostile",
        "/runs/huge",
        "/runs/no-such-run",
    ] {
        if path == "/runs/no-such-run" {
            c.goto(&format!("{base}{path}")).await.unwrap();
        } else {
            open(&c, &format!("{base}{path}")).await;
        }
        for v in violations(&c, &axe).await {
            failed.push(format!("{path}: {v}"));
        }
    }
    assert!(failed.is_empty(), "axe-core:\n{}", failed.join("\n"));
    c.close().await.unwrap();
}

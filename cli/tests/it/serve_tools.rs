//! The tools overview (`/tools`) and the runs-over-time chart of the
//! first page, in Debian's chromium: the figures per tool are those
//! computed from the facts of the recorded archive, every tool has its two
//! charts (inline SVG), the page logs no console error (a CSP violation
//! would be one) and runs no payload; and their rendering for a fixed
//! archive, as insta snapshots.

use std::path::Path;

use crate::console::*;
use crate::stats_by_tool::{exact, from_facts};
use serde_json::Value;

/// Runs of fixed shapes at fixed times (2023-11-14T22:13:20Z on), one
/// tool named with markup: what the snapshots hold.
fn fixed_runs(dir: &Path) {
    let at = 1_700_000_000_000_000_000;
    let shapes: Vec<RunShape> = (0..8)
        .map(|i| RunShape {
            id: format!("fixed-{i}"),
            tenant: Some("acme".into()),
            at: at + i * 600_000_000_000,
            tool: if i == 5 {
                HOSTILE.into()
            } else {
                ["lookup", "fetch"][i as usize % 2].into()
            },
            message: (i % 2 == 0).then(|| "step".into()),
            error: (i % 3 == 0).then(|| "no".into()),
            unended: i == 7,
            ..RunShape::default()
        })
        .collect();
    record_runs(dir, &shapes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_overview_shows_the_figures_of_the_facts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    demo(&dir);
    hostile_run(&dir);
    controls_run(&dir);
    fixed_runs(&dir);
    let want = from_facts(&dir);
    let served = serve(&dir);
    let driver = driver();
    let c = browser(&driver).await;
    open(&c, &format!("{}/tools", served.base)).await;
    no_alert(&c).await;
    let rows: Vec<Value> = serde_json::from_value(
        js(
            &c,
            "return Array.from(document.querySelectorAll('tr.tool')).map(r => ({ \
               tool: r.dataset.tool, calls: +r.dataset.calls, errors: +r.dataset.errors, \
               progress: +r.dataset.progress, p50: +r.dataset.p50, p99: +r.dataset.p99 }))",
        )
        .await,
    )
    .unwrap();
    // Names as shown: controls escaped as the CLI escapes them.
    let shown = |name: &str| reel_viewer::render::terminal::escape(name).into_owned();
    let names: Vec<&str> = rows.iter().map(|r| r["tool"].as_str().unwrap()).collect();
    assert_eq!(names, want.keys().map(|k| shown(k)).collect::<Vec<_>>());
    for r in &rows {
        let name = r["tool"].as_str().unwrap();
        let w = want.iter().find(|(k, _)| shown(k) == name).unwrap().1;
        assert_eq!(
            (
                r["calls"].as_u64(),
                r["errors"].as_u64(),
                r["progress"].as_u64()
            ),
            (Some(w.calls), Some(w.errors), Some(w.progress)),
            "{name}"
        );
        let mut d = w.durations.clone();
        d.sort();
        if !d.is_empty() {
            for (key, q) in [("p50", 0.5), ("p99", 0.99)] {
                let (got, exact) = (r[key].as_f64().unwrap(), exact(&d, q) as f64);
                assert!((got - exact).abs() <= exact / 16.0 + 1.0, "{name} {key}");
            }
        }
    }
    // Two charts per tool, each with an accessible name.
    let charts = js(
        &c,
        "return Array.from(document.querySelectorAll('section.tool')).map(s => \
           s.querySelectorAll('svg.chart[role=img][aria-label]').length)",
    )
    .await;
    assert_eq!(charts, serde_json::json!(vec![2; want.len()]));
    let errors = console_errors(&c).await;
    assert!(errors.is_empty(), "/tools: {errors:?}");
    // The first page's chart: one bar (a group) per bucket with runs, and
    // its titles count every run of the archive.
    open(&c, &format!("{}/", served.base)).await;
    let counted = js(
        &c,
        "var n = 0; document.querySelectorAll('#trend svg g > title').forEach(function (t) { \
           t.textContent.split(': ')[1].split(', ').forEach(function (p) { n += parseInt(p, 10); }); \
         }); return n",
    )
    .await;
    assert_eq!(counted, serde_json::json!(5 + 2 + 8));
    let errors = console_errors(&c).await;
    assert!(errors.is_empty(), "/: {errors:?}");
    // Filtered like the table.
    open(&c, &format!("{}/?status=failed", served.base)).await;
    let failed = js(
        &c,
        "return document.querySelectorAll('#trend svg rect.k-error').length",
    )
    .await;
    let other = js(
        &c,
        "return document.querySelectorAll('#trend svg rect.k-ok').length",
    )
    .await;
    assert!(
        failed.as_u64().unwrap() > 0 && other == 0,
        "{failed} {other}"
    );
    c.close().await.unwrap();
}

/// The overview's and the first page chart's rendering for a fixed
/// archive (times and durations fixed by its facts).
#[test]
fn renderings_of_the_tools_overview_and_the_runs_chart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    fixed_runs(&dir);
    let served = serve(&dir);
    let (status, tools) = http_get(&served.base, "/tools", &[]);
    assert_eq!(status, 200);
    let from = tools.find("<p id=\"window\"").unwrap();
    let to = tools.find("</body>").unwrap();
    insta::assert_snapshot!("tools_overview", tools[from..to].replace("><", ">\n<"));
    let (_, runs) = http_get(&served.base, "/", &[]);
    let from = runs.find("<section id=\"trend\"").unwrap();
    let to = from + runs[from..].find("</section>").unwrap();
    insta::assert_snapshot!("runs_chart", runs[from..to].replace("><", ">\n<"));
    assert!(
        !tools.contains("<script>alert"),
        "markup in a tool name is escaped"
    );
}

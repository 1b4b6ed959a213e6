//! `reel serve`: the page of one run and the views that start from it,
//! end to end with the real `reel` binary and Debian's chromium (through
//! chromium-driver): the waterfall's collapse, collapse-below-a-duration
//! and focus (in the URL), the lanes, the `reel show` command a fact is
//! copied as (run with the real binary), artifacts (previewed, or only
//! downloaded, never rendered), two runs compared as `reel diff` aligns
//! them, a real replay report, a proxy recording's wire view, and a run
//! followed live while the recorder writes it.

use crate::console;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use console::*;
use fantoccini::{Client, Locator};
use reel::fact::{FactKind, NewFact};
use reel_archive::{Archive, ArchiveConfig};
use serde_json::{json, Value};

/// A fact of `kind` with fields `data`, through the core's own parser.
fn kind(name: &str, data: Value) -> FactKind {
    FactKind::from_parts(name, data).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn call_started(id: &str, tool: &str, parent: Option<&str>) -> FactKind {
    kind(
        "call.started",
        json!({
            "call_id": id, "tool_name": tool, "tool_id": null, "parent_call": parent,
            "iteration": 1, "invocation_id": null, "mode": "async", "protocol": null,
            "platform": null, "client_info": null, "args": {"q": id}, "wanted": null,
            "attached": null, "spec": null,
        }),
    )
}

fn call_ended(duration_ns: u64) -> FactKind {
    kind(
        "call.ended",
        json!({"outcome": {"status": "ok", "result": "done"}, "duration_ns": duration_ns}),
    )
}

/// Artifacts of the `nested` run: (id, media type, bytes).
fn artifacts() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    // A 1x1 PNG.
    let png = vec![
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00,
        0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    vec![
        ("art-text", "text/plain", format!("notes {HOSTILE}").into_bytes()),
        (
            "art-json",
            "application/json",
            br#"{"answer":42,"list":[1,2]}"#.to_vec(),
        ),
        ("art-png", "image/png", png),
        (
            "art-html",
            "text/html",
            b"<html><body><script>document.title='pwned';alert('html')</script><img src=x onerror=alert(3)></body></html>".to_vec(),
        ),
        (
            "art-svg",
            "image/svg+xml",
            b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(4)'><script>alert(5)</script></svg>"
                .to_vec(),
        ),
        // An SVG that claims to be a PNG: served as image/png, inline, it
        // is no image and runs nothing.
        (
            "art-fake-png",
            "image/png",
            b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(6)'></svg>".to_vec(),
        ),
    ]
}

/// The run `nested`: `root` (40 ms) dispatches `child` (20 ms), which
/// dispatches `grandchild` (2 ms); `sibling` (1 ms) runs beside `root`.
/// Facts in every lane; the artifacts of [`artifacts`] put by `child`.
/// Returns each artifact's seq.
fn nested_run(dir: &Path) -> Vec<u64> {
    let archive = Archive::open(dir, ArchiveConfig::default()).unwrap();
    let ms = 1_000_000u64;
    let mut facts: Vec<(u64, Option<&str>, FactKind)> = vec![
        (
            0,
            None,
            kind(
                "run.started",
                json!({"run_id": "nested", "session_id": null, "identity": {"tenant": "acme", "principal": "ann", "conversation": null},
                       "producer": {"name": "test", "version": "1"}, "labels": {}, "teardown_scopes": ["run"]}),
            ),
        ),
        (ms, Some("root"), call_started("root", "plan", None)),
        (
            2 * ms,
            Some("root"),
            kind(
                "progress",
                json!({"payload": {"message": "planning"}, "count": 1}),
            ),
        ),
        (
            3 * ms,
            Some("child"),
            call_started("child", "build", Some("root")),
        ),
        (
            4 * ms,
            Some("child"),
            kind(
                "effect",
                json!({"name": "github.plan", "request": {"a": 1}, "outcome": {"ok": {"steps": 2}}}),
            ),
        ),
        (
            5 * ms,
            Some("child"),
            kind(
                "elicit.requested",
                json!({"message": "Deploy?", "schema": {"type": "object"}, "mode": "form", "ttl_ms": null}),
            ),
        ),
        (
            6 * ms,
            Some("child"),
            kind(
                "elicit.answered",
                json!({"outcome": {"outcome": "accept", "content": {"ok": true}}, "validation_errors": [], "pre_resolved": false}),
            ),
        ),
        (
            7 * ms,
            Some("grandchild"),
            call_started("grandchild", "lint", Some("child")),
        ),
        (
            8 * ms,
            Some("grandchild"),
            kind(
                "log",
                json!({"level": "info", "logger": null, "subflow": null, "data": "linting", "delivered": false}),
            ),
        ),
        (9 * ms, Some("grandchild"), call_ended(2 * ms)),
    ];
    let mut seq_of = Vec::new();
    let mut at = 10 * ms;
    for (id, media_type, bytes) in artifacts() {
        let digest = archive.put_artifact(&bytes).unwrap();
        seq_of.push(facts.len() as u64);
        facts.push((
            at,
            Some("child"),
            kind(
                "artifact.put",
                json!({"meta": {"id": id, "digest": digest, "size": bytes.len(), "media_type": media_type,
                                "scope": {"tenant": "acme", "principal": null, "conversation": null},
                                "origin": {"run_id": "nested", "call_id": "child"}}}),
            ),
        ));
        at += ms / 2;
    }
    facts.extend([
        (17 * ms, Some("child"), kind("teardown.registered", json!({"scope": "run", "key_hash": "sha256:aa", "first": true, "registrations": 1, "registered_at": 0}))),
        (23 * ms, Some("child"), call_ended(20 * ms)),
        (30 * ms, Some("root"), kind("cancel.requested", json!({"reason": "enough"}))),
        (41 * ms, Some("root"), call_ended(40 * ms)),
        (42 * ms, Some("sibling"), call_started("sibling", "ping", None)),
        (43 * ms, Some("sibling"), call_ended(ms)),
        (44 * ms, None, kind("teardown.ran", json!({"scope": "run", "key_hash": "sha256:aa", "outcome": {"outcome": "ok"}, "duration_ns": 5, "registrations": 1, "last_registered_at": 0}))),
        (45 * ms, None, kind("run.ended", json!({"status": "completed"}))),
    ]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let facts = facts
        .into_iter()
        .map(|(offset, call, kind)| NewFact {
            at: now + offset as i64,
            offset,
            call: call.map(Into::into),
            kind,
        })
        .collect();
    archive.append("nested", facts).unwrap();
    archive.flush().unwrap();
    seq_of
}

async fn strings(c: &Client, script: &str) -> Vec<String> {
    serde_json::from_value(js(c, script).await).unwrap_or_else(|e| panic!("{script}: {e}"))
}

async fn text(c: &Client, script: &str) -> String {
    let v = js(c, script).await;
    v.as_str()
        .unwrap_or_else(|| panic!("{script}: {v}"))
        .to_owned()
}

async fn numbers(c: &Client, script: &str) -> Vec<f64> {
    serde_json::from_value(js(c, script).await).unwrap_or_else(|e| panic!("{script}: {e}"))
}

/// Opens a run's page and waits for its script (`run.js`).
async fn open_run(c: &Client, url: &str) {
    open(c, url).await;
    let started = Instant::now();
    while js(c, "return document.body.dataset.runReady || null").await != json!("1") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{url}: run.js did not run"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The waterfall's visible rows, by call.
async fn rows(c: &Client) -> Vec<String> {
    strings(
        c,
        "return Array.from(document.querySelectorAll('#waterfall .wf-row')).filter(r => !r.hidden).map(r => r.dataset.call)",
    )
    .await
}

async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap();
}

/// Runs a command line as a shell would (the one the console copied).
fn sh(line: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(line)
        .env("PATH", path_with_reel())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `PATH` with the `reel` under test first.
fn path_with_reel() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_reel")).parent().unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_page_collapses_focuses_and_copies_commands() {
    let tmp = tempfile::tempdir().unwrap();
    // A space and a quote in the archive's path: the copied command
    // quotes it.
    let dir = tmp.path().join("the archive's");
    demo(&dir);
    nested_run(&dir);
    let served = serve(&dir);
    let driver = driver();
    let c = browser(&driver).await;
    let base = served.base.clone();

    open_run(&c, &format!("{base}/runs/nested")).await;
    assert_eq!(
        rows(&c).await,
        ["root", "child", "grandchild", "sibling"],
        "tree order"
    );
    // The lanes: every fact of each lane marked, on the run's axis.
    let lanes: Value = js(
        &c,
        "return Object.fromEntries(Array.from(document.querySelectorAll('#lanes .lane')).map(l => \
         [l.dataset.lane, l.querySelectorAll('.mark').length]))",
    )
    .await;
    assert_eq!(
        lanes,
        json!({"progress": 1, "logs": 1, "effects": 1, "elicitations": 2, "artifacts": 6, "teardown": 2, "cancellation": 1})
    );
    let lefts = numbers(
        &c,
        "return Array.from(document.querySelectorAll('#lanes .mark')).map(m => parseFloat(m.style.left))",
    )
    .await;
    assert!(lefts.iter().all(|l| (0.0..=100.0).contains(l)), "{lefts:?}");
    // The cancellation at +30 ms of a 45 ms run: two thirds along.
    let cancel = numbers(
        &c,
        "return [parseFloat(document.querySelector('#lanes .mk-cancellation').style.left)]",
    )
    .await[0];
    assert!((cancel - 66.667).abs() < 0.01, "{cancel}");

    // Collapse `root`: its subtree is hidden, the rest stays; in the URL.
    click(&c, "#waterfall .wf-row[data-call='root'] button.twisty").await;
    assert_eq!(rows(&c).await, ["root", "sibling"]);
    let search = text(&c, "return location.search").await;
    assert_eq!(search, "?collapse=root");
    // The shared URL opens the same view.
    open_run(&c, &format!("{base}/runs/nested?collapse=root")).await;
    assert_eq!(rows(&c).await, ["root", "sibling"]);
    click(&c, "#waterfall .wf-row[data-call='root'] button.twisty").await;
    assert_eq!(rows(&c).await.len(), 4, "expanded again");
    // Collapse a middle call: only what is below it goes.
    click(&c, "#waterfall .wf-row[data-call='child'] button.twisty").await;
    assert_eq!(rows(&c).await, ["root", "child", "sibling"]);
    click(&c, "#expand-all").await;
    click(&c, "#collapse-all").await;
    assert_eq!(rows(&c).await, ["root", "sibling"]);
    click(&c, "#expand-all").await;

    // Hide calls shorter than 5 ms: `grandchild` (2 ms) and `sibling`
    // (1 ms).
    js(
        &c,
        "var b = document.getElementById('below'); b.value = '5'; b.dispatchEvent(new Event('input'))",
    )
    .await;
    assert_eq!(rows(&c).await, ["root", "child"]);
    let said = text(
        &c,
        "return document.getElementById('tree-count').textContent",
    )
    .await;
    assert_eq!(said, "hidden: 2 shorter than 5 ms");
    let search = text(&c, "return location.search").await;
    assert_eq!(search, "?below=5");
    js(
        &c,
        "var b = document.getElementById('below'); b.value = ''; b.dispatchEvent(new Event('input'))",
    )
    .await;

    // Focus on `child`: its subtree only, in the waterfall, the facts and
    // the lanes; in the URL.
    click(&c, "#waterfall .wf-row[data-call='child'] button.focus-btn").await;
    assert_eq!(rows(&c).await, ["child", "grandchild"]);
    let facts = strings(
        &c,
        "return Array.from(document.querySelectorAll('.fact-list .fact')).filter(f => !f.hidden).map(f => f.dataset.call)",
    )
    .await;
    assert!(!facts.is_empty());
    assert!(
        facts.iter().all(|c| c == "child" || c == "grandchild"),
        "{facts:?}"
    );
    let marks = strings(
        &c,
        "return Array.from(document.querySelectorAll('#lanes .mark')).filter(m => !m.hidden).map(m => m.dataset.call)",
    )
    .await;
    assert!(!marks.contains(&"root".to_owned()), "{marks:?}");
    assert!(marks.contains(&"grandchild".to_owned()), "{marks:?}");
    let search = text(&c, "return location.search").await;
    assert_eq!(search, "?focus=child");
    open_run(&c, &format!("{base}/runs/nested?focus=child")).await;
    assert_eq!(rows(&c).await, ["child", "grandchild"]);
    // The focused call's command shows its facts with the real binary.
    click(&c, "#focus-cmd button.copy").await;
    let copied = text(
        &c,
        "return document.querySelector('#focus-cmd button.copy').dataset.copied",
    )
    .await;
    assert!(
        copied.contains("'"),
        "the archive's path is quoted: {copied}"
    );
    let shown = sh(&copied);
    assert!(shown.contains("run nested"), "{shown}");
    assert!(shown.contains("child build"), "{shown}");
    assert!(shown.contains("child build call.started"), "{shown}");
    assert!(!shown.contains("sibling ping call.started"), "{shown}");
    assert!(!shown.contains("root plan call.started"), "{shown}");
    click(&c, "#unfocus").await;
    assert_eq!(rows(&c).await.len(), 4);
    let search = text(&c, "return location.search").await;
    assert_eq!(search, "");

    // A fact's inspector: its command, run, lists that fact.
    for (seq, line) in [
        (4u64, "effect"),
        (0, "run.started"),
        (18, "cancel.requested"),
    ] {
        open_run(&c, &format!("{base}/runs/nested#seq-{seq}")).await;
        click(&c, &format!("#seq-{seq} .fact-cmd button.copy")).await;
        let copied = text(
            &c,
            &format!(
                "return document.querySelector('#seq-{seq} .fact-cmd button.copy').dataset.copied"
            ),
        )
        .await;
        let shown = sh(&copied);
        let want = format!("#{seq} ");
        let hit = shown
            .lines()
            .find(|l| l.contains(&want))
            .unwrap_or_else(|| panic!("{copied}: #{seq} not shown:\n{shown}"));
        assert!(hit.contains(line), "{hit}");
    }
    // The existing filter still works beside the tree.
    open_run(&c, &format!("{base}/runs/nested?kind=progress")).await;
    let kinds = strings(
        &c,
        "return Array.from(document.querySelectorAll('.fact-list .fact')).filter(f => !f.hidden).map(f => f.dataset.kind)",
    )
    .await;
    assert_eq!(kinds, ["progress"]);
    no_alert(&c).await;
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_previewed_or_downloaded_and_never_rendered() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    let seqs = nested_run(&dir);
    let served = serve(&dir);
    let base = served.base.clone();
    let arts = artifacts();

    // Downloads: the recorded type, always an attachment, never sniffed;
    // inline only for a previewable image type.
    for ((id, media_type, bytes), seq) in arts.iter().zip(&seqs) {
        for inline in [false, true] {
            let path = format!(
                "/runs/nested/artifacts/{seq}/raw{}",
                if inline { "?inline=1" } else { "" }
            );
            let (status, answer, body) = http_get_bytes(&base, &path);
            assert_eq!(status, 200, "{path}: {answer}");
            assert_eq!(header(&answer, "content-type"), Some(*media_type), "{path}");
            assert_eq!(
                header(&answer, "x-content-type-options"),
                Some("nosniff"),
                "{path}"
            );
            assert!(
                header(&answer, "content-security-policy").is_some_and(|p| p
                    .contains("default-src 'none'")
                    && p.contains("script-src 'self'")),
                "{path}"
            );
            let disposition = header(&answer, "content-disposition").unwrap();
            let image = media_type.starts_with("image/png");
            if inline && image {
                assert_eq!(disposition, "inline", "{path}");
            } else {
                assert_eq!(
                    disposition,
                    format!("attachment; filename=\"{id}\""),
                    "{path}"
                );
            }
            assert_eq!(body, *bytes, "{path}");
        }
    }
    // Reached only through a fact of the run that names one.
    for (path, want) in [
        ("/runs/nested/artifacts/0", 404),
        ("/runs/nested/artifacts/0/raw", 404),
        ("/runs/nested/artifacts/999", 404),
        ("/runs/nested/artifacts/x/raw", 400),
        ("/runs/nope/artifacts/10/raw", 404),
    ] {
        let (status, answer) = http_get(&base, path, &[]);
        assert_eq!(status, want, "{path}: {answer}");
    }
    let (_, answer) = http_get(&base, "/runs/nested/artifacts/0", &[]);
    assert!(
        answer.contains("is run.started, not an artifact"),
        "{answer}"
    );

    let driver = driver();
    let c = browser(&driver).await;
    // From the artifacts lane to the text artifact's preview: as text.
    open_run(&c, &format!("{base}/runs/nested")).await;
    click(&c, "#lanes .mk-artifacts").await;
    let started = Instant::now();
    while js(&c, "return document.body && document.body.dataset.page").await != json!("artifact") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no artifact page"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let preview = text(
        &c,
        "return document.getElementById('preview').dataset.preview",
    )
    .await;
    assert_eq!(preview, "text");
    let shown = text(&c, "return document.getElementById('preview').textContent").await;
    assert_eq!(shown, format!("notes {HOSTILE}"));
    assert_eq!(
        js(&c, "return document.querySelectorAll('img').length").await,
        json!(0)
    );
    no_alert(&c).await;
    // JSON, pretty-printed.
    open(&c, &format!("{base}/runs/nested/artifacts/{}", seqs[1])).await;
    let shown = text(&c, "return document.getElementById('preview').textContent").await;
    assert!(shown.contains("\"answer\": 42"), "{shown}");
    // The PNG, decoded as an image.
    open(&c, &format!("{base}/runs/nested/artifacts/{}", seqs[2])).await;
    let started = Instant::now();
    while js(
        &c,
        "var i = document.querySelector('#preview img'); return i.complete && i.naturalWidth",
    )
    .await
        != json!(1)
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the PNG did not load"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // HTML, SVG, and an SVG that says it is a PNG: nothing of theirs runs.
    for (i, want) in [(3, "none"), (4, "none"), (5, "image")] {
        let url = format!("{base}/runs/nested/artifacts/{}", seqs[i]);
        open(&c, &url).await;
        let preview = text(
            &c,
            "return document.getElementById('preview').dataset.preview",
        )
        .await;
        assert_eq!(preview, want, "{url}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        no_alert(&c).await;
        let scripts = js(
            &c,
            "return document.querySelectorAll('script, iframe, object, embed, svg').length",
        )
        .await;
        assert_eq!(scripts, json!(1), "{url}: only the console's own script");
        let title = text(&c, "return document.title").await;
        assert!(title.starts_with("reel: artifact"), "{title}");
        // Its download, asked for directly, is saved, not shown.
        let raw = format!("{url}/raw");
        let _ = c.goto(&raw).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        no_alert(&c).await;
        let title = text(&c, "return document.title").await;
        assert_ne!(title, "pwned", "{raw}");
    }
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_being_recorded_updates_live_on_its_page() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    // The demo runs, then a slow live run the recorder writes and serves
    // on its socket.
    // The browser first: started after the run, on a loaded machine it
    // could open the page after the run ended.
    let driver = driver();
    let c = browser(&driver).await;
    // 80 hops of 150 ms: long enough that the run still grows when the
    // test sets its filter, on a machine loaded by the rest of the suite
    // (40 hops ended first there once).
    let mut recorder = recording_live(&dir, 80, 150);
    let served = serve(&dir);
    let base = served.base.clone();
    let started = Instant::now();
    loop {
        let (status, page) = http_get(&base, "/runs/demo-live", &[]);
        if status == 200 && page.contains("data-state=\"running\"") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the live run is not served: {page}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    open_run(&c, &format!("{base}/runs/demo-live")).await;
    assert_eq!(
        text(&c, "return document.body.dataset.live").await,
        "following"
    );
    // A mark of this page load: a reload would lose it.
    js(&c, "window.sameLoad = true").await;
    let facts = |c: &Client| {
        let c = c.clone();
        async move {
            js(
                &c,
                "return Number(document.getElementById('run-head').dataset.facts)",
            )
            .await
            .as_u64()
            .unwrap()
        }
    };
    let first = facts(&c).await;
    let listed_first = js(
        &c,
        "return document.querySelectorAll('.fact-list .fact').length",
    )
    .await;
    // It grows while the recorder writes, without a reload.
    let started = Instant::now();
    let mut seen = vec![first];
    while seen.len() < 4 {
        let now = facts(&c).await;
        if now != *seen.last().unwrap() {
            assert!(now > *seen.last().unwrap(), "{seen:?} then {now}");
            seen.push(now);
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the page did not follow the run: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(js(&c, "return window.sameLoad === true").await, json!(true));
    let listed = js(
        &c,
        "return document.querySelectorAll('.fact-list .fact').length",
    )
    .await;
    assert!(
        listed.as_u64() > listed_first.as_u64(),
        "{listed} vs {listed_first}"
    );
    // The filter set before an update still holds after it.
    js(
        &c,
        "var s = document.getElementById('kind-filter'); s.value = 'progress'; s.dispatchEvent(new Event('change'))",
    )
    .await;
    let before = facts(&c).await;
    let started = Instant::now();
    while facts(&c).await == before {
        assert!(started.elapsed() < Duration::from_secs(30), "no update");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let kinds = strings(
        &c,
        "return Array.from(document.querySelectorAll('.fact-list .fact')).filter(f => !f.hidden).map(f => f.dataset.kind)",
    )
    .await;
    assert!(
        !kinds.is_empty() && kinds.iter().all(|k| k == "progress"),
        "{kinds:?}"
    );
    // Once the recorder is done, the page says the run completed, and
    // stops following.
    let status = tokio::task::spawn_blocking(move || recorder.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    while js(
        &c,
        "return document.getElementById('run-head').dataset.state",
    )
    .await
        != json!("completed")
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the page did not see the run end"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        text(&c, "return document.body.dataset.live").await,
        "closed"
    );
    assert_eq!(js(&c, "return window.sameLoad === true").await, json!(true));
    let total = facts(&c).await;
    let (_, shown) = http_get(&base, "/runs/demo-live", &[]);
    assert!(
        shown.contains(&format!("data-facts=\"{total}\"")),
        "the live page ends where the run ends ({total})"
    );
    c.close().await.unwrap();
}

/// A run `id` of one call `c1` of three progress reports, the second
/// saying `message`.
fn linear_run(dir: &Path, id: &str, message: &str) {
    let archive = Archive::open(dir, ArchiveConfig::default()).unwrap();
    let facts = vec![
        kind(
            "run.started",
            json!({"run_id": id, "session_id": null, "identity": null,
                   "producer": {"name": "test", "version": "1"}, "labels": {}, "teardown_scopes": []}),
        ),
        call_started("c1", "walk", None),
        kind(
            "progress",
            json!({"payload": {"message": "one"}, "count": 1}),
        ),
        kind(
            "progress",
            json!({"payload": {"message": message}, "count": 2}),
        ),
        kind(
            "progress",
            json!({"payload": {"message": "three"}, "count": 3}),
        ),
        call_ended(5),
        kind("run.ended", json!({"status": "completed"})),
    ];
    let facts = facts
        .into_iter()
        .enumerate()
        .map(|(i, kind)| NewFact {
            at: 1_700_000_000_000_000_000 + i as i64 * 1000,
            offset: i as u64 * 1000,
            call: (i > 0 && i < 6).then(|| "c1".into()),
            kind,
        })
        .collect();
    archive.append(id, facts).unwrap();
    archive.flush().unwrap();
}

/// `reel diff A B`'s verdict: the first differing position, if any.
fn reel_diff(dir: &Path, a: &str, b: &str) -> Option<u64> {
    let out = reel()
        .args(["diff", "--archive"])
        .arg(dir)
        .args([a, b])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let last = text.lines().last().unwrap_or("").to_owned();
    match last.strip_prefix("the runs differ first at fact ") {
        Some(i) => {
            assert_eq!(out.status.code(), Some(1), "{text}");
            Some(i.trim().parse().unwrap())
        }
        None => {
            assert!(out.status.success(), "{text}");
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_compared_as_reel_diff_aligns_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    linear_run(&dir, "walk-a", "two");
    linear_run(&dir, "walk-b", HOSTILE);
    linear_run(&dir, "walk-c", "two");
    demo(&dir);
    nested_run(&dir);
    let served = serve(&dir);
    let base = served.base.clone();
    let driver = driver();
    let c = browser(&driver).await;

    // From a run's page: its compare form.
    open_run(&c, &format!("{base}/runs/walk-a")).await;
    c.find(Locator::Css(".compare-form input[name='b']"))
        .await
        .unwrap()
        .send_keys("walk-b")
        .await
        .unwrap();
    click(&c, ".compare-form button[type='submit']").await;
    let started = Instant::now();
    while js(&c, "return document.body && document.body.dataset.page").await != json!("compare") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no compare page"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = text(&c, "return location.pathname + location.search").await;
    assert_eq!(url, "/compare?a=walk-a&b=walk-b");

    // Every pair: the first difference where `reel diff` finds it, and
    // each position's two facts side by side.
    for (a, b) in [
        ("walk-a", "walk-b"),
        ("walk-a", "walk-c"),
        ("walk-a", "nested"),
        ("demo-deploy", "demo-deploy-failed"),
        ("demo-search", "demo-walk-cancelled"),
    ] {
        let want = reel_diff(&dir, a, b);
        open(&c, &format!("{base}/compare?a={a}&b={b}")).await;
        no_alert(&c).await;
        let first = text(
            &c,
            "return document.getElementById('compare').dataset.first",
        )
        .await;
        assert_eq!(
            first,
            want.map(|w| w.to_string()).unwrap_or_default(),
            "{a} vs {b}"
        );
        let marked = strings(
            &c,
            "return Array.from(document.querySelectorAll('tr.first-diff')).map(r => r.dataset.index)",
        )
        .await;
        assert_eq!(
            marked,
            want.map(|w| vec![w.to_string()]).unwrap_or_default(),
            "{a} vs {b}"
        );
        let seqs: Vec<Vec<String>> = serde_json::from_value(
            js(
                &c,
                "return Array.from(document.querySelectorAll('tr.row')).map(r => \
                 Array.from(r.querySelectorAll('td.side')).map(s => s.dataset.seq || ''))",
            )
            .await,
        )
        .unwrap();
        for (i, pair) in seqs.iter().enumerate() {
            for seq in pair.iter().filter(|s| !s.is_empty()) {
                assert_eq!(
                    seq,
                    &i.to_string(),
                    "{a} vs {b}: row {i} is aligned by position"
                );
            }
        }
        let verdict = text(&c, "return document.getElementById('verdict').textContent").await;
        match want {
            Some(i) => assert!(
                verdict.contains(&format!("differ first at fact {i}")),
                "{verdict}"
            ),
            None => assert!(verdict.contains("match"), "{verdict}"),
        }
    }
    // The first difference of walk-a and walk-b: the message, its field
    // named, the hostile text shown as text.
    open(&c, &format!("{base}/compare?a=walk-a&b=walk-b")).await;
    let field = text(
        &c,
        "return document.querySelector('#first-diff .path').textContent",
    )
    .await;
    assert_eq!(field, "progress:/payload/message");
    let actual = text(
        &c,
        "return document.querySelector('#first-diff .actual').textContent",
    )
    .await;
    assert!(actual.contains(HOSTILE), "{actual}");
    assert_eq!(
        js(&c, "return document.querySelectorAll('img, script').length").await,
        json!(1)
    );
    no_alert(&c).await;
    // An unknown run is said, not an empty comparison.
    let (status, answer) = http_get(&base, "/compare?a=walk-a&b=nope", &[]);
    assert_eq!(status, 404, "{answer}");
    assert!(answer.contains("nope"), "{answer}");
    c.close().await.unwrap();
}

/// `fetch`, changed: it now says "Downloading" first.
async fn fetch_v2(
    ctx: reel::context::ToolContext,
    url: String,
) -> Result<Value, reel::context::ToolError> {
    ctx.progress(json!({ "message": format!("Downloading {url}") }));
    reel_demo::fetch(ctx, url).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_report_is_shown_beside_its_recording() {
    use reel_replayer::{replay, Recording, ReplayOptions};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    nested_run(&dir);
    let reports = tmp.path().join("reports");
    std::fs::create_dir_all(reports.join("tapes")).unwrap();
    let tapes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tapes");
    // A real replay of the demo's search with a changed `fetch`: it
    // diverges; the report is written beside the tape, as the replayer's
    // test support writes it.
    let tape = reports.join("tapes/demo-search.tape.jsonl");
    std::fs::copy(tapes.join("demo-search.tape.jsonl"), &tape).unwrap();
    let recording = Recording::from_tape_file(&tape).unwrap();
    let changed = reel::tools::Tools::new()
        .register("search", reel_demo::search)
        .register("fetch", fetch_v2);
    let diverged = replay(&recording, &changed, &ReplayOptions::default()).await;
    assert!(!diverged.is_match());
    diverged.write_beside(&tape).unwrap();
    // The same replay with the tools as they were: it matches.
    let same = reports.join("demo-search-same.tape.jsonl");
    std::fs::copy(tapes.join("demo-search.tape.jsonl"), &same).unwrap();
    let tools = reel::tools::Tools::new()
        .register("search", reel_demo::search)
        .register("fetch", reel_demo::fetch);
    let matched = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(matched.is_match(), "{matched}");
    matched.write_beside(&same).unwrap();
    // A report with no tape beside it and no run of its id in the
    // archive; a broken one.
    let mut orphan = diverged.clone();
    orphan.run_id = "gone".into();
    std::fs::write(
        reports.join("orphan.report.json"),
        serde_json::to_vec(&orphan).unwrap(),
    )
    .unwrap();
    std::fs::write(reports.join("broken.report.json"), "{ not json").unwrap();

    let served = serve_with(&dir, &["--reports".as_ref(), reports.as_os_str()]);
    let base = served.base.clone();
    let driver = driver();
    let c = browser(&driver).await;

    open(&c, &format!("{base}/reports")).await;
    let listed = strings(
        &c,
        "return Array.from(document.querySelectorAll('tr.report')).map(r => r.dataset.name).sort()",
    )
    .await;
    assert_eq!(
        listed,
        [
            "broken.report.json",
            "demo-search-same.tape.jsonl.report.json",
            "orphan.report.json",
            "tapes/demo-search.tape.jsonl.report.json",
        ]
    );
    // The diverged one: its first divergence, its field, at the row the
    // replayer names, the recorded fact there the one it names.
    click(
        &c,
        "tr.report[data-name='tapes/demo-search.tape.jsonl.report.json'] a",
    )
    .await;
    let started = Instant::now();
    while js(&c, "return document.body && document.body.dataset.page").await != json!("report") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no report page"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (call, d) = diverged
        .calls
        .iter()
        .find_map(|c| c.divergence.as_ref().map(|d| (c, d)))
        .unwrap();
    let shown = js(
        &c,
        "var s = document.getElementById('first-divergence'); \
         return [s.dataset.call, s.dataset.index, s.dataset.field]",
    )
    .await;
    assert_eq!(
        shown,
        json!([
            call.call_id,
            d.index.to_string(),
            d.diff.first().map(|f| f.path.clone()).unwrap_or_default()
        ])
    );
    let row = js(
        &c,
        &format!(
            "var r = document.querySelector('#call-{} tr.first-diff'); \
             return [r.dataset.index, r.querySelector('td.side').dataset.seq || null]",
            call.call_id
        ),
    )
    .await;
    assert_eq!(
        row,
        json!([d.index.to_string(), d.seq.map(|s| s.to_string())])
    );
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('tr.first-diff').length"
        )
        .await,
        json!(1),
        "one first divergence"
    );
    let fields = text(
        &c,
        "return document.getElementById('first-diff').textContent",
    )
    .await;
    let named = d
        .diff
        .first()
        .map(|f| f.path.clone())
        .unwrap_or_else(|| d.kind.as_str().to_owned());
    assert!(fields.contains(&named), "{named}: {fields}");
    // The changed tool's new progress, on the replayed side.
    let replayed = strings(
        &c,
        "return Array.from(document.querySelectorAll('tr.row td.side:last-child')).map(s => s.textContent)",
    )
    .await;
    assert!(
        replayed.iter().any(|t| t.contains("Downloading")),
        "{replayed:?}"
    );
    assert_eq!(
        js(&c, "return !!document.getElementById('no-recording')").await,
        json!(false)
    );
    // Each call: recorded and replayed side by side.
    let verdicts = strings(
        &c,
        "return Array.from(document.querySelectorAll('section.call-report')).map(s => s.dataset.call + ' ' + s.dataset.verdict)",
    )
    .await;
    let want: Vec<String> = diverged
        .calls
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c.call_id,
                serde_json::to_value(c.verdict).unwrap().as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(verdicts, want);

    // The matched one says so; the orphan shows the replayed side and says
    // why; the broken one is named.
    open(
        &c,
        &format!("{base}/reports/demo-search-same.tape.jsonl.report.json"),
    )
    .await;
    assert_eq!(
        js(&c, "return !!document.getElementById('first-divergence')").await,
        json!(false)
    );
    assert_eq!(
        text(&c, "return document.querySelector('h1 .pill').textContent").await,
        "matched"
    );
    open(&c, &format!("{base}/reports/orphan.report.json")).await;
    assert_eq!(
        js(&c, "return !!document.getElementById('no-recording')").await,
        json!(true)
    );
    let (status, answer) = http_get(&base, "/reports/broken.report.json", &[]);
    assert_eq!(status, 500, "{answer}");
    assert!(answer.contains("is not a reel replay report"), "{answer}");
    // Only what the listing has: nothing else on disk.
    for path in [
        "/reports/..%2F..%2Fetc%2Fpasswd",
        "/reports/tapes/demo-search.tape.jsonl",
        "/reports/nope.report.json",
    ] {
        let (status, answer) = http_get(&base, path, &[]);
        assert_eq!(status, 404, "{path}: {answer}");
        assert!(!answer.contains("root:"), "{answer}");
    }
    c.close().await.unwrap();
    drop(served);

    // Without --reports, the page says how to get them.
    let served = serve(&dir);
    let (status, page) = http_get(&served.base, "/reports", &[]);
    assert_eq!(status, 200);
    assert!(page.contains("reel serve --reports DIR"), "{page}");
}

/// A session through `reel mcp record -- python3 tests/raw_mcp_server.py`:
/// initialize, tools/list, `echo`, `fail` and `broken`, each answered
/// before the next is sent.
fn proxy_session(archive: &Path, config: &Path) {
    use std::io::{BufRead, BufReader, Write};
    let mut child = reel()
        .arg("--archive")
        .arg(archive)
        .args(["mcp", "record", "--", "python3"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/raw_mcp_server.py"))
        .env("REEL_CONFIG_DIR", config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
        if message.get("id").is_none() {
            return;
        }
        loop {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "the proxy closed stdout"
            );
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == message["id"] {
                break;
            }
        }
    };
    ask(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "wire-test", "version": "0"}}}),
    );
    ask(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}));
    for (id, tool) in [(3, "echo"), (4, "fail"), (5, "broken")] {
        ask(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": tool, "arguments": {"say": HOSTILE}}}));
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_recording_has_a_wire_view_beside_its_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    proxy_session(&dir, &tmp.path().join("config"));
    nested_run(&dir);
    let run = {
        let out = reel()
            .args(["runs", "--json", "--archive"])
            .arg(&dir)
            .output()
            .unwrap();
        let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
        let runs = runs
            .as_array()
            .or_else(|| runs["runs"].as_array())
            .unwrap()
            .clone();
        runs.iter()
            .map(|r| r["run_id"].as_str().unwrap().to_owned())
            .find(|r| r.starts_with("mcp-"))
            .expect("the proxy's run")
    };
    let served = serve(&dir);
    let base = served.base.clone();
    let driver = driver();
    let c = browser(&driver).await;
    // A run the proxy did not record has no wire link.
    open_run(&c, &format!("{base}/runs/nested")).await;
    assert_eq!(
        js(&c, "return !!document.getElementById('wire-link')").await,
        json!(false)
    );
    open_run(&c, &format!("{base}/runs/{run}")).await;
    click(&c, "#wire-link").await;
    let started = Instant::now();
    while js(&c, "return document.body && document.body.dataset.page").await != json!("wire") {
        assert!(started.elapsed() < Duration::from_secs(30), "no wire page");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    no_alert(&c).await;
    // One group per request, in order: what the client sent, then the
    // server's answer.
    let groups: Value = js(
        &c,
        "return Array.from(document.querySelectorAll('.wire-group')).map(g => \
         Array.from(g.querySelectorAll('.msg')).map(m => m.dataset.dir + ' ' + m.dataset.method))",
    )
    .await;
    let requests = |method: &str| json!([format!("to-server {method}"), "to-client (response)"]);
    assert_eq!(
        groups,
        json!([
            requests("initialize"),
            requests("tools/list"),
            requests("tools/call"),
            requests("tools/call"),
            requests("tools/call"),
        ])
    );
    // Beside the calls, each linking to its group.
    let calls = strings(
        &c,
        "return Array.from(document.querySelectorAll('.wire-calls a')).map(a => a.getAttribute('href'))",
    )
    .await;
    let ids = strings(
        &c,
        "return Array.from(document.querySelectorAll('.wire-group')).map(g => '#' + g.id)",
    )
    .await;
    assert_eq!(calls, ids);
    // Timing: in order, and each message timed from its request.
    let seqs = numbers(
        &c,
        "return Array.from(document.querySelectorAll('.msg')).map(m => Number(m.dataset.seq))",
    )
    .await;
    let mut within = seqs.clone();
    within.sort_by(f64::total_cmp);
    assert_eq!(seqs, within, "in the order recorded");
    let timed = strings(
        &c,
        "return Array.from(document.querySelectorAll('.msg .msg-head')).map(h => h.textContent)",
    )
    .await;
    assert!(timed.iter().all(|t| t.contains("(request +")), "{timed:?}");
    // The tools/call request carries the arguments sent, as text.
    let body = text(
        &c,
        "return document.querySelectorAll('.wire-group')[2].querySelector('.msg pre').textContent",
    )
    .await;
    let sent: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(sent, json!({"name": "echo", "arguments": {"say": HOSTILE}}));
    assert_eq!(
        js(&c, "return document.querySelectorAll('img, script').length").await,
        json!(1)
    );
    // What the view is, said on it.
    let note = text(
        &c,
        "return document.getElementById('wire-note').textContent",
    )
    .await;
    assert!(note.contains("JSON-RPC ids"), "{note}");
    c.close().await.unwrap();
}

#[test]
fn a_closed_runs_event_stream_says_so_and_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    nested_run(&dir);
    let served = serve(&dir);
    let started = Instant::now();
    let (status, answer) = http_get(&served.base, "/runs/nested/events?facts=3", &[]);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&answer, "content-type"), Some("text/event-stream"));
    assert!(
        answer.contains("event: run\ndata: 24 completed\n"),
        "{answer}"
    );
    let (status, answer) = http_get(&served.base, "/runs/nope/events", &[]);
    assert_eq!(status, 404, "{answer}");
}

/// The part of a page between `<main`/`<section id=...>` markers,
/// one tag a line, for a snapshot.
fn part(page: &str, start: &str, end: &str) -> String {
    let from = page
        .find(start)
        .unwrap_or_else(|| panic!("{start} not in {page}"));
    let to = from
        + page[from..]
            .find(end)
            .unwrap_or_else(|| panic!("{end} not in the page"));
    page[from..to + end.len()].replace("><", ">\n<")
}

#[test]
fn renderings_of_the_lanes_the_comparison_and_the_wire_view() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    linear_run(&dir, "walk-a", "two");
    linear_run(&dir, "walk-b", HOSTILE);
    proxy_session(&dir, &tmp.path().join("config"));
    let served = serve(&dir);
    let (_, run) = http_get(&served.base, "/runs/walk-a", &[]);
    insta::assert_snapshot!(
        "run_page_lanes",
        part(&run, "<section id=\"lanes\"", "</section>")
    );
    let (_, compared) = http_get(&served.base, "/compare?a=walk-a&b=walk-b", &[]);
    insta::assert_snapshot!("compare_walk_a_walk_b", part(&compared, "<main", "</main>"));
    let (_, page) = http_get(&served.base, "/", &[]);
    let run = page
        .split("data-run=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .find(|r| r.starts_with("mcp-"))
        .unwrap()
        .to_owned();
    let (_, wire) = http_get(&served.base, &format!("/runs/{run}/wire"), &[]);
    let wire = part(&wire, "<main", "</main>").replace(&run, "mcp-[run]");
    // Times vary; what the server said varies with the python version.
    let times = regex::Regex::new(r"[0-9][0-9.]*(ns|µs|ms|s)\b").unwrap();
    let command = regex::Regex::new(r"server <code>[^<]*</code>").unwrap();
    let wire = times.replace_all(&wire, "[time]");
    let wire = command.replace_all(&wire, "server <code>[command]</code>");
    // A redaction marker's tag is keyed by the archive's own key.
    let wire = reel::marker::strip_tags(&wire);
    insta::assert_snapshot!("wire_view", wire);
}

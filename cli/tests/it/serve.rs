//! `reel serve`, the operator's console, end to end: the real `reel` binary
//! records the demo and serves it; Debian's chromium, driven through
//! chromium-driver (WebDriver, with fantoccini), reads it. The test fails,
//! not skips, when chromium or chromium-driver is missing.
//!
//! Plain HTTP (no browser): a foreign `Host` is refused, a token is
//! required off loopback.

use crate::console;

use std::process::Stdio;
use std::time::{Duration, Instant};

use console::*;
use fantoccini::Locator;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    demo(&dir);
    big_run(&dir, 5000);
    hostile_run(&dir);
    let served = serve(&dir);
    let driver = driver();
    let c = browser(&driver).await;
    let base = served.base.clone();

    // The runs table lists the demo runs, newest first.
    open(&c, &format!("{base}/")).await;
    let all = runs_listed(&c).await;
    for run in [
        "demo-deploy",
        "demo-search",
        "demo-deploy-failed",
        "hostile",
    ] {
        assert!(all.contains(&run.to_owned()), "{run} not in {all:?}");
    }
    assert_eq!(all[0], "hostile", "newest first: {all:?}");

    // A status filter in the URL hides the others.
    open(&c, &format!("{base}/?status=failed")).await;
    let failed = runs_listed(&c).await;
    assert!(
        failed.contains(&"demo-deploy-failed".to_owned()),
        "{failed:?}"
    );
    assert!(!failed.contains(&"demo-deploy".to_owned()), "{failed:?}");
    let statuses = js(
        &c,
        "return Array.from(document.querySelectorAll('tr.run')).every(r => r.dataset.status === 'failed')",
    )
    .await;
    assert_eq!(statuses, json!(true));

    // Opening a run shows its facts, each with its `#seq-N` anchor.
    open(&c, &format!("{base}/runs/demo-deploy")).await;
    let seqs: Vec<u64> = serde_json::from_value(
        js(
            &c,
            "return Array.from(document.querySelectorAll('.fact-list .fact')).map(f => Number(f.id.slice(4)))",
        )
        .await,
    )
    .unwrap();
    assert!(seqs.len() > 5, "{seqs:?}");
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert!(
        c.find(Locator::Css(".wf-row")).await.is_ok(),
        "no waterfall"
    );
    // A deep link opens the fact's inspector.
    open(&c, &format!("{base}/runs/demo-deploy#seq-3")).await;
    let inspected = js(
        &c,
        "var d = document.querySelector('#seq-3 details'); return d.open && d.querySelector('pre.raw').textContent",
    )
    .await;
    let raw: Value =
        serde_json::from_str(inspected.as_str().expect("the inspector is open")).expect("raw JSON");
    assert_eq!(raw["seq"], 3);
    // The filter inside the run hides what does not match.
    let shown = js(
        &c,
        "var s = document.getElementById('kind-filter'); s.value = 'call.started'; \
         s.dispatchEvent(new Event('change')); \
         return Array.from(document.querySelectorAll('.fact-list .fact')).filter(f => !f.hidden).map(f => f.dataset.kind)",
    )
    .await;
    let shown: Vec<String> = serde_json::from_value(shown).unwrap();
    assert!(
        !shown.is_empty() && shown.iter().all(|k| k == "call.started"),
        "{shown:?}"
    );

    // A big run is listed a page at a time; a deep link past the first
    // page opens the page that holds it.
    open(&c, &format!("{base}/runs/big")).await;
    let listed = js(
        &c,
        "return document.querySelectorAll('.fact-list .fact').length",
    )
    .await;
    assert_eq!(listed, json!(2000));
    open(&c, &format!("{base}/runs/big#seq-4321")).await;
    let started = Instant::now();
    while js(&c, "return location.search").await != json!("?from=4000") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no page change"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while js(
        &c,
        "return document.body && document.body.dataset.ready === '1' && !!document.getElementById('seq-4321')",
    )
    .await
        != json!(true)
    {
        assert!(started.elapsed() < Duration::from_secs(30), "no page 4000");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let page = js(
        &c,
        "var f = document.querySelectorAll('.fact-list .fact');          return [f.length, f[0].id, document.querySelector('#seq-4321 details').open]",
    )
    .await;
    assert_eq!(page, json!([1004, "seq-4000", true]));

    // Live: a run written while the table is open appears in it, unless
    // paused; resuming shows it.
    open(&c, &format!("{base}/")).await;
    let before = runs_listed(&c).await.len();
    let d = dir.clone();
    tokio::task::spawn_blocking(move || demo(&d)).await.unwrap();
    let started = Instant::now();
    let after = loop {
        let now = runs_listed(&c).await.len();
        if now > before {
            break now;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the table did not update"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let fresh = js(
        &c,
        "return document.querySelectorAll('tr.run.fresh').length",
    )
    .await;
    assert_eq!(fresh, json!(after - before), "new runs are marked");
    c.find(Locator::Id("pause"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let d = dir.clone();
    tokio::task::spawn_blocking(move || demo(&d)).await.unwrap();
    let started = Instant::now();
    while !js(
        &c,
        "return document.getElementById('live-state').textContent",
    )
    .await
    .as_str()
    .unwrap()
    .starts_with("new runs")
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no word of new runs"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(runs_listed(&c).await.len(), after, "paused: no update");
    c.find(Locator::Id("pause"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let started = Instant::now();
    while runs_listed(&c).await.len() == after {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "resuming did not update"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Hostile strings render as text; no script of theirs runs.
    for url in [format!("{base}/"), format!("{base}/runs/hostile")] {
        open(&c, &url).await;
        no_alert(&c).await;
        let scripts = js(&c, "return document.querySelectorAll('script').length").await;
        assert_eq!(scripts, json!(1), "{url}: only the console's own script");
        let imgs = js(&c, "return document.querySelectorAll('img').length").await;
        assert_eq!(imgs, json!(0), "{url}: a payload became markup");
        let text = js(&c, "return document.body.textContent").await;
        assert!(
            text.as_str().unwrap().contains(HOSTILE),
            "{url}: the payload is not shown as text"
        );
    }
    open(&c, &format!("{base}/runs/hostile#seq-2")).await;
    no_alert(&c).await;

    c.close().await.unwrap();
}

#[test]
fn a_foreign_host_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    demo(&dir);
    let served = serve(&dir);
    let (status, page) = http_get(&served.base, "/", &[]);
    assert_eq!(status, 200);
    // Runs per state, from the status index: the demo's five runs.
    for (state, n) in [
        ("running", 0),
        ("completed", 3),
        ("failed", 1),
        ("cancelled", 1),
        ("incomplete", 0),
    ] {
        assert!(
            page.contains(&format!("\">{state}</span> {n}</a>")),
            "{state} {n}: {page}"
        );
    }
    for path in [
        "/",
        "/runs/demo-deploy",
        "/runs/demo-deploy/tape",
        "/events",
    ] {
        let (status, answer) = http_get(&served.base, path, &[("Host", "evil.example.com")]);
        assert_eq!(status, 403, "{path}: {answer}");
        assert!(!answer.contains("demo-deploy"), "{path}: {answer}");
    }
    let (status, _) = http_get(&served.base, "/", &[("Origin", "http://evil.example.com")]);
    assert_eq!(status, 403);
    let (status, answer) = http_get(&served.base, "/runs/demo-deploy", &[]);
    assert_eq!(status, 200);
    assert!(answer.contains("script-src 'self'"), "{answer}");
}

#[test]
fn off_loopback_a_token_is_required() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    demo(&dir);
    let out = reel()
        .args(["serve", "--listen", "0.0.0.0:0", "--archive"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without a token")
            && err.contains("--token-file"),
        "{err}"
    );
}

#[test]
fn with_a_token_every_request_presents_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    demo(&dir);
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, "0123456789abcdef0123\n").unwrap();
    let child = reel()
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&token_file)
        .arg("--archive")
        .arg(&dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let served = served(child);
    let (status, answer) = http_get(&served.base, "/runs/demo-deploy", &[]);
    assert_eq!(status, 401, "{answer}");
    assert!(!answer.contains("seq-0"));
    let (status, _) = http_get(
        &served.base,
        "/",
        &[("Authorization", "Bearer 0123456789abcdef0124")],
    );
    assert_eq!(status, 401);
    let (status, _) = http_get(
        &served.base,
        "/runs/demo-deploy",
        &[("Authorization", "Bearer 0123456789abcdef0123")],
    );
    assert_eq!(status, 200);
    let (status, answer) = http_get(&served.base, "/login?token=0123456789abcdef0123", &[]);
    assert_eq!(status, 303, "{answer}");
    assert!(answer.contains("reel_token=0123456789abcdef0123; HttpOnly; SameSite=Strict"));
    let (status, _) = http_get(
        &served.base,
        "/",
        &[("Cookie", "reel_token=0123456789abcdef0123")],
    );
    assert_eq!(status, 200);
}

#[test]
fn while_a_recorder_holds_the_archive_it_is_read_through_its_socket() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    // The demo runs, then a slow live run served on the recorder's socket.
    let mut recorder = recording_live(&dir, 60, 100);
    let served = serve(&dir);
    // The socket is served before the live run starts.
    let started = Instant::now();
    loop {
        let (status, page) = http_get(&served.base, "/", &[]);
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("live socket"), "{page}");
        if page.contains("data-run=\"demo-live\" data-status=\"running\"") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the live run is not listed: {page}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, run) = http_get(&served.base, "/runs/demo-live", &[]);
    assert_eq!(status, 200, "{run}");
    assert!(run.contains("id=\"seq-0\""), "{run}");
    // Tapes download through the socket too, with their artifacts (read
    // from their files): the deploy's tape carries its one artifact.
    let (status, tape) = http_get(&served.base, "/runs/demo-deploy/tape", &[]);
    assert_eq!(status, 200, "{tape}");
    assert!(tape.contains("\"artifact\":\"sha256:"), "{tape}");
    let (status, _) = http_get(&served.base, "/runs/demo-live/tape", &[]);
    assert_eq!(status, 200);
    // Once the recorder is done, the archive itself is read again.
    assert!(recorder.wait().unwrap().success());
    let started = Instant::now();
    loop {
        let (_, page) = http_get(&served.base, "/", &[]);
        if page.contains("data-run=\"demo-live\" data-status=\"completed\"")
            && !page.contains("live socket")
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the console did not read the closed archive: {page}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, _) = http_get(&served.base, "/runs/demo-live/tape", &[]);
    assert_eq!(status, 200);
}

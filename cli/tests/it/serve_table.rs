//! The console's runs table and its tenant-limited tokens, end to end:
//! the real `reel serve` over an archive of runs of known shapes, read
//! over plain HTTP and in Debian's chromium (WebDriver).
//!
//! - Every filter (status, tenant, tool, principal, session, since,
//!   until, has-anomaly) and the search (tool names, labels, messages,
//!   errors) hides exactly the runs it should, across pages; counts per
//!   status follow the filters; anomalies are `reel runs`'s.
//! - A token limited to one tenant reaches no run of another by any URL:
//!   page, fact page, tape, listing, search, count, event stream.

use crate::console;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use console::*;
use serde_json::{json, Value};

const HOUR: i64 = 3_600_000_000_000;
/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000_000_000;

fn shape(id: &str, tenant: &str, principal: &str, hours: i64) -> RunShape {
    RunShape {
        id: id.into(),
        tenant: Some(tenant.into()),
        principal: Some(principal.into()),
        at: T0 + hours * HOUR,
        tool: "fetch".into(),
        ..RunShape::default()
    }
}

/// The named runs (acme and beta) and 300 of tenant gamma, a third of
/// them by principal zed.
fn archive(dir: &std::path::Path) {
    let mut runs = vec![
        RunShape {
            session: Some("s1".into()),
            labels: vec![("team".into(), "blue".into())],
            message: Some("downloading the index".into()),
            ..shape("acme-1", "acme", "ann", 1)
        },
        RunShape {
            session: Some("s2".into()),
            tool: "deploy".into(),
            error: Some("Quota exceeded for project".into()),
            ..shape("acme-2", "acme", "bob", 2)
        },
        RunShape {
            unended: true,
            ..shape("acme-3", "acme", "ann", 3)
        },
        RunShape {
            tool: "search".into(),
            labels: vec![("team".into(), "red".into())],
            message: Some("a needle in the haystack".into()),
            session: Some("s9".into()),
            ..shape("beta-1", "beta", "ann", 4)
        },
        RunShape {
            unended: true,
            error: None,
            ..shape("beta-2", "beta", "carl", 5)
        },
    ];
    for i in 0..300 {
        runs.push(RunShape {
            at: T0 - (i + 1) * HOUR,
            ..shape(
                &format!("gamma-{i:03}"),
                "gamma",
                if i % 3 == 0 { "zed" } else { "yan" },
                0,
            )
        });
    }
    record_runs(dir, &runs);
}

/// Every run a query lists, following its pages; each page's counts.
fn listed_all(base: &str, path: &str, auth: &[(&str, &str)]) -> (Vec<String>, Vec<String>) {
    let mut runs = Vec::new();
    let mut pages = Vec::new();
    let mut next = Some(path.to_owned());
    while let Some(path) = next {
        let (status, answer) = http_get(base, &path, auth);
        assert_eq!(status, 200, "{path}: {answer}");
        runs.extend(listed_in(&answer));
        next = href_of(&answer, "older");
        pages.push(body_of(&answer).to_owned());
        assert!(pages.len() < 50, "{path}: no end to the pages");
    }
    (runs, pages)
}

fn gamma(pred: impl Fn(i64) -> bool) -> Vec<String> {
    (0..300)
        .filter(|i| pred(*i))
        .map(|i| format!("gamma-{i:03}"))
        .collect()
}

/// `count` of `status` on a page (`data-count`).
fn count(page: &str, status: &str) -> u64 {
    let at = page
        .find(&format!("data-status=\"{status}\" data-count=\""))
        .unwrap_or_else(|| panic!("no count of {status}"));
    let rest = &page[at + status.len() + 27..];
    rest[..rest.find('"').unwrap()].parse().unwrap()
}

#[test]
fn every_filter_and_the_search_hide_what_they_should() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    archive(&dir);
    let served = serve(&dir);
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let named = |v: &[&str]| ids(v);
    let since = "2026-01-01T02:30:00Z";
    let cases: Vec<(String, Vec<String>)> = vec![
        (
            "/?principal=ann".into(),
            named(&["beta-1", "acme-3", "acme-1"]),
        ),
        (
            "/?principal=ann&tenant=acme".into(),
            named(&["acme-3", "acme-1"]),
        ),
        ("/?session=s2".into(), named(&["acme-2"])),
        ("/?anomaly=1".into(), named(&["beta-2", "acme-3"])),
        ("/?anomaly=1&tenant=acme".into(), named(&["acme-3"])),
        ("/?q=QUOTA".into(), named(&["acme-2"])),
        ("/?q=haystack".into(), named(&["beta-1"])),
        ("/?q=team%3Dblue".into(), named(&["acme-1"])),
        ("/?q=red".into(), named(&["beta-1"])),
        ("/?q=deploy".into(), named(&["acme-2"])),
        ("/?q=quota&status=completed".into(), vec![]),
        ("/?q=quota&status=failed".into(), named(&["acme-2"])),
        ("/?tool=search".into(), named(&["beta-1"])),
        (
            format!("/?since={since}"),
            named(&["beta-2", "beta-1", "acme-3"]),
        ),
        (
            format!("/?since=2026-01-01T01:30:00Z&until={since}"),
            named(&["acme-2"]),
        ),
        ("/?until=2026-01-01&tenant=gamma".into(), gamma(|_| true)),
        ("/?principal=zed".into(), gamma(|i| i % 3 == 0)),
        ("/?principal=yan&q=fetch".into(), gamma(|i| i % 3 != 0)),
        ("/?principal=nobody".into(), vec![]),
        ("/?status=failed&principal=ann".into(), vec![]),
    ];
    for (path, want) in &cases {
        let (got, pages) = listed_all(&served.base, path, &[]);
        assert_eq!(&got, want, "{path}");
        // The counts follow the filters (status aside).
        let first = &pages[0];
        let total: u64 = ["running", "completed", "failed", "cancelled", "incomplete"]
            .iter()
            .map(|s| count(first, s))
            .sum();
        if !path.contains("status=") {
            assert_eq!(total, want.len() as u64, "{path}: counts");
        }
        // Every filter stays in the next page's address and the form.
        if pages.len() > 1 {
            let (_, answer) = http_get(&served.base, path, &[]);
            let older = href_of(&answer, "older").unwrap();
            for part in path.trim_start_matches("/?").split('&') {
                assert!(older.contains(part), "{path}: {older}");
            }
        }
    }
    // Counts per status under a filter.
    let (_, answer) = http_get(&served.base, "/?tenant=acme", &[]);
    assert_eq!(count(&answer, "completed"), 2, "{answer}");
    assert_eq!(count(&answer, "failed"), 1);
    // Unfiltered: the whole archive.
    let (_, answer) = http_get(&served.base, "/", &[]);
    assert_eq!(count(&answer, "completed"), 304);
    // A time the console cannot read says what it reads.
    let (status, answer) = http_get(&served.base, "/?since=yesterday-ish", &[]);
    assert_eq!(status, 400);
    assert!(answer.contains("neither a time"), "{answer}");
}

#[test]
fn anomalies_are_those_reel_runs_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    archive(&dir);
    demo(&dir);
    let out = reel()
        .args(["runs", "--json", "--limit", "50", "--archive"])
        .arg(&dir)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let served = serve(&dir);
    let (_, page) = http_get(&served.base, "/", &[]);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 50);
    assert_eq!(
        listed_in(&page),
        runs.iter()
            .map(|r| r["run_id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    );
    let mut some = 0;
    for r in runs {
        let id = r["run_id"].as_str().unwrap();
        let n = r["anomalies"].as_u64().unwrap();
        some += usize::from(n > 0);
        assert!(
            page.contains(&format!(
                "data-run=\"{id}\" data-status=\"{}\" data-anomalies=\"{n}\"",
                r["state"].as_str().unwrap()
            )),
            "{id}: {n}"
        );
    }
    assert!(some >= 2, "the page shows runs with anomalies");
}

// ---- tenant-limited tokens ------------------------------------------------------

const ADMIN: &str = "admin-0123456789abcdef";
const ACME: &str = "acme-0123456789abcdef0";

fn serve_with_tokens(dir: &std::path::Path, tmp: &std::path::Path) -> Served {
    let tokens = tmp.join("tokens");
    std::fs::write(
        &tokens,
        format!("# the operators\n{ADMIN}\n{ACME} tenant=acme\n"),
    )
    .unwrap();
    let child = reel()
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .arg("--archive")
        .arg(dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    served(child)
}

/// Whether an `event: runs` arrives on `/events` (with `token`) within
/// `wait`, after `then` ran.
fn event_arrives(base: &str, token: &str, wait: Duration, then: impl FnOnce()) -> bool {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    // The headers first, then the change.
    let started = Instant::now();
    while !seen.contains("\r\n\r\n") {
        assert!(started.elapsed() < Duration::from_secs(10), "no answer");
        if let Ok(n) = s.read(&mut buf) {
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    then();
    let started = Instant::now();
    while started.elapsed() < wait {
        if let Ok(n) = s.read(&mut buf) {
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        if seen.contains("event: runs") {
            return true;
        }
    }
    false
}

#[test]
fn a_tenant_limited_token_never_reaches_another_tenants_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    archive(&dir);
    let served = serve_with_tokens(&dir, tmp.path());
    let base = &served.base;
    let acme = [("Authorization", format!("Bearer {ACME}"))];
    let acme: Vec<(&str, &str)> = acme.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let admin = format!("Bearer {ADMIN}");
    let admin = [("Authorization", admin.as_str())];

    // Every URL of another tenant's run: 404, as for a run that does
    // not exist, word for word.
    let (_, missing) = http_get(base, "/runs/no-such-run", &acme);
    for run in ["beta-1", "beta-2", "gamma-000"] {
        for path in [
            format!("/runs/{run}"),
            format!("/runs/{run}?from=0"),
            format!("/runs/{run}?from=2000"),
            format!("/runs/{run}/tape"),
        ] {
            let (status, answer) = http_get(base, &path, &acme);
            assert_eq!(status, 404, "{path}: {answer}");
            assert_eq!(
                body_of(&answer).replace(run, "no-such-run"),
                body_of(&missing),
                "{path}"
            );
            // The unlimited token reaches it.
            let (status, _) = http_get(base, &path, &admin);
            assert_eq!(status, 200, "{path}");
        }
    }
    // The views beyond a run's page (its artifacts, its wire view, its
    // event stream, a comparison naming it): the same 404 as for a run
    // that does not exist, at the same address.
    for run in ["beta-1", "gamma-000"] {
        for path in [
            "/runs/{run}/artifacts/1",
            "/runs/{run}/artifacts/1/raw",
            "/runs/{run}/wire",
            "/runs/{run}/events",
            "/compare?a={run}&b=acme-1",
            "/compare?a=acme-1&b={run}",
        ] {
            let theirs = path.replace("{run}", run);
            let (status, answer) = http_get(base, &theirs, &acme);
            assert_eq!(status, 404, "{theirs}: {answer}");
            let (_, none) = http_get(base, &path.replace("{run}", "no-such-run"), &acme);
            assert_eq!(
                body_of(&answer).replace(run, "no-such-run"),
                body_of(&none),
                "{theirs}"
            );
        }
    }
    // No listing, search or count names another tenant's run.
    for path in [
        "/",
        "/?tenant=beta",
        "/?tenant=gamma",
        "/?q=haystack",
        "/?q=beta",
        "/?principal=ann",
        "/?principal=zed",
        "/?session=s9",
        "/?anomaly=1",
        "/?tool=search",
        "/?status=completed",
    ] {
        let (listed, pages) = listed_all(base, path, &acme);
        assert!(
            listed.iter().all(|r| r.starts_with("acme-")),
            "{path}: {listed:?}"
        );
        for page in &pages {
            // No other tenant's run id, message or session.
            for theirs in ["beta-", "gamma-", "needle", ">s9<", ">zed<", ">carl<"] {
                assert!(!page.contains(theirs), "{path} shows {theirs}");
            }
        }
        let total: u64 = ["running", "completed", "failed", "cancelled", "incomplete"]
            .iter()
            .map(|s| count(&pages[0], s))
            .sum();
        let acme_runs = listed_all(base, path, &admin)
            .0
            .iter()
            .filter(|r| r.starts_with("acme-"))
            .count() as u64;
        if !path.contains("status=") {
            assert_eq!(total, acme_runs, "{path}: counts");
        }
    }
    let (listed, _) = listed_all(base, "/", &acme);
    assert_eq!(listed, ["acme-3", "acme-2", "acme-1"]);

    // The event stream: another tenant's new run is no news to acme;
    // acme's own is; the unlimited token hears of both.
    let record = |id: &str, tenant: &str| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        record_runs(
            &dir,
            &[RunShape {
                at: now,
                ..shape(id, tenant, "ann", 0)
            }],
        );
    };
    let quiet = Duration::from_secs(3);
    assert!(
        !event_arrives(base, ACME, quiet, || record("beta-new", "beta")),
        "acme heard of beta's run"
    );
    assert!(event_arrives(base, ADMIN, Duration::from_secs(20), || {
        record("beta-newer", "beta")
    }));
    assert!(event_arrives(base, ACME, Duration::from_secs(20), || {
        record("acme-new", "acme")
    }));
    let (status, _) = http_get(base, "/runs/beta-new", &acme);
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_chromium_the_table_filters_in_the_url_and_a_tenant_sees_only_its_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    archive(&dir);
    let served = serve_with_tokens(&dir, tmp.path());
    let base = served.base.clone();
    let driver = driver();
    let c = browser(&driver).await;

    // The unlimited token: filter with the form; the URL carries it all.
    c.goto(&format!("{base}/login?token={ADMIN}"))
        .await
        .unwrap();
    open(&c, &format!("{base}/")).await;
    js(
        &c,
        "var f = document.querySelector('form.filters'); \
         f.q.value = 'quota'; f.principal.value = 'bob'; f.anomaly.checked = false; \
         f.since.value = '2026-01-01'; f.submit(); return 1",
    )
    .await;
    let started = Instant::now();
    while !js(&c, "return location.search")
        .await
        .as_str()
        .unwrap_or("")
        .contains("q=quota")
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the form did not submit"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let here = js(&c, "return location.href").await;
    open(&c, here.as_str().unwrap()).await;
    let search = js(&c, "return location.search").await;
    for part in ["q=quota", "principal=bob", "since=2026-01-01"] {
        assert!(search.as_str().unwrap().contains(part), "{search}");
    }
    assert_eq!(runs_listed(&c).await, ["acme-2"]);
    let failed = js(
        &c,
        "return document.querySelector('#counts a[data-status=failed]').dataset.count",
    )
    .await;
    assert_eq!(failed, json!("1"));
    // The view shared by its address shows the same.
    let shared = js(&c, "return location.href")
        .await
        .as_str()
        .unwrap()
        .to_owned();
    open(&c, &shared).await;
    assert_eq!(runs_listed(&c).await, ["acme-2"]);
    no_alert(&c).await;
    c.delete_all_cookies().await.unwrap();

    // The acme token: only acme's runs, whatever the address says.
    c.goto(&format!("{base}/login?token={ACME}")).await.unwrap();
    open(&c, &format!("{base}/")).await;
    assert_eq!(runs_listed(&c).await, ["acme-3", "acme-2", "acme-1"]);
    open(&c, &format!("{base}/?tenant=beta")).await;
    assert!(runs_listed(&c).await.is_empty());
    open(&c, &format!("{base}/?q=haystack")).await;
    assert!(runs_listed(&c).await.is_empty());
    let text = js(&c, "return document.body.textContent").await;
    assert!(!text.as_str().unwrap().contains("beta-"), "{text}");
    c.goto(&format!("{base}/runs/beta-1#seq-0")).await.unwrap();
    let text = js(&c, "return document.body.textContent").await;
    let text = text.as_str().unwrap();
    assert!(text.contains("404") && !text.contains("needle"), "{text}");
    c.close().await.unwrap();
}

// ---- a huge run's first look ----------------------------------------------------

#[test]
fn a_huge_runs_first_look_reads_its_first_page_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    long_run(&dir, "huge", 120_000, 1000);
    let served = serve(&dir);
    let (status, first) = http_get(&served.base, "/runs/huge", &[]);
    assert_eq!(status, 200);
    // The page of facts, the whole run's size, and what the waterfall
    // covers said.
    assert!(first.contains("id=\"seq-0\"") && first.contains("id=\"seq-1999\""));
    assert!(!first.contains("id=\"seq-2000\""));
    assert!(first.contains("Facts 0–1999 of 120004"), "no total");
    assert!(
        first.contains("id=\"partial\"") && first.contains("facts 0–1999 only"),
        "the first look does not say it is partial"
    );
    // Its waterfall spans the page's facts (offsets 0–2µs), not the run's
    // (120µs), and no call is said never to end: the page does not hold
    // the end.
    assert!(first.contains("left:100%\">2.0µs"));
    assert!(!first.contains("id=\"anomalies\""));
    // A later page of the first look reads only its own facts too.
    let (status, later) = http_get(&served.base, "/runs/huge?from=100000", &[]);
    assert_eq!(status, 200);
    assert!(later.contains("id=\"seq-100000\"") && later.contains("id=\"seq-101999\""));
    // The whole run's timeline is built beside: a later look shows it all
    // (the call ended, no partial notice).
    let started = Instant::now();
    loop {
        let (_, page) = http_get(&served.base, "/runs/huge", &[]);
        if !page.contains("id=\"partial\"") {
            assert!(page.contains("Facts 0–1999 of 120004"));
            assert!(page.contains("left:100%\">120.0µs"), "the whole run's span");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the whole timeline was never built"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

//! The HTML report: self-contained, one waterfall row per call, every
//! recorded string escaped; opened in headless Chromium (Debian's
//! `chromium` package: the test fails, not skips, when it is missing), and
//! written end to end by `reel show RUN --html FILE`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reel::context::{ToolContext, ToolError};
use reel::fact::*;
use reel::tools::Tools;
use reel::{Fact, RunRecord};
use reel_archive::{Archive, ArchiveConfig};
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use reel_viewer::render::html::{self, HtmlWriter, DATA_ID, ROW_CLASS};
use serde_json::{json, Value};

/// A payload that, should it ever become markup and run, leaves a mark in
/// the DOM (`data-pwned` on `<html>`) that `--dump-dom` shows.
const SCRIPT_PAYLOAD: &str =
    "<script>window.__pwned=1</script><script>document.documentElement.dataset.pwned='script'</script>";
const IMG_PAYLOAD: &str = "<img src=x onerror=\"window.__pwned=1\"><img src=x onerror=\"document.documentElement.dataset.pwned='img'\">";

fn started(call_id: &str, tool: &str, parent: Option<&str>, args: Value) -> FactKind {
    FactKind::CallStarted(CallStarted {
        call_id: call_id.into(),
        tool_name: tool.into(),
        tool_id: None,
        parent_call: parent.map(Into::into),
        iteration: 0,
        invocation_id: None,
        mode: CallMode::Async,
        protocol: None,
        platform: None,
        client_info: None,
        args,
        wanted: None,
        attached: None,
        spec: None,
        dispatch_tools: None,
        outside_run: None,
    })
}

fn ended(outcome: CallOutcome, duration_ns: u64) -> FactKind {
    FactKind::CallEnded(CallEnded {
        outcome,
        duration_ns,
        invocation_id: None,
    })
}

/// A small fixed run with hostile strings everywhere a recorder would keep
/// them: labels, tool names, call ids, progress, logs, errors, args.
fn hostile_run() -> (RunRecord, Vec<Fact>) {
    let kinds: Vec<(Option<&str>, FactKind)> = vec![
        (
            None,
            FactKind::RunStarted(RunStarted {
                run_id: "run-<b>1</b>".into(),
                session_id: Some("sess\"><script>alert(1)</script>".into()),
                identity: Some(Identity {
                    tenant: Some("acme & <co>".into()),
                    principal: Some("ann".into()),
                    conversation: None,
                }),
                producer: Producer {
                    name: "test".into(),
                    version: "1".into(),
                },
                labels: [("env".to_owned(), "<i>prod</i>".to_owned())].into(),
                teardown_scopes: vec![],
            }),
        ),
        (
            Some("c1"),
            started(
                "c1",
                "search",
                None,
                json!({"url": "https://evil.example/x"}),
            ),
        ),
        (
            Some("c2"),
            started(
                "c2",
                "fetch<script>alert(1)</script>",
                Some("c1"),
                json!("http://evil.example/y"),
            ),
        ),
        (
            Some("c2"),
            FactKind::Progress(Progress {
                payload: json!({"message": "<script>alert(1)</script>"}),
                count: 1,
                delivered: false,
            }),
        ),
        (
            Some("c2"),
            FactKind::Log(Log {
                level: Level::Warning,
                logger: None,
                subflow: None,
                data: json!({"message": IMG_PAYLOAD, "u": "\u{2028}</script><!--"}),
                delivered: false,
                in_flight: Vec::new(),
            }),
        ),
        (
            Some("c2"),
            ended(
                CallOutcome::Ok {
                    result: json!("</script><script>alert(1)</script>"),
                },
                2_000,
            ),
        ),
        (
            Some("c\"3<x>"),
            started("c\"3<x>", "broken", Some("c1"), json!(null)),
        ),
        (
            Some("c\"3<x>"),
            FactKind::CredentialFailed(CredentialFailed {
                need: "db<script>".into(),
                mode: CredentialMode::Pulled,
                reason: "expired <b>token</b>".into(),
            }),
        ),
        (
            Some("c\"3<x>"),
            ended(
                CallOutcome::Error {
                    error: "failed: <img src=x onerror=alert(1)>".into(),
                    result: None,
                },
                1_000,
            ),
        ),
        (
            Some("c1"),
            ended(CallOutcome::Ok { result: json!(1) }, 6_000),
        ),
        (Some("c4"), started("c4", "walk", None, json!(3))),
        (
            Some("c4"),
            FactKind::Progress(Progress {
                payload: json!({"message": "Hop 1 of 3"}),
                count: 1,
                delivered: false,
            }),
        ),
        (
            None,
            FactKind::RunEnded(RunEnded {
                status: RunStatus::Failed,
            }),
        ),
    ];
    let facts: Vec<Fact> = kinds
        .into_iter()
        .enumerate()
        .map(|(i, (call, kind))| Fact {
            seq: i as u64,
            at: 1_700_000_000_000_000_000 + i as i64 * 1_000,
            offset: i as u64 * 1_000,
            call: call.map(Into::into),
            kind,
        })
        .collect();
    let record = RunRecord::from_first(&facts[0]).unwrap();
    (record, facts)
}

/// The text of the facts' JSON block, and the page without it.
fn split_data(page: &str) -> (&str, String) {
    let open = format!("<script type=\"application/json\" id=\"{DATA_ID}\">");
    let start = page.find(&open).expect("the page has its data block") + open.len();
    let len = page[start..]
        .find("</script>")
        .expect("the data block ends");
    let outside = format!("{}{}", &page[..start], &page[start + len..]);
    (&page[start..start + len], outside)
}

fn rows(html: &str) -> usize {
    html.matches(&format!("<div class=\"{ROW_CLASS}")).count()
}

#[test]
fn page_is_self_contained_and_escapes_every_recorded_string() {
    let (record, facts) = hostile_run();
    let page = html::run(&record, &facts);
    let (data, outside) = split_data(&page);

    // Nothing from the network: no address outside the recorded data, no
    // element that could load anything, and a policy that forbids it.
    for scheme in ["http://", "https://", "//evil"] {
        assert!(!outside.contains(scheme), "{scheme} outside the data block");
    }
    for tag in [
        "<img", "<iframe", "<link", "<object", "<embed", "<video", "<audio", "<source",
    ] {
        assert!(!page.contains(tag), "the page has a {tag} element");
    }
    assert!(!outside.contains("url(") && !outside.contains("@import"));
    assert!(page.contains("Content-Security-Policy\" content=\"default-src 'none';"));
    // The addresses are there, but only as recorded data.
    assert!(data.contains("https://evil.example/x") && data.contains("http://evil.example/y"));

    // One waterfall row per call, nested ones included.
    assert_eq!(rows(&page), 4);
    assert_eq!(
        page.matches(" data-call=\"").count(),
        4,
        "only rows carry data-call"
    );

    // The payloads appear only escaped. The page has exactly two script
    // elements: the data block and its own script.
    assert_eq!(page.matches("<script").count(), 2);
    assert_eq!(page.matches("</script>").count(), 2);
    assert!(!page.contains("<script>alert(1)"));
    assert!(!page.contains("onerror=\"window"));
    assert!(!page.contains("<b>1</b>") && !page.contains("<i>prod</i>"));
    assert!(outside.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(outside.contains("failed: &lt;img src=x onerror=alert(1)&gt;"));
    assert!(outside.contains("<title>reel: run run-&lt;b&gt;1&lt;/b&gt;</title>"));
    assert!(outside.contains("acme &amp; &lt;co&gt;"));
    assert!(outside.contains("data-call=\"c&quot;3&lt;x&gt;\""));
    assert!(outside
        .contains("<a href=\"#call=c%223%3Cx%3E\">credential &quot;db&lt;script&gt;&quot; failed"));
    assert!(outside.contains("expired &lt;b&gt;token&lt;/b&gt;"));
    assert!(data.contains(r#"\u003cimg src=x onerror=\"window.__pwned=1\"\u003e"#));
    assert!(data.contains(r"\u2028\u003c/script\u003e\u003c!--"));
    for c in ['<', '>', '&', '\u{2028}', '\u{2029}'] {
        assert!(!data.contains(c), "{c:?} in the data block");
    }

    // The data block is every fact, intact.
    let listed: Vec<Value> = serde_json::from_str(data).unwrap();
    assert_eq!(listed.len(), facts.len());
    for (item, fact) in listed.iter().zip(&facts) {
        let back: Fact = serde_json::from_value(item["fact"].clone()).unwrap();
        assert_eq!(&back, fact);
        assert!(item["t"].as_str().unwrap().starts_with('+'));
    }
    assert_eq!(listed[3]["line"], "<script>alert(1)</script>");

    // The call that never ended reaches the end and is marked; so are the
    // anomalies.
    let c4 = outside
        .split(&format!("<div class=\"{ROW_CLASS}"))
        .find(|r| r.contains("data-call=\"c4\""))
        .unwrap();
    assert!(c4.contains("st-open flagged"), "{c4}");
    assert!(c4.contains("never ended →"));
    assert!(c4.contains("width:max(3px,"));
    assert!(outside.contains("call c4 (started at #10) never ended"));
    assert!(outside.contains("<a href=\"#call=c4\">"));
}

#[test]
fn filtered_facts_shape_the_waterfall_but_are_not_listed() {
    let (record, facts) = hostile_run();
    let mut page = Vec::new();
    let mut w = HtmlWriter::start(&mut page, &record).unwrap();
    for f in &facts {
        if f.kind.name() == "progress" {
            w.fact(f).unwrap();
        } else {
            w.timeline_only(f);
        }
    }
    w.gap(&reel::gap::Gap {
        first: 13,
        last: Some(14),
        detail: "a damaged block <x>".into(),
    });
    let timeline = w.finish().unwrap();
    assert_eq!(timeline.calls.len(), 4);
    let page = String::from_utf8(page).unwrap();
    let (data, outside) = split_data(&page);
    assert_eq!(serde_json::from_str::<Vec<Value>>(data).unwrap().len(), 2);
    assert_eq!(rows(&page), 4);
    assert!(outside.contains("13 (2 listed here)"));
    assert!(outside.contains("facts #13 to #14 could not be read: a damaged block &lt;x&gt;"));
}

// ---- headless Chromium -------------------------------------------------------

fn chromium() -> PathBuf {
    let path = std::env::var_os("REEL_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "headless Chromium is missing ({}): install the Debian package chromium \
         (apt-get install -y --no-install-recommends chromium chromium-driver); \
         .ci/run installs it before the tests",
        path.display()
    );
    path
}

/// Opens `url` in headless Chromium and returns the DOM after the page's
/// scripts ran (`--dump-dom`).
fn dump_dom(url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=2000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let dom = out.join().unwrap().expect("chromium's output is UTF-8");
    let err = err.join().unwrap();
    assert!(
        status.success(),
        "chromium failed ({status}) on {url}:\n{err}"
    );
    assert!(
        dom.contains("</html>"),
        "no DOM from chromium on {url}:\n{err}"
    );
    dom
}

fn file_url(path: &Path, fragment: &str) -> String {
    format!("file://{}{fragment}", path.display())
}

/// The detail panel's serialised DOM.
fn detail_panel(dom: &str) -> &str {
    let start = dom.find("<section id=\"detail\"").expect("a detail panel");
    let end = dom[start..].find("</section>").unwrap();
    &dom[start..start + end]
}

async fn outer(ctx: ToolContext, n: u32) -> Result<Value, ToolError> {
    ctx.progress(json!({ "message": "Starting <b>outer</b>", "done": 0, "total": n }));
    let inner = ctx.dispatch("inner", json!({ "n": n })).await?;
    Ok(json!({ "inner": inner }))
}

async fn inner(ctx: ToolContext, _args: Value) -> Result<Value, ToolError> {
    ctx.progress(json!({ "message": SCRIPT_PAYLOAD }));
    ctx.log(Level::Warning, json!({ "message": IMG_PAYLOAD }));
    Ok(json!({ "echo": SCRIPT_PAYLOAD }))
}

async fn broken(_ctx: ToolContext, _args: Value) -> Result<Value, ToolError> {
    Err(ToolError::msg(format!("gave up: {IMG_PAYLOAD}")))
}

/// Records a run with a nested dispatch, a failing call and hostile
/// payloads; returns its facts.
fn record_hostile_run(dir: &Path) -> (RunRecord, Vec<Fact>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let archive = rt.block_on(async {
        let recorder = Recorder::open(dir, RecorderConfig::default())
            .await
            .unwrap();
        let run = recorder
            .start_run(RunStart::new("hostile").label("note", "<script>x</script>"))
            .await
            .unwrap();
        let tools = Tools::new().register("inner", inner);
        run.call("outer", 2)
            .dispatcher(tools)
            .invoke(outer)
            .await
            .unwrap();
        let failed = run.call("broken", json!({})).invoke(broken).await;
        assert!(failed.is_err());
        run.call("walk", 2).invoke(reel_demo::walk).await.unwrap();
        run.end(RunStatus::Failed).await.unwrap();
        let archive = recorder.archive().clone();
        recorder.shutdown().await.unwrap();
        archive
    });
    let record = archive.run("hostile").unwrap();
    let facts = archive
        .facts("hostile", ..)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    (record, facts)
}

#[test]
fn chromium_shows_payloads_as_text_never_runs_them_and_opens_deep_links() {
    let dir = tempfile::tempdir().unwrap();
    let (record, facts) = record_hostile_run(&dir.path().join("archive"));
    assert_eq!(record.calls, 4);
    let page_path = dir.path().join("hostile.html");
    let file = std::fs::File::create(&page_path).unwrap();
    let mut w = HtmlWriter::start(std::io::BufWriter::new(file), &record).unwrap();
    for f in &facts {
        w.fact(f).unwrap();
    }
    let timeline = w.finish().unwrap();
    let c2 = timeline.call("c2").expect("the nested call");
    assert_eq!(c2.parent.as_deref(), Some("c1"));
    assert_eq!(c2.tool, "inner");

    let dom = dump_dom(&file_url(&page_path, ""));
    // The page's own script ran (it marks the body when done) ...
    assert!(
        dom.contains("<body data-ready=\"1\">"),
        "the page's script did not run"
    );
    // ... and no payload did: no mark, no element made from a payload.
    assert!(!dom.contains("data-pwned"), "a recorded payload ran");
    assert!(!dom.contains("<img"), "a payload became an <img> element");
    assert_eq!(
        dom.matches("<script").count(),
        2,
        "a payload became a <script>"
    );
    // One row per call; the payload shows as characters (escaped again by
    // the DOM serialiser).
    assert_eq!(rows(&dom), 4);
    assert!(dom.contains("&lt;script&gt;window.__pwned=1&lt;/script&gt;"));
    assert!(
        !detail_panel(&dom).contains("data-call=\"c"),
        "nothing opened"
    );

    // A deep link opens that call's facts in the detail panel (as a click
    // on its row does).
    let dom = dump_dom(&file_url(&page_path, "#call=c2"));
    assert!(dom.contains("<body data-ready=\"1\">"));
    assert!(!dom.contains("data-pwned"));
    assert!(!dom.contains("<img"));
    let panel = detail_panel(&dom);
    assert!(panel.contains("data-call=\"c2\""), "{panel}");
    let c2_facts: Vec<&Fact> = facts
        .iter()
        .filter(|f| f.call.as_deref() == Some("c2"))
        .collect();
    assert_eq!(panel.matches("<li class=\"fact\"").count(), c2_facts.len());
    for f in &c2_facts {
        assert!(panel.contains(&format!("data-seq=\"{}\"", f.seq)));
        assert!(panel.contains(&format!(">{}</span>", f.kind.name())));
    }
    assert!(panel.contains("&lt;script&gt;window.__pwned=1&lt;/script&gt;"));
    assert!(panel.contains("&lt;img src=x onerror="));
    assert!(
        panel.contains("\"parent_call\": \"c1\""),
        "pretty-printed data"
    );
    let selected = dom
        .split(&format!("<div class=\"{ROW_CLASS}"))
        .filter(|r| r.contains(" selected\""))
        .count();
    assert_eq!(selected, 1, "the row of c2 is selected");

    // The run-level facts have a link of their own.
    let dom = dump_dom(&file_url(&page_path, "#run"));
    let panel = detail_panel(&dom);
    assert!(panel.contains("data-shown=\"run\""), "{panel}");
    assert_eq!(
        panel.matches("<li class=\"fact\"").count(),
        facts.iter().filter(|f| f.call.is_none()).count()
    );
}

/// The observation above would see a payload that ran: the same payloads,
/// unescaped in a plain page, leave their mark in the dumped DOM.
#[test]
fn chromium_would_see_a_payload_that_ran() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unsafe.html");
    for (name, payload) in [("script", SCRIPT_PAYLOAD), ("img", IMG_PAYLOAD)] {
        std::fs::write(
            &path,
            format!("<!doctype html><html><head><meta charset=\"utf-8\"></head><body><p>{payload}</p></body></html>"),
        )
        .unwrap();
        let dom = dump_dom(&file_url(&path, ""));
        assert!(
            dom.contains(&format!("data-pwned=\"{name}\"")),
            "the {name} payload did not leave its mark:\n{dom}"
        );
    }
}

// ---- the CLI -----------------------------------------------------------------

fn reel(archive: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(args)
        .arg("--archive")
        .arg(archive)
        .env_remove("REEL_ARCHIVE")
        .output()
        .expect("run reel")
}

#[test]
fn reel_show_html_writes_the_page_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let out = reel(&archive, &["demo"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let page_path = dir.path().join("search.html");
    let page_arg = page_path.to_str().unwrap();
    let out = reel(&archive, &["show", "demo-search", "--html", page_arg]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "the page goes to the file only");
    assert!(
        stderr.contains(&format!("to {page_arg}")),
        "says where it wrote: {stderr}"
    );
    let page = std::fs::read_to_string(&page_path).unwrap();
    let calls = Archive::open(&archive, ArchiveConfig::default())
        .unwrap()
        .run("demo-search")
        .unwrap()
        .calls;
    assert_eq!(calls, 3);
    assert_eq!(rows(&page), 3);
    let (_, outside) = split_data(&page);
    assert!(!outside.contains("https://") && !outside.contains("http://"));

    let dom = dump_dom(&file_url(&page_path, "#call=c2"));
    assert!(dom.contains("<body data-ready=\"1\">"));
    assert_eq!(rows(&dom), 3);
    let panel = detail_panel(&dom);
    assert!(panel.contains("data-call=\"c2\""), "{panel}");
    assert!(panel.contains(">call.started</span>") && panel.contains(">call.ended</span>"));
    // The call's tool spec, in its line and in its data.
    assert!(
        panel.contains("spec \"Fetch a page\" [read-only, open world]"),
        "{panel}"
    );
    assert!(panel.contains("\"title\": \"Fetch a page\""), "{panel}");

    // Filters list fewer facts but keep every row.
    let filtered = dir.path().join("progress.html");
    let out = reel(
        &archive,
        &[
            "show",
            "demo-search",
            "--kind",
            "progress",
            "--html",
            filtered.to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
    let page = std::fs::read_to_string(&filtered).unwrap();
    assert_eq!(rows(&page), 3);
    let (data, _) = split_data(&page);
    let listed: Vec<Value> = serde_json::from_str(data).unwrap();
    assert!(!listed.is_empty());
    assert!(listed.iter().all(|f| f["fact"]["kind"] == "progress"));

    // An unknown run: a clear message, a non-zero exit, no file.
    let missing = dir.path().join("missing.html");
    let out = reel(
        &archive,
        &["show", "demo-serch", "--html", missing.to_str().unwrap()],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did you mean demo-search"), "{stderr}");
    assert!(!missing.exists());
}

//! What the console's tests share: the real `reel` binary recording and
//! serving archives, raw HTTP, and Debian's chromium driven through
//! chromium-driver (WebDriver, with fantoccini). Each test binary includes
//! it with `mod console;` and uses what it needs.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use reel::fact::*;
use reel_archive::{Archive, ArchiveConfig};
use serde_json::{json, Value};

/// Should it ever become markup, it runs: an alert, a script.
pub const HOSTILE: &str = "<img src=x onerror=alert(1)><script>alert(2)</script>";

pub fn reel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_reel"))
}

/// The demo runs, recorded by the real binary.
pub fn demo(dir: &Path) {
    let out = reel()
        .args(["demo", "--archive"])
        .arg(dir)
        .output()
        .expect("reel demo runs");
    assert!(
        out.status.success(),
        "reel demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A run whose label, tool name, progress and error are `HOSTILE`.
pub fn hostile_run(dir: &Path) {
    strange_run(dir, "hostile", "c1", "ann", HOSTILE);
}

/// A failed run `run_id` of one call `call`, whose session, tenant,
/// label, tool name, arguments, progress and error are `text`.
fn strange_run(dir: &Path, run_id: &str, call: &str, principal: &str, text: &str) {
    let archive = Archive::open(dir, ArchiveConfig::default()).unwrap();
    // Started now: the newest run.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let fact = |offset, call: Option<&str>, kind| NewFact {
        at: now + offset as i64,
        offset,
        call: call.map(Into::into),
        kind,
    };
    archive
        .append(
            run_id,
            vec![
                fact(
                    0,
                    None,
                    FactKind::RunStarted(RunStarted {
                        run_id: run_id.into(),
                        session_id: Some(text.into()),
                        identity: Some(Identity {
                            tenant: Some(text.into()),
                            principal: Some(principal.into()),
                            conversation: None,
                        }),
                        producer: Producer {
                            name: "test".into(),
                            version: "1".into(),
                        },
                        labels: [("label".to_owned(), text.to_owned())].into(),
                        teardown_scopes: vec![],
                    }),
                ),
                fact(
                    1000,
                    Some(call),
                    FactKind::CallStarted(CallStarted {
                        call_id: call.into(),
                        tool_name: text.into(),
                        tool_id: None,
                        parent_call: None,
                        iteration: 0,
                        invocation_id: None,
                        mode: CallMode::Async,
                        protocol: None,
                        platform: None,
                        client_info: None,
                        args: json!({ "q": text }),
                        wanted: None,
                        attached: None,
                        spec: None,
                        dispatch_tools: None,
                        outside_run: None,
                    }),
                ),
                fact(
                    2000,
                    Some(call),
                    FactKind::Progress(Progress {
                        payload: json!({ "message": text }),
                        count: 0,
                        delivered: false,
                    }),
                ),
                fact(
                    3000,
                    Some(call),
                    FactKind::CallEnded(CallEnded {
                        outcome: CallOutcome::Error {
                            error: text.into(),
                            result: None,
                        },
                        duration_ns: 2000,
                        invocation_id: None,
                    }),
                ),
                fact(
                    4000,
                    None,
                    FactKind::RunEnded(RunEnded {
                        status: RunStatus::Failed,
                    }),
                ),
            ],
        )
        .unwrap();
    archive.flush().unwrap();
}

/// Controls and bidi marks an operator must see escaped: an ESC sequence,
/// a C1 control (CSI), a right-to-left override.
pub const CONTROLS: &str = "\u{1b}[2J\u{9b}31m\u{202e}gpj.exe";

/// The id of [`controls_run`].
pub const CONTROLS_RUN: &str = "ctl-\u{1b}[31m-\u{202e}-run";

/// A run whose id, tenant, principal, session, label, call id, tool name,
/// arguments, progress and error hold [`CONTROLS`].
pub fn controls_run(dir: &Path) {
    strange_run(
        dir,
        CONTROLS_RUN,
        &format!("c-{CONTROLS}"),
        CONTROLS,
        CONTROLS,
    );
}

/// A run `big` of `n` progress reports in one call, appended at once:
/// more than a page of facts.
pub fn big_run(dir: &Path, n: u64) {
    long_run(dir, "big", n, usize::MAX);
}

/// `reel demo` recording its runs into `dir`, then a slow live run of
/// `hops` hops `pause_ms` apart, returned once the recorder holds the
/// archive and serves its socket.
pub fn recording_live(dir: &Path, hops: u32, pause_ms: u64) -> Child {
    let recorder = reel()
        .args(["demo", "--live-hops", &hops.to_string()])
        .args(["--live-pause-ms", &pause_ms.to_string(), "--archive"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("reel demo starts");
    let socket = dir.join("reel.sock");
    let started = Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the recorder serves no socket"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    recorder
}

/// A `reel serve` child on a free loopback port; killed on drop.
pub struct Served {
    pub child: Child,
    pub base: String,
    /// Its standard output, kept open while it runs.
    _out: BufReader<std::process::ChildStdout>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn serve(dir: &Path) -> Served {
    let child = reel()
        .args(["serve", "--listen", "127.0.0.1:0", "--archive"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("reel serve starts");
    served(child)
}

/// `reel serve` with more arguments (e.g. `--reports DIR`).
pub fn serve_with(dir: &Path, args: &[&std::ffi::OsStr]) -> Served {
    let child = reel()
        .args(["serve", "--listen", "127.0.0.1:0", "--archive"])
        .arg(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("reel serve starts");
    served(child)
}

/// Reads the address a `reel serve` child prints first.
pub fn served(mut child: Child) -> Served {
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("reel serve printed no address: {line:?}"))
        .trim_end_matches('/')
        .to_owned();
    Served {
        child,
        base,
        _out: out,
    }
}

/// One raw HTTP/1.1 request; the status and the whole answer.
pub fn http_get(base: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {answer:?}"));
    (status, answer)
}

/// One raw HTTP/1.1 GET of a binary answer: the status, the head (status
/// line and headers) and the body's bytes.
pub fn http_get_bytes(base: &str, path: &str) -> (u16, String, Vec<u8>) {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{path}: no end of headers"));
    let head = String::from_utf8_lossy(&answer[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {head:?}"));
    (status, head, answer[end + 4..].to_vec())
}

/// One header of a head from [`http_get_bytes`] (or a whole answer from
/// [`http_get`]); the name in any case.
pub fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    let head = answer.split("\r\n\r\n").next().unwrap_or("");
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

// ---- chromium through chromium-driver ----------------------------------------

pub fn existing(var: &str, default: &str, package: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    assert!(
        path.exists(),
        "{} is missing: install the Debian package {package} \
         (apt-get install -y --no-install-recommends chromium chromium-driver), or set {var}",
        path.display()
    );
    path
}

/// chromium-driver on a free port; killed on drop.
pub struct Driver {
    child: Child,
    port: u16,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn driver() -> Driver {
    let exe = existing(
        "REEL_CHROMEDRIVER",
        "/usr/bin/chromedriver",
        "chromium-driver",
    );
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(exe)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "chromedriver did not listen on port {port} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Driver {
        child,
        port,
        _profile: tempfile::tempdir().unwrap(),
    }
}

pub async fn browser(driver: &Driver) -> Client {
    let chromium = existing("REEL_CHROMIUM", "/usr/bin/chromium", "chromium");
    let profile = driver._profile.path().display().to_string();
    let mut caps = serde_json::Map::new();
    // The browser's console log, read by `console_errors`.
    caps.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--no-first-run", format!("--user-data-dir={profile}"),
            ],
        }),
    );
    // fantoccini's rustls connector needs a process-wide provider; several
    // are linked into this test (ring, aws-lc through other crates).
    let _ = rustls::crypto::ring::default_provider().install_default();
    ClientBuilder::rustls()
        .expect("rustls")
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a WebDriver session in chromium")
}

pub async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.expect(script)
}

/// Opens `url` and waits for the page's script to have run.
pub async fn open(c: &Client, url: &str) {
    c.goto(url).await.unwrap();
    let started = Instant::now();
    while js(
        c,
        "return document.body && document.body.dataset.ready || null",
    )
    .await
        != json!("1")
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{url}: the console's script did not run"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn runs_listed(c: &Client) -> Vec<String> {
    let v = js(
        c,
        "return Array.from(document.querySelectorAll('tr.run')).map(r => r.dataset.run)",
    )
    .await;
    serde_json::from_value(v).unwrap()
}

/// chromium-driver's log of the browser's console (its own endpoint).
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!("session/{}/se/log", session_id.unwrap_or("")))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

/// The errors the browser's console logged since the last call (a CSP
/// violation, a failed load, a script error), each as its message.
pub async fn console_errors(c: &Client) -> Vec<String> {
    let log = c.issue_cmd(BrowserLog).await.expect("the browser's log");
    log.as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["level"] == "SEVERE")
        .map(|e| e["message"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// No alert is open (a script of a payload would have opened one).
pub async fn no_alert(c: &Client) {
    let alert = c.get_alert_text().await;
    assert!(alert.is_err(), "an alert opened: {alert:?}");
}

// ---- runs of given shapes (the runs table's filters) -------------------------

/// A run for the runs table's filters: who ran it, when, one call.
#[derive(Debug, Clone, Default)]
pub struct RunShape {
    pub id: String,
    pub tenant: Option<String>,
    pub principal: Option<String>,
    pub session: Option<String>,
    pub labels: Vec<(String, String)>,
    /// Unix nanoseconds of `run.started`.
    pub at: i64,
    pub tool: String,
    /// A progress message of the call, if any.
    pub message: Option<String>,
    /// The call's error (the run then fails), if any.
    pub error: Option<String>,
    /// The call never ends (an anomaly once the run is closed).
    pub unended: bool,
}

/// Records `runs` into the archive at `dir` (opened, written, flushed,
/// closed).
pub fn record_runs(dir: &Path, runs: &[RunShape]) {
    let archive = Archive::open(dir, ArchiveConfig::default()).unwrap();
    for r in runs {
        let fact = |offset: u64, call: Option<&str>, kind| NewFact {
            at: r.at + offset as i64,
            offset,
            call: call.map(Into::into),
            kind,
        };
        let mut facts = vec![
            fact(
                0,
                None,
                FactKind::RunStarted(RunStarted {
                    run_id: r.id.clone(),
                    session_id: r.session.clone(),
                    identity: Some(Identity {
                        tenant: r.tenant.clone(),
                        principal: r.principal.clone(),
                        conversation: None,
                    }),
                    producer: Producer {
                        name: "test".into(),
                        version: "1".into(),
                    },
                    labels: r.labels.iter().cloned().collect(),
                    teardown_scopes: vec![],
                }),
            ),
            fact(
                10,
                Some("c1"),
                FactKind::CallStarted(CallStarted {
                    call_id: "c1".into(),
                    tool_name: r.tool.clone(),
                    tool_id: None,
                    parent_call: None,
                    iteration: 0,
                    invocation_id: None,
                    mode: CallMode::Async,
                    protocol: None,
                    platform: None,
                    client_info: None,
                    args: json!({}),
                    wanted: None,
                    attached: None,
                    spec: None,
                    dispatch_tools: None,
                    outside_run: None,
                }),
            ),
        ];
        if let Some(m) = &r.message {
            facts.push(fact(
                20,
                Some("c1"),
                FactKind::Progress(Progress {
                    payload: json!({ "message": m }),
                    count: 0,
                    delivered: false,
                }),
            ));
        }
        if !r.unended {
            facts.push(fact(
                30,
                Some("c1"),
                FactKind::CallEnded(CallEnded {
                    outcome: match &r.error {
                        Some(e) => CallOutcome::Error {
                            error: e.clone(),
                            result: None,
                        },
                        None => CallOutcome::Ok { result: json!(1) },
                    },
                    duration_ns: 20,
                    invocation_id: None,
                }),
            ));
        }
        facts.push(fact(
            40,
            None,
            FactKind::RunEnded(RunEnded {
                status: if r.error.is_some() {
                    RunStatus::Failed
                } else {
                    RunStatus::Completed
                },
            }),
        ));
        archive.append(&r.id, facts).unwrap();
    }
    archive.flush().unwrap();
}

/// The run ids a runs-table page lists, in order.
pub fn listed_in(html: &str) -> Vec<String> {
    html.split("<tr class=\"run\" data-run=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
        .collect()
}

/// The `href` of the element with `id` in `html`, unescaped.
pub fn href_of(html: &str, id: &str) -> Option<String> {
    let at = html.find(&format!("id=\"{id}\" href=\""))?;
    let rest = &html[at + id.len() + 12..];
    Some(rest[..rest.find('"')?].replace("&amp;", "&"))
}

/// One raw HTTP/1.1 request's body (headers stripped).
pub fn body_of(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// A closed run `id` of one call and `n` progress reports, appended
/// `batch` facts at a time (so stored in many blocks, as a recorder
/// stores a long run).
pub fn long_run(dir: &Path, id: &str, n: u64, batch: usize) {
    let archive = Archive::open(dir, ArchiveConfig::default()).unwrap();
    let fact = |offset: u64, call: Option<&str>, kind| NewFact {
        at: 1_700_000_000_000_000_000 + offset as i64,
        offset,
        call: call.map(Into::into),
        kind,
    };
    let mut facts = vec![
        fact(
            0,
            None,
            FactKind::RunStarted(RunStarted {
                run_id: id.into(),
                session_id: None,
                identity: None,
                producer: Producer {
                    name: "test".into(),
                    version: "1".into(),
                },
                labels: Default::default(),
                teardown_scopes: vec![],
            }),
        ),
        fact(
            1,
            Some("walk"),
            FactKind::CallStarted(CallStarted {
                call_id: "walk".into(),
                tool_name: "walk".into(),
                tool_id: None,
                parent_call: None,
                iteration: 0,
                invocation_id: None,
                mode: CallMode::Async,
                protocol: None,
                platform: None,
                client_info: None,
                args: json!(n),
                wanted: None,
                attached: None,
                spec: None,
                dispatch_tools: None,
                outside_run: None,
            }),
        ),
    ];
    for i in 0..n {
        facts.push(fact(
            2 + i,
            Some("walk"),
            FactKind::Progress(Progress {
                payload: json!({ "message": format!("hop {i}") }),
                count: 0,
                delivered: false,
            }),
        ));
        if facts.len() == batch {
            archive.append(id, std::mem::take(&mut facts)).unwrap();
        }
    }
    facts.push(fact(
        n + 2,
        Some("walk"),
        FactKind::CallEnded(CallEnded {
            outcome: CallOutcome::Ok { result: json!(n) },
            duration_ns: n,
            invocation_id: None,
        }),
    ));
    facts.push(fact(
        n + 3,
        None,
        FactKind::RunEnded(RunEnded {
            status: RunStatus::Completed,
        }),
    ));
    archive.append(id, facts).unwrap();
    archive.flush().unwrap();
}

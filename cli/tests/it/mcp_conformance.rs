//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! npm) against reel's MCP host: the required server scenarios of each
//! protocol revision (`--requirements 2025-11-25`, `--requirements
//! 2026-07-28`, each at its own wire) run against the fixture tools
//! (mcp/src/bin/reel-mcp-conformance/tools.rs, served in process over
//! streamable HTTP on loopback), first directly, then through `reel mcp
//! record --listen` in front of the same server (the differential check).
//!
//! Directly, every required check passes or is in the committed baseline
//! of its revision (tests/conformance/baseline-<revision>.yml, the suite's
//! `--expected-failures` format, each entry with its reason: only what
//! reel deliberately does not serve). Through the proxy, every check of
//! every scenario run ends exactly as it did directly.
//!
//! The suite is found through `REEL_CONFORMANCE_DIR`, an npm prefix
//! holding `node@22` and the suite (.ci/run installs both). Without it the
//! tests fail saying how to install it.

#[path = "../../../mcp/src/bin/reel-mcp-conformance/tools.rs"]
mod tools;

use crate::support::{self, free_port, wait_listening, Killed};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use reel_mcp::serve::McpHost;
use reel_recorder::{Recorder, RecorderConfig};
use serde_json::Value;

const REEL: &str = env!("CARGO_BIN_EXE_reel");

/// The suite's version `.ci/run` installs.
const SUITE: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";

/// The suite as installed: its Node 22 and its command's script.
pub(crate) struct Suite {
    node: PathBuf,
    script: PathBuf,
}

/// Fails (never skips) without the suite.
pub(crate) fn suite() -> Suite {
    let install = format!(
        "install it with `npm install --prefix DIR node@22 {SUITE}` and set \
         REEL_CONFORMANCE_DIR=DIR (.ci/run does both)"
    );
    let Some(dir) = std::env::var_os("REEL_CONFORMANCE_DIR") else {
        panic!(
            "REEL_CONFORMANCE_DIR is not set, so the MCP conformance suite cannot run: {install}"
        );
    };
    let dir = PathBuf::from(dir).join("node_modules");
    let suite = Suite {
        node: dir.join(".bin/node"),
        script: dir.join("@modelcontextprotocol/conformance/dist/index.js"),
    };
    for path in [&suite.node, &suite.script] {
        assert!(
            path.exists(),
            "REEL_CONFORMANCE_DIR has no {}: {install}",
            path.display()
        );
    }
    suite
}

/// How one run of a requirement set ended.
pub(crate) struct Outcome {
    /// The suite's exit status was success (every required check passed
    /// or is baselined, and no baseline entry is stale).
    pub(crate) passed: bool,
    /// Every check of every scenario run: (scenario, check id) to the
    /// statuses of its occurrences, in order.
    pub(crate) checks: BTreeMap<(String, String), Vec<String>>,
    /// The scenarios run but not scored for the revision (extensions,
    /// pending, added after its release), as the suite lists them.
    not_scored: Vec<String>,
    /// What the suite printed (colours removed).
    pub(crate) output: String,
}

impl Outcome {
    /// How many checks ended with each status (`SUCCESS`, `FAILURE`,
    /// `WARNING`, `SKIPPED`, ...), of the required scenarios (`required`)
    /// or of all run.
    fn tally(&self, required: bool) -> BTreeMap<&str, usize> {
        let mut tally = BTreeMap::new();
        self.checks
            .iter()
            .filter(|((scenario, _), _)| !required || !self.not_scored.contains(scenario))
            .flat_map(|(_, statuses)| statuses)
            .for_each(|s| *tally.entry(s.as_str()).or_insert(0) += 1);
        tally
    }

    /// One line of counts for the test's output.
    fn summary(&self) -> String {
        let line = |tally: BTreeMap<&str, usize>| {
            let total: usize = tally.values().sum();
            let each: Vec<String> = tally.iter().map(|(s, n)| format!("{n} {s}")).collect();
            format!("{total} checks: {}", each.join(", "))
        };
        format!(
            "required scenarios {}; with the {} not scored {}",
            line(self.tally(true)),
            self.not_scored.len(),
            line(self.tally(false))
        )
    }
}

fn baseline(revision: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(format!("baseline-{revision}.yml"))
}

/// Removes ANSI colour sequences.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The server scenarios the suite's requirement set of `revision` runs
/// without scoring (its `not_scored` entries of leg `server`).
fn not_scored(suite: &Suite, revision: &str) -> Vec<String> {
    let package = suite.script.parent().and_then(Path::parent).unwrap();
    let set = package.join(format!("requirements/{revision}.yaml"));
    let text = std::fs::read_to_string(&set).unwrap_or_else(|e| panic!("{}: {e}", set.display()));
    let mut names = Vec::new();
    let mut scenario = None;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- scenario: ") {
            scenario = Some(name.to_owned());
        } else if line == "leg: server" {
            names.extend(scenario.take());
        }
    }
    names
}

/// Runs `revision`'s required server scenarios against `url`.
fn run(suite: &Suite, revision: &str, url: &str, results: &Path) -> Outcome {
    run_against(suite, revision, url, results, Some(&baseline(revision)))
}

/// [`run`], with the baseline of expected failures given (or none).
fn run_against(
    suite: &Suite,
    revision: &str,
    url: &str,
    results: &Path,
    expected: Option<&Path>,
) -> Outcome {
    let mut outcome = run_suite(suite, &["--requirements", revision], url, results, expected);
    outcome.not_scored = not_scored(suite, revision);
    outcome
}

/// The suite's `server` command against `url` with `selection` (a
/// requirement set, or one scenario); nothing counted as not scored.
pub(crate) fn run_suite(
    suite: &Suite,
    selection: &[&str],
    url: &str,
    results: &Path,
    expected: Option<&Path>,
) -> Outcome {
    let mut command = Command::new(&suite.node);
    command
        .arg(&suite.script)
        .args(["server", "--url", url])
        .args(selection);
    if let Some(expected) = expected {
        command.arg("--expected-failures").arg(expected);
    }
    let out = command
        .arg("-o")
        .arg(results)
        .stdin(Stdio::null())
        .output()
        .expect("the suite's node runs");
    let output = plain(&format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ));
    // "=== Running scenario: NAME ===" (a set) or "Running client
    // scenario 'NAME' against server: URL" (one), then "Results saved to
    // DIR".
    let mut checks = BTreeMap::new();
    let mut scenario = None;
    for line in output.lines() {
        if let Some(name) = line
            .strip_prefix("=== Running scenario: ")
            .and_then(|l| l.strip_suffix(" ==="))
            .or_else(|| {
                line.strip_prefix("Running client scenario '")
                    .and_then(|l| l.split_once('\'').map(|(name, _)| name))
            })
        {
            scenario = Some(name.to_owned());
        } else if let Some(dir) = line.strip_prefix("Results saved to ") {
            let name = scenario.take().unwrap_or_else(|| {
                panic!("results of no scenario ({dir}) in the suite's output:\n{output}")
            });
            let text = std::fs::read_to_string(Path::new(dir.trim()).join("checks.json"))
                .unwrap_or_else(|e| panic!("{dir}/checks.json: {e}\n{output}"));
            let list: Vec<Value> = serde_json::from_str(&text).unwrap();
            for check in list {
                let id = check["id"].as_str().unwrap_or_default().to_owned();
                let status = check["status"].as_str().unwrap_or_default().to_owned();
                checks
                    .entry((name.clone(), id))
                    .or_insert_with(Vec::new)
                    .push(status);
            }
        }
    }
    assert!(
        !checks.is_empty(),
        "the suite ran no scenario ({}):\n{output}",
        out.status
    );
    Outcome {
        passed: out.status.success(),
        checks,
        not_scored: Vec::new(),
        output,
    }
}

/// The server scenarios the suite lists (`list --server`): of every
/// revision and extension, as a newer release adds them.
pub(crate) fn listed(suite: &Suite) -> Vec<String> {
    let out = Command::new(&suite.node)
        .arg(&suite.script)
        .args(["list", "--server"])
        .output()
        .expect("the suite's node runs");
    let text = plain(&String::from_utf8_lossy(&out.stdout));
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
        .collect()
}

/// The server scenarios of `revision`'s requirement set: its `server`
/// list and its server scenarios not scored.
fn of_set(suite: &Suite, revision: &str) -> Vec<String> {
    let package = suite.script.parent().and_then(Path::parent).unwrap();
    let text =
        std::fs::read_to_string(package.join(format!("requirements/{revision}.yaml"))).unwrap();
    let mut names = not_scored(suite, revision);
    let mut in_server = false;
    for line in text.lines() {
        if !line.starts_with(' ') {
            in_server = line.trim_end() == "server:";
        } else if let Some(name) = line.trim().strip_prefix("- ").filter(|_| in_server) {
            names.push(name.to_owned());
        }
    }
    names
}

/// `reel mcp record --listen 127.0.0.1:0 --upstream UPSTREAM`, and the
/// endpoint it says it listens at.
pub(crate) fn proxy(archive: &Path, upstream: &str, config: &Path) -> (Killed, String) {
    let mut child = Killed(
        Command::new(REEL)
            .arg("--archive")
            .arg(archive)
            .args(["mcp", "record", "--listen", "127.0.0.1:0"])
            .args(["--upstream", upstream])
            .env("REEL_CONFIG_DIR", config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stderr = std::io::BufReader::new(child.0.stderr.take().unwrap());
    let (url, _) = support::proxy_url(&mut stderr);
    // Drain what else it says, so it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, url)
}

/// Checks of rules the proxy keeps itself (it refuses SEP-2243 headers
/// that disagree with the body, `400` and `-32020`, before forwarding):
/// through it they may pass where the server alone fails them, never the
/// other way round.
const KEPT_BY_THE_PROXY: [&str; 3] = [
    "sep-2243-server-reject-error-code",
    "sep-2243-server-reject-invalid-headers",
    "tasks-headers-reject-mismatched-method",
];

/// Whether `proxied` ends as `direct` does, or better where the proxy
/// keeps the rule itself ([`KEPT_BY_THE_PROXY`]).
fn alike(check: &str, direct: Option<&Vec<String>>, proxied: Option<&Vec<String>>) -> bool {
    match (direct, proxied) {
        (Some(a), Some(b)) if KEPT_BY_THE_PROXY.contains(&check) && a.len() == b.len() => {
            a.iter().zip(b).all(|(a, b)| a == b || b == "SUCCESS")
        }
        (a, b) => a == b,
    }
}

/// The differences between two runs' checks, one line each.
pub(crate) fn differences(direct: &Outcome, proxied: &Outcome) -> Vec<String> {
    let mut keys: Vec<_> = direct.checks.keys().chain(proxied.checks.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let (a, b) = (direct.checks.get(key), proxied.checks.get(key));
            (!alike(&key.1, a, b)).then(|| {
                format!(
                    "{}:{} direct {a:?}, through reel mcp record {b:?}",
                    key.0, key.1
                )
            })
        })
        .collect()
}

/// The required scenarios of `revision`, directly and through the proxy.
fn check(revision: &str) {
    let suite = suite();
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let recorder = rt
        .block_on(Recorder::open(
            dir.path().join("server"),
            RecorderConfig::default(),
        ))
        .unwrap();
    let host = McpHost::new(recorder.clone(), tools::tools())
        .server_info("reel-mcp-conformance", env!("CARGO_PKG_VERSION"));
    let server = rt
        .block_on(host.bind_http("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let url = server.url();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = rt.spawn(server.run(async {
        let _ = stopped.await;
    }));

    let direct = run(&suite, revision, &url, &dir.path().join("direct"));
    println!("{revision} direct: {}", direct.summary());
    assert!(
        direct.passed,
        "{revision}: a required check failed that the baseline does not list (or a baselined one now passes):\n{}",
        direct.output
    );

    let (mut recording, proxy_url) =
        proxy(&dir.path().join("proxy"), &url, &dir.path().join("config"));
    let proxied = run(&suite, revision, &proxy_url, &dir.path().join("proxied"));
    println!("{revision} through reel mcp record: {}", proxied.summary());
    let differ = differences(&direct, &proxied);
    assert!(
        differ.is_empty(),
        "{revision}: through `reel mcp record` the checks end otherwise than directly:\n  {}\n{}",
        differ.join("\n  "),
        proxied.output
    );
    assert_eq!(direct.passed, proxied.passed, "{}", proxied.output);
    assert!(
        recording.0.try_wait().unwrap().is_none(),
        "the proxy exited during the suite"
    );
    // Interrupted, it ends cleanly, having recorded the suite's sessions.
    let interrupted = Command::new("kill")
        .args(["-INT", &recording.0.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = recording.0.wait().unwrap();
    assert!(status.success(), "the proxy exited {status}");
    let runs = Command::new(REEL)
        .arg("--archive")
        .arg(dir.path().join("proxy"))
        .args(["runs", "--json"])
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .output()
        .unwrap();
    assert!(
        runs.status.success(),
        "{}",
        String::from_utf8_lossy(&runs.stderr)
    );
    let runs: Value = serde_json::from_slice(&runs.stdout).unwrap();
    let runs = runs["runs"].as_array().unwrap();
    assert!(
        runs.iter()
            .all(|r| r["run_id"].as_str().unwrap().starts_with("mcp-")),
        "{runs:?}"
    );
    assert!(!runs.is_empty(), "the proxy recorded no session");

    let _ = stop.send(());
    rt.block_on(serving).unwrap().unwrap();
    rt.block_on(recorder.shutdown()).unwrap();
}

#[test]
fn the_required_scenarios_of_2025_11_25_pass_directly_and_alike_through_the_proxy() {
    check("2025-11-25");
}

#[test]
fn the_required_scenarios_of_2026_07_28_pass_directly_and_alike_through_the_proxy() {
    check("2026-07-28");
}

/// The suite's own reference server (tests/conformance/everything-server.ts,
/// vendored: the npm package does not ship it) on a free port, run by the
/// suite's Node 22 with the suite's `node_modules` beside it.
fn reference_server(suite: &Suite, dir: &Path) -> (Killed, String) {
    let modules = suite.node.parent().and_then(Path::parent).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/everything-server.ts"),
        dir.join("everything-server.ts"),
    )
    .unwrap();
    std::fs::write(dir.join("package.json"), "{\"type\": \"module\"}\n").unwrap();
    std::os::unix::fs::symlink(modules, dir.join("node_modules")).unwrap();
    let port = free_port();
    let mut server = Killed(
        Command::new(&suite.node)
            .args([
                "--experimental-strip-types",
                "--no-warnings",
                "everything-server.ts",
            ])
            .current_dir(dir)
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(port, &mut server, "the reference server");
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// The suite against its own reference server, each revision's required
/// scenarios (elicitation over streamable HTTP among them), directly and
/// through `reel mcp record --listen`: every check ends alike, but those
/// of the rules the proxy keeps itself ([`KEPT_BY_THE_PROXY`]), which may
/// only end better. The reference server does not pass every 2026-07-28
/// check itself; what matters is that reel breaks none. (Through the proxy, the
/// `subscriptions/listen` stream, JSON lines under `application/json`,
/// was held until its end, which never comes: three checks failed.)
#[test]
fn the_suite_against_its_own_reference_server_ends_alike_through_the_proxy() {
    let suite = suite();
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = reference_server(&suite, dir.path());
    let (_recording, proxy_url) =
        proxy(&dir.path().join("proxy"), &url, &dir.path().join("config"));
    for revision in ["2025-11-25", "2026-07-28"] {
        let direct = run_against(
            &suite,
            revision,
            &url,
            &dir.path().join(format!("direct-{revision}")),
            None,
        );
        println!("reference server, {revision} direct: {}", direct.summary());
        let proxied = run_against(
            &suite,
            revision,
            &proxy_url,
            &dir.path().join(format!("proxied-{revision}")),
            None,
        );
        println!(
            "reference server, {revision} through reel mcp record: {}",
            proxied.summary()
        );
        let differ = differences(&direct, &proxied);
        assert!(
            differ.is_empty(),
            "{revision}: against the reference server, through `reel mcp record` the checks end otherwise than directly:\n  {}\n{}",
            differ.join("\n  "),
            proxied.output
        );
        if revision == "2025-11-25" {
            assert!(direct.passed, "{}", direct.output);
        }
    }
}

/// Every server scenario the suite lists beyond both requirement sets
/// (their not-scored scenarios, the Tasks extension and JSON Schema
/// preservation among them, already run above), against the reference
/// server, directly and through `reel mcp record --listen`, unscored: each
/// check ends alike, as above. In 0.2.0-alpha.12 these are the Skills
/// extension's three; a newer release's scenarios join them by
/// themselves.
#[test]
fn beyond_the_requirement_sets_the_reference_server_ends_alike_through_the_proxy() {
    let suite = suite();
    let mut required = of_set(&suite, "2025-11-25");
    required.extend(of_set(&suite, "2026-07-28"));
    let beyond: Vec<String> = listed(&suite)
        .into_iter()
        .filter(|s| !required.contains(s))
        .collect();
    for named in ["server-stateless", "logging-set-level", "tasks-lifecycle"] {
        assert!(
            required.iter().any(|s| s == named),
            "the requirement sets read wrong (no {named}): {required:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = reference_server(&suite, dir.path());
    let (_recording, proxy_url) =
        proxy(&dir.path().join("proxy"), &url, &dir.path().join("config"));
    let mut ran = Vec::new();
    for scenario in &beyond {
        let selection = ["--scenario", scenario.as_str()];
        let results = |side: &str| {
            dir.path()
                .join(format!("{side}-{scenario}").replace('/', "-"))
        };
        let direct = run_suite(&suite, &selection, &url, &results("direct"), None);
        let proxied = run_suite(&suite, &selection, &proxy_url, &results("proxied"), None);
        let differ = differences(&direct, &proxied);
        assert!(
            differ.is_empty(),
            "{scenario}: against the reference server, through `reel mcp record` the checks end otherwise than directly:\n  {}\n{}",
            differ.join("\n  "),
            proxied.output
        );
        let passed = |o: &Outcome| {
            o.checks
                .values()
                .flatten()
                .filter(|s| *s == "SUCCESS")
                .count()
        };
        ran.push(format!(
            "{scenario} {}/{} direct, {} through",
            passed(&direct),
            direct.checks.values().flatten().count(),
            passed(&proxied)
        ));
    }
    println!("beyond the requirement sets: {}", ran.join("; "));
}

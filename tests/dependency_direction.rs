//! The dependency direction of ARCHITECTURE.md, enforced: a crate that
//! gains a dependency on one of ours that the written direction forbids
//! fails this test, and so does a test crate (or tokio's `test-util`)
//! reaching the production `reel` binary.
//!
//! ```text
//! reel (core)     -> nothing of ours
//! reel-archive    -> reel
//! reel-viewer     -> reel                 (the library: timelines, renderers, LSP)
//! reel-recorder   -> reel, reel-archive
//! reel-replayer   -> reel, reel-archive   (replay reads records; it never records)
//! reel-nats       -> reel, reel-archive   (the JetStream store and its projection; beside the recorder, not under it)
//! reel-mcp        -> reel, reel-archive, reel-recorder, reel-replayer
//! reel-otlp       -> reel, reel-archive, reel-viewer  (spans of records; the viewer's display rule)
//! reel-serve      -> reel, reel-archive, reel-viewer  (the console: reads archives, shows with the viewer's pieces)
//! reel-cli        -> anything but reel-bench (the `reel` binary, at the top)
//! reel-bench      -> anything
//! xtask           -> nothing of ours      (project chores: provisioning, the book)
//! ```
//!
//! Only normal (and build) dependencies count: tests may reach further up
//! (the core's tests drive a recorder), a library may not.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// What each package of ours may depend on (normal and build
/// dependencies), by package name. `None`: anything of ours.
const RULES: &[(&str, Option<&[&str]>)] = &[
    ("reel", Some(&[])),
    ("reel-archive", Some(&["reel"])),
    ("reel-viewer", Some(&["reel"])),
    ("reel-recorder", Some(&["reel", "reel-archive"])),
    ("reel-replayer", Some(&["reel", "reel-archive"])),
    ("reel-nats", Some(&["reel", "reel-archive"])),
    (
        "reel-mcp",
        Some(&["reel", "reel-archive", "reel-recorder", "reel-replayer"]),
    ),
    ("reel-otlp", Some(&["reel", "reel-archive", "reel-viewer"])),
    ("reel-serve", Some(&["reel", "reel-archive", "reel-viewer"])),
    (
        "reel-cli",
        Some(&[
            "reel",
            "reel-archive",
            "reel-recorder",
            "reel-replayer",
            "reel-viewer",
            "reel-mcp",
            "reel-otlp",
            "reel-nats",
            "reel-serve",
        ]),
    ),
    ("reel-bench", None),
    ("xtask", Some(&[])),
];

/// Crates the production binary must not link. (`tempfile` is not one
/// of them: the archive makes the scratch copy an open checks a store on
/// with it, and removes it on drop; see `archive/src/control.rs`.)
const TEST_CRATES: &[&str] = &["insta", "proptest", "proptest-state-machine"];

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn run(mut c: Command) -> String {
    let out = c.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "{c:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("cargo prints UTF-8")
}

/// Each workspace package's normal and build dependencies on workspace
/// packages, from `cargo metadata` (the manifests only: `--no-deps`).
fn workspace_edges() -> BTreeMap<String, Vec<String>> {
    let mut c = cargo();
    c.args(["metadata", "--format-version", "1", "--no-deps"]);
    let meta: Value = serde_json::from_str(&run(c)).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let ours: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                // `kind` is null for normal dependencies, "dev" or "build".
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str())
                .filter(|name| ours.contains(name))
                .map(str::to_owned)
                .collect();
            (p["name"].as_str().expect("name").to_owned(), deps)
        })
        .collect()
}

/// The rule's verdict on `edges`: one line per dependency the direction
/// forbids, and per package that has no rule yet.
fn violations(edges: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (package, deps) in edges {
        let Some((_, allowed)) = RULES.iter().find(|(name, _)| name == package) else {
            out.push(format!(
                "{package} has no rule: add its direction to ARCHITECTURE.md and to RULES here"
            ));
            continue;
        };
        let Some(allowed) = allowed else { continue };
        for dep in deps {
            if !allowed.contains(&dep.as_str()) {
                out.push(format!(
                    "{package} depends on {dep}, which the direction forbids (allowed: {allowed:?})"
                ));
            }
        }
    }
    out
}

#[test]
fn every_crate_keeps_the_written_direction() {
    let edges = workspace_edges();
    for expected in ["reel", "reel-archive", "reel-viewer", "reel-cli"] {
        assert!(edges.contains_key(expected), "no package {expected}");
    }
    let found = violations(&edges);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_rules_catch_a_wrong_edge() {
    // The check itself can fail: a viewer that reached the archive, a core
    // that reached the viewer, and a package without a rule.
    let mut edges = BTreeMap::new();
    edges.insert(
        "reel-viewer".to_owned(),
        vec!["reel".into(), "reel-archive".into()],
    );
    edges.insert("reel".to_owned(), vec!["reel-viewer".into()]);
    edges.insert("reel-cli".to_owned(), vec!["reel-bench".into()]);
    edges.insert("reel-new".to_owned(), vec![]);
    // The exporter reads records; it never records.
    edges.insert("reel-otlp".to_owned(), vec!["reel-recorder".into()]);
    assert_eq!(
        violations(&edges),
        [
            "reel depends on reel-viewer, which the direction forbids (allowed: [])",
            "reel-cli depends on reel-bench, which the direction forbids (allowed: [\"reel\", \"reel-archive\", \"reel-recorder\", \"reel-replayer\", \"reel-viewer\", \"reel-mcp\", \"reel-otlp\", \"reel-nats\", \"reel-serve\"])",
            "reel-new has no rule: add its direction to ARCHITECTURE.md and to RULES here",
            "reel-otlp depends on reel-recorder, which the direction forbids (allowed: [\"reel\", \"reel-archive\", \"reel-viewer\"])",
            "reel-viewer depends on reel-archive, which the direction forbids (allowed: [\"reel\"])",
        ]
    );
}

/// What `cargo build -p reel-cli` links (normal dependencies, features
/// resolved for that package alone, as an install resolves them): no test
/// crate, and tokio without `test-util` (a paused clock in production).
#[test]
fn the_production_binary_links_no_test_dependencies() {
    let mut c = cargo();
    c.args([
        "tree",
        "-p",
        "reel-cli",
        "-e",
        "normal,features",
        "--prefix",
        "none",
    ]);
    let tree = run(c);
    let crate_of = |line: &str| line.split([' ', '\t']).next().unwrap_or("").to_owned();
    let linked: Vec<String> = tree.lines().map(crate_of).collect();
    assert!(linked.iter().any(|c| c == "reel-replayer"), "{tree}");
    let bad: Vec<&str> = tree
        .lines()
        .filter(|line| TEST_CRATES.contains(&crate_of(line).as_str()))
        .collect();
    assert!(
        bad.is_empty(),
        "the production `reel` binary links test dependencies:\n{}",
        bad.join("\n")
    );
    let enablers = test_util_enablers();
    assert!(
        !enablers.is_empty(),
        "no crate turns tokio's test-util on any more: drop TEST_UTIL_ENABLERS"
    );
    let bad: Vec<&String> = enablers
        .iter()
        .filter(|c| !TEST_UTIL_ENABLERS.contains(&c.as_str()))
        .collect();
    assert!(
        bad.is_empty(),
        "tokio's \"test-util\" (a paused clock) is turned on in the production `reel` binary by: {bad:?}"
    );
}

/// Crates that may turn tokio's `test-util` feature on in the production
/// binary: `tryhard` (async-nats's retry helper, a dependency of its
/// JetStream API) turns it on unconditionally. The feature only adds the
/// clock-pausing API; nothing in reel or async-nats pauses the clock.
const TEST_UTIL_ENABLERS: &[&str] = &["tryhard"];

/// The crates whose dependency on tokio turns `test-util` on, from the
/// inverted feature tree of `reel-cli`.
fn test_util_enablers() -> Vec<String> {
    let mut c = cargo();
    c.args([
        "tree",
        "-p",
        "reel-cli",
        "-e",
        "normal,features",
        "-i",
        "tokio",
        "--prefix",
        "depth",
    ]);
    let tree = run(c);
    let depth_of = |line: &str| -> (usize, String) {
        let digits: String = line.chars().take_while(char::is_ascii_digit).collect();
        (digits.parse().unwrap_or(0), line[digits.len()..].to_owned())
    };
    let lines: Vec<(usize, String)> = tree.lines().map(depth_of).collect();
    let mut out = Vec::new();
    for (i, (depth, text)) in lines.iter().enumerate() {
        if text.starts_with("tokio feature \"test-util\"") && !text.ends_with("(*)") {
            for (d, t) in &lines[i + 1..] {
                if d <= depth {
                    break;
                }
                if *d == depth + 1 {
                    out.push(t.split(' ').next().unwrap_or("").to_owned());
                }
            }
        }
    }
    out
}

//! The dependency direction of ARCHITECTURE.md, enforced: a crate that
//! gains a dependency on one of ours that the written direction forbids
//! fails this test, and so does a test crate (or tokio's `test-util`)
//! reaching the production `reel` binary.
//!
//! ```text
//! reel-core       -> nothing of ours      (the fact model and its formats, at the bottom)
//! reel-macros     -> nothing of ours      (`#[reel::tool]`, `#[reel::schema]`: expansions name `::reel`)
//! reel            -> reel-core, reel-macros  (the contract, redaction, the tripwire, tools)
//! reel-archive    -> reel-core
//! reel-viewer     -> reel-core            (timelines and renderers: pure functions of facts)
//! reel-lsp        -> reel-core, reel-viewer  (the tape language server: the only crate that knows LSP)
//! reel-recorder   -> reel, reel-archive
//! reel-replayer   -> reel, reel-archive   (replay reads records; it never records)
//! reel-nats       -> reel-core, reel-archive  (the JetStream store and its projection; beside the recorder, not under it)
//! reel-demo       -> reel, reel-archive, reel-recorder  (the demo tools and runs: `reel demo`, the example tests)
//! reel-mcp        -> reel, reel-archive, reel-recorder  (the matcher of mock and verify is the core's)
//! reel-otlp       -> reel-core, reel-archive  (spans of records; the core's display rule)
//! reel-serve      -> reel-core, reel-archive, reel-viewer  (the console: reads archives, shows with the viewer's pieces)
//! reel-collect    -> reel, reel-archive, reel-serve  (the OTLP receiver: writes runs, so on the contract's redaction and tripwire; the console's gate; never the recorder's live pipeline nor the OTLP exporter)
//! reel-cli        -> anything but reel-bench and reel-replayer (the `reel` binary, at the top; no verb replays)
//! reel-bench      -> anything
//! xtask           -> nothing of ours      (project chores: provisioning, the book)
//! ```
//!
//! Only normal (and build) dependencies count: tests may reach further up
//! (the core's tests drive a recorder), a library may not. (`reel-core` may
//! be named beside `reel` by any crate above it.)
//!
//! The invariants of ARCHITECTURE.md that are about dependencies are held
//! here too, each by a check that can fail: only the archive names sled,
//! only the LSP's crate knows LSP (and the viewer links no runtime), the
//! core does no network IO, only binaries
//! set the allocator, and the crates that read facts (viewer, archive,
//! nats, otlp, the console) link none of the contract's dependencies. And one
//! poison-ignoring lock: `reel_core::lock::lock`, no copy elsewhere.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// What each package of ours may depend on (normal and build
/// dependencies), by package name. `None`: anything of ours.
const RULES: &[(&str, Option<&[&str]>)] = &[
    ("reel-core", Some(&[])),
    ("reel-macros", Some(&[])),
    ("reel", Some(&["reel-core", "reel-macros"])),
    ("reel-archive", Some(&["reel-core"])),
    ("reel-viewer", Some(&["reel-core"])),
    ("reel-lsp", Some(&["reel-core", "reel-viewer"])),
    (
        "reel-recorder",
        Some(&["reel-core", "reel", "reel-archive"]),
    ),
    (
        "reel-replayer",
        Some(&["reel-core", "reel", "reel-archive"]),
    ),
    ("reel-nats", Some(&["reel-core", "reel-archive"])),
    (
        "reel-demo",
        Some(&["reel-core", "reel", "reel-archive", "reel-recorder"]),
    ),
    (
        "reel-mcp",
        Some(&["reel-core", "reel", "reel-archive", "reel-recorder"]),
    ),
    ("reel-otlp", Some(&["reel-core", "reel-archive"])),
    (
        "reel-serve",
        Some(&["reel-core", "reel-archive", "reel-viewer"]),
    ),
    // Writes runs taken in over OTLP: the contract's redaction and
    // tripwire, a whole-run import, the console's gate. Not `reel-otlp`
    // (that one exports and stays on the core), and the console stays
    // read-only (the gate is all it lends).
    (
        "reel-collect",
        Some(&["reel-core", "reel", "reel-archive", "reel-serve"]),
    ),
    // No replayer: no verb replays ([`REPLAYING_VERBS`]).
    (
        "reel-cli",
        Some(&[
            "reel-core",
            "reel",
            "reel-archive",
            "reel-recorder",
            "reel-viewer",
            "reel-lsp",
            "reel-demo",
            "reel-mcp",
            "reel-otlp",
            "reel-nats",
            "reel-serve",
            "reel-collect",
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
    for expected in [
        "reel-core",
        "reel",
        "reel-archive",
        "reel-viewer",
        "reel-cli",
    ] {
        assert!(edges.contains_key(expected), "no package {expected}");
    }
    let found = violations(&edges);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_rules_catch_a_wrong_edge() {
    // The check itself can fail: a viewer that reached the contract and
    // the archive, a core that reached back up, and a package without a
    // rule.
    let mut edges = BTreeMap::new();
    edges.insert(
        "reel-viewer".to_owned(),
        vec!["reel-core".into(), "reel".into(), "reel-archive".into()],
    );
    edges.insert("reel-core".to_owned(), vec!["reel".into()]);
    edges.insert("reel-cli".to_owned(), vec!["reel-bench".into()]);
    edges.insert("reel-new".to_owned(), vec![]);
    // The exporter reads records; it never records.
    edges.insert("reel-otlp".to_owned(), vec!["reel-recorder".into()]);
    // The receiver writes through the contract's redaction, never through
    // the exporter.
    edges.insert("reel-collect".to_owned(), vec!["reel-otlp".into()]);
    assert_eq!(
        violations(&edges),
        [
            "reel-cli depends on reel-bench, which the direction forbids (allowed: [\"reel-core\", \"reel\", \"reel-archive\", \"reel-recorder\", \"reel-viewer\", \"reel-lsp\", \"reel-demo\", \"reel-mcp\", \"reel-otlp\", \"reel-nats\", \"reel-serve\", \"reel-collect\"])",
            "reel-collect depends on reel-otlp, which the direction forbids (allowed: [\"reel-core\", \"reel\", \"reel-archive\", \"reel-serve\"])",
            "reel-core depends on reel, which the direction forbids (allowed: [])",
            "reel-new has no rule: add its direction to ARCHITECTURE.md and to RULES here",
            "reel-otlp depends on reel-recorder, which the direction forbids (allowed: [\"reel-core\", \"reel-archive\"])",
            "reel-viewer depends on reel, which the direction forbids (allowed: [\"reel-core\"])",
            "reel-viewer depends on reel-archive, which the direction forbids (allowed: [\"reel-core\"])",
        ]
    );
}

/// The verbs of the `reel` binary that replay, and so link `reel-replayer`:
/// none. Replaying is what a test does (`reel_replayer::replay`, the
/// `assert_replays!` macros); `reel mcp mock` and `reel mcp verify` match
/// with the core's `matching`. A verb that comes to replay names itself
/// here (and the replayer goes back into reel-cli's rule).
const REPLAYING_VERBS: &[&str] = &[];

/// What `cargo build -p reel-cli` links (normal dependencies, features
/// resolved for that package alone, as an install resolves them): no test
/// crate, no replayer unless a verb replays, and tokio without `test-util`
/// (a paused clock in production).
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
    assert!(linked.iter().any(|c| c == "reel-recorder"), "{tree}");
    assert_eq!(
        linked.iter().any(|c| c == "reel-replayer"),
        !REPLAYING_VERBS.is_empty(),
        "the `reel` binary links reel-replayer only when a verb replays (REPLAYING_VERBS: {REPLAYING_VERBS:?})"
    );
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

// ---------------------------------------------------------------------------
// The invariants of ARCHITECTURE.md that are about dependencies
// ---------------------------------------------------------------------------

/// Each workspace package's dependencies as its manifest names them:
/// (name, kind), kind `"normal"`, `"dev"` or `"build"`.
fn manifest_dependencies() -> BTreeMap<String, Vec<(String, String)>> {
    let mut c = cargo();
    c.args(["metadata", "--format-version", "1", "--no-deps"]);
    let meta: Value = serde_json::from_str(&run(c)).expect("cargo metadata prints JSON");
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .map(|d| {
                    let name = d["name"].as_str().expect("name").to_owned();
                    let kind = d["kind"].as_str().unwrap_or("normal").to_owned();
                    (name, kind)
                })
                .collect();
            (p["name"].as_str().expect("name").to_owned(), deps)
        })
        .collect()
}

/// The packages whose manifest names one of `crates`, as `kinds` of
/// dependency.
fn naming(
    manifests: &BTreeMap<String, Vec<(String, String)>>,
    crates: &[&str],
    kinds: &[&str],
) -> Vec<String> {
    manifests
        .iter()
        .filter(|(_, deps)| {
            deps.iter().any(|(name, kind)| {
                crates.contains(&name.as_str()) && kinds.contains(&kind.as_str())
            })
        })
        .map(|(package, _)| package.clone())
        .collect()
}

/// Test code that may name sled to damage an archive's bytes on purpose
/// (the CLI's damage, drift and scale tests, as `archive/tests` do).
const SLED_IN_TESTS: &[&str] = &["reel-archive", "reel-cli"];

#[test]
fn only_the_archive_names_sled() {
    let manifests = manifest_dependencies();
    let found = naming(&manifests, &["sled"], &["normal", "build"]);
    assert_eq!(found, ["reel-archive"], "only `archive/` talks to sled");
    let tests: Vec<String> = naming(&manifests, &["sled"], &["dev"])
        .into_iter()
        .filter(|p| !SLED_IN_TESTS.contains(&p.as_str()))
        .collect();
    assert!(
        tests.is_empty(),
        "tests of {tests:?} name sled: damage archives through `reel-archive`, or add them to SLED_IN_TESTS with the reason"
    );
}

#[test]
fn only_the_lsp_crate_knows_lsp() {
    let manifests = manifest_dependencies();
    let lsp = ["tower-lsp-server", "tower-lsp", "lsp-types", "ls-types"];
    let found = naming(&manifests, &lsp, &["normal", "build"]);
    assert_eq!(
        found,
        ["reel-lsp"],
        "only the LSP's crate (`lsp/`) knows LSP"
    );
    // The viewer is pure functions of facts: whoever embeds the renderers
    // gets no language server, runtime or network crate with them.
    let graph = ResolvedGraph::of_workspace();
    let linked = graph.closure("reel-viewer");
    let bad: Vec<&String> = linked
        .iter()
        .filter(|c| NETWORK.contains(&c.as_str()) || lsp.contains(&c.as_str()))
        .collect();
    assert!(
        bad.is_empty(),
        "reel-viewer links {bad:?}: only reel-lsp may"
    );
    assert!(
        graph.closure("reel-lsp").contains("tokio"),
        "the check can fail: the language server links tokio"
    );
}

/// Crates that do network IO (or the runtime it needs).
const NETWORK: &[&str] = &[
    "tokio",
    "mio",
    "socket2",
    "hyper",
    "hyper-util",
    "reqwest",
    "tonic",
    "async-nats",
    "h2",
    "rustls",
    "async-std",
    "smol",
];

#[test]
fn the_core_does_no_network_io() {
    let graph = ResolvedGraph::of_workspace();
    let linked = graph.closure("reel-core");
    let bad: Vec<&String> = linked
        .iter()
        .filter(|c| NETWORK.contains(&c.as_str()))
        .collect();
    assert!(bad.is_empty(), "reel-core links network crates: {bad:?}");
    // What the core's sources name: tidy's `the_core_names_no_network_api`.
}

/// The dependencies of the contract (`reel`) that the crates reading facts
/// must not link: schema derivation and validation, the tripwire's
/// matcher, the context's cancellation.
const CONTRACT_ONLY: &[&str] = &["jsonschema", "schemars", "aho-corasick", "tokio-util"];

/// Third-party crates that bring one of [`CONTRACT_ONLY`] on their own, by
/// the crate of ours that needs them: tower-lsp-server (reel-lsp, the
/// language server) uses tokio-util's codec; async-nats (nats) uses
/// tokio-util and regex (aho-corasick); hyper's HTTP/2 and tonic (otlp)
/// use tokio-util. None of these is the contract: what must not happen is
/// one of them reached through `reel` or `reel-core`.
const CARRIERS: &[(&str, &str)] = &[
    ("tokio-util", "tower-lsp-server"),
    ("tokio-util", "async-nats"),
    ("tokio-util", "h2"),
    ("tokio-util", "tower"),
    ("tokio-util", "tonic"),
    ("tokio-util", "hyper-util"),
    ("aho-corasick", "regex"),
    ("aho-corasick", "regex-automata"),
];

#[test]
fn the_crates_that_read_facts_link_none_of_the_contracts_dependencies() {
    let graph = ResolvedGraph::of_workspace();
    let mut found = Vec::new();
    for package in [
        "reel-viewer",
        "reel-archive",
        "reel-nats",
        "reel-otlp",
        "reel-serve",
    ] {
        found.extend(graph.contract_links(package));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The check can fail: the contract itself links all of them.
    let reel = graph.contract_links("reel");
    for dep in ["jsonschema", "schemars", "aho-corasick", "tokio-util"] {
        assert!(
            reel.iter()
                .any(|line| line.contains(&format!("links {dep} "))),
            "{dep} is not found in reel's own dependencies: {reel:?}"
        );
    }
}

/// The resolved dependency graph of the workspace (`cargo metadata`,
/// normal and build edges), by package name.
struct ResolvedGraph {
    /// Package name -> the names of its normal and build dependencies.
    deps: BTreeMap<String, Vec<String>>,
}

impl ResolvedGraph {
    fn of_workspace() -> ResolvedGraph {
        let mut c = cargo();
        // This machine's platform only: the other platforms' crates need
        // not be downloaded, and are not what this build links.
        c.args(["metadata", "--format-version", "1", "--offline"]);
        c.args(["--filter-platform", &host()]);
        let meta: Value = serde_json::from_str(&run(c)).expect("cargo metadata prints JSON");
        let names: BTreeMap<&str, &str> = meta["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().expect("id"),
                    p["name"].as_str().expect("name"),
                )
            })
            .collect();
        let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for node in meta["resolve"]["nodes"].as_array().expect("resolve") {
            let name = names[node["id"].as_str().expect("id")];
            let out = deps.entry(name.to_owned()).or_default();
            for dep in node["deps"].as_array().expect("deps") {
                let normal = dep["dep_kinds"]
                    .as_array()
                    .expect("dep_kinds")
                    .iter()
                    .any(|k| k["kind"].as_str() != Some("dev"));
                if normal {
                    out.push(names[dep["pkg"].as_str().expect("pkg")].to_owned());
                }
            }
        }
        ResolvedGraph { deps }
    }

    /// Every package `package` links (itself excluded).
    fn closure(&self, package: &str) -> std::collections::BTreeSet<String> {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![package.to_owned()];
        while let Some(p) = todo.pop() {
            for d in self.deps.get(&p).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    }

    /// One line per way `package` links a crate of [`CONTRACT_ONLY`] other
    /// than through a third-party carrier of [`CARRIERS`]: `<package>
    /// links <crate> through <parent>`.
    fn contract_links(&self, package: &str) -> Vec<String> {
        let mut linked = self.closure(package);
        linked.insert(package.to_owned());
        let mut out = Vec::new();
        for parent in &linked {
            for dep in self.deps.get(parent).into_iter().flatten() {
                let dep = dep.as_str();
                if CONTRACT_ONLY.contains(&dep) && !CARRIERS.contains(&(dep, parent.as_str())) {
                    out.push(format!("{package} links {dep} through {parent}"));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// The host's target triple (`rustc -vV`).
fn host() -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut c = Command::new(rustc);
    c.arg("-vV");
    run(c)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_owned()
}

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, build output and fuzz corpora left out
/// (from the tidy rules' one walk of the tree).
fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    out.extend(
        crate::tidy::files()
            .iter()
            .filter(|f| f.is_rust() && f.path.starts_with(dir))
            .map(|f| f.path.clone()),
    );
}

/// The `pub use` items of `text` that re-export one of `crates` (crate
/// names as Rust spells them): one line each, `LINE: TEXT`.
fn reexports(text: &str, crates: &[String]) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let rest = line.trim_start().strip_prefix("pub use ")?;
            let rest = rest.trim_start_matches("::").trim_start_matches('{');
            let first: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            crates
                .contains(&first)
                .then(|| format!("{}: {}", i + 1, line.trim()))
        })
        .collect()
}

/// ARCHITECTURE.md, one path per item: a `pub use` of another workspace
/// crate appears only in the façade, `reel` (`src/`) over `reel-core`. An
/// item re-exported elsewhere has two public paths, imported both ways,
/// and a crate arrow kept for a re-export links what it does not use.
#[test]
fn a_pub_use_of_another_workspace_crate_is_only_in_the_facade() {
    let crates: Vec<String> = workspace_edges()
        .keys()
        .map(|name| name.replace('-', "_"))
        .collect();
    assert!(crates.contains(&"reel_core".to_owned()), "{crates:?}");
    let mut found = Vec::new();
    for file in crate::tidy::rust_files_under("") {
        if file.is_under("src") {
            continue;
        }
        for line in reexports(&file.text, &crates) {
            found.push(format!("{}:{line}", file.rel));
        }
    }
    assert!(
        found.is_empty(),
        "a `pub use` of another workspace crate outside the façade (`src/`): import the \
         item from its owner instead:\n{}",
        found.join("\n")
    );
    // The check can fail.
    let planted = "pub use reel_core::matching;\npub use reel_archive::{\n    Archive,\n};\n\
                   pub(crate) use reel_core::lock::lock;\npub use insta;\npub use self::x::Y;\n";
    assert_eq!(
        reexports(planted, &crates),
        [
            "1: pub use reel_core::matching;",
            "2: pub use reel_archive::{"
        ]
    );
}

/// The lines of `text` that ignore a lock's poisoning themselves: an
/// inline `unwrap_or_else(|p| p.into_inner())` (after a `lock()`, `read()`,
/// `write()` or a `Condvar` wait), a `PoisonError` named, or a function
/// handing out a guard whose body takes `into_inner` (a `match` copy):
/// each a copy of what `reel_core::lock` does once. Comments may name
/// them.
fn poison_ignored(text: &str) -> Vec<usize> {
    // Spelt in pieces so that this file does not match itself.
    let (guard, poison) = (concat!("Guard", "<"), concat!("into_", "inner"));
    let error = concat!("Poison", "Error");
    let lines: Vec<&str> = text.lines().collect();
    // The argument of the closure in `unwrap_or_else(|p| p.into_inner())`,
    // with the whitespace taken out.
    let inline = |line: &str| {
        let compact: String = line.split_whitespace().collect();
        compact
            .split(concat!("unwrap_or_else", "(|"))
            .skip(1)
            .any(|rest| {
                rest.split_once('|')
                    .is_some_and(|(arg, body)| body.starts_with(&format!("{arg}.{poison}()")))
            })
    };
    (0..lines.len())
        .filter(|&i| {
            let l = lines[i].trim_start();
            let is_fn = l.starts_with("fn ") || l.contains(" fn ");
            let copy = is_fn
                && lines[i..(i + 3).min(lines.len())]
                    .iter()
                    .any(|l| l.contains(guard))
                && lines[i..(i + 5).min(lines.len())]
                    .iter()
                    .any(|l| l.contains(poison));
            let code = !l.starts_with("//");
            copy || (code && (inline(l) || l.contains(error)))
        })
        .map(|i| i + 1)
        .collect()
}

#[test]
fn poison_is_ignored_only_in_the_core_lock_module() {
    let mut sources = Vec::new();
    rust_files(&root(), &mut sources);
    let mut found = Vec::new();
    for path in sources {
        let rel = path.strip_prefix(root()).unwrap_or(&path).to_owned();
        let rel = rel.display().to_string();
        if rel == "core/src/lock.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source reads");
        for line in poison_ignored(&text) {
            found.push(format!("{rel}:{line}"));
        }
    }
    assert!(
        found.is_empty(),
        "poisoning ignored outside `reel_core::lock`: use its `lock`, `read`, `write` or \
         `wait` (`reel::lock::...`) instead: {found:?}"
    );
}

#[test]
fn the_lock_rule_catches_a_copy() {
    let copy = concat!(
        "fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {\n",
        "    match m.lock() {\n        Ok(g) => g,\n        Err(p) => p.into_",
        "inner(),\n    }\n}\n"
    );
    assert_eq!(poison_ignored(copy), vec![1]);
    let method = concat!(
        "impl Line {\n    fn bytes(&self) -> Vec<u8> {\n",
        "        self.state.read().unwrap_or_else(|p| p.into_",
        "inner()).clone()\n    }\n}\n"
    );
    assert_eq!(poison_ignored(method), vec![3]);
    let chained = concat!(
        "let q = self\n    .wake\n    .wait(q)\n    .unwrap_or_else( |e| e.into_",
        "inner() );\n"
    );
    assert_eq!(poison_ignored(chained), vec![4]);
    let named = concat!("use std::sync::Poison", "Error;\n");
    assert_eq!(poison_ignored(named), vec![1]);
    let user = "fn lock_all(&self) -> Vec<u8> {\n    reel::lock::lock(&self.m).clone()\n}\n";
    assert!(poison_ignored(user).is_empty());
    let other = "let bytes = cursor.into_inner();\nlet n = x.unwrap_or_else(|e| e.len());\n";
    assert!(poison_ignored(other).is_empty());
}

/// The top-level modules of the crate whose sources are under `dir`, and
/// the modules each names through `crate::` in its production code
/// (comments, `tests.rs` files and everything from a `#[cfg(test)]` on are
/// left out: a test may reach anywhere).
fn module_edges(
    dir: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&root().join(dir), &mut files);
    let mut edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for path in files {
        let rel = path.strip_prefix(root().join(dir)).expect("under dir");
        let first = rel.components().next().expect("a file");
        let module = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" || module == "main" || rel.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source reads");
        let production = text.split("#[cfg(test)]").next().unwrap_or("");
        let targets = edges.entry(module.clone()).or_default();
        for line in production
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
        {
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty()
                    && name != module
                    && name.chars().next().is_some_and(|c| c.is_lowercase())
                {
                    targets.insert(name);
                }
            }
        }
    }
    edges
}

/// A circle in `edges`, if there is one (as the modules on it).
fn circle(
    edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Option<Vec<String>> {
    fn visit(
        at: &str,
        edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|m| m == at) {
            let mut c = path[i..].to_vec();
            c.push(at.to_string());
            return Some(c);
        }
        if done.contains(at) {
            return None;
        }
        path.push(at.to_string());
        for next in edges.get(at).into_iter().flatten() {
            if let Some(c) = visit(next, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(at.to_string());
        None
    }
    let mut done = Default::default();
    edges
        .keys()
        .find_map(|m| visit(m, edges, &mut Vec::new(), &mut done))
}

/// ARCHITECTURE.md: the modules of the core and of the contract import one
/// another as a DAG (a circle was fact -> spec -> context -> redact -> fact).
#[test]
fn the_modules_of_the_core_and_the_contract_form_no_circle() {
    for dir in ["core/src", "src", "recorder/src/host"] {
        let edges = module_edges(dir);
        assert!(edges.len() > 3, "{dir}: modules found: {edges:?}");
        assert_eq!(
            circle(&edges),
            None,
            "{dir}: modules that import one another in a circle"
        );
    }
    // The check can fail.
    let mut edges = module_edges("core/src");
    assert!(edges["fact"].contains("spec"), "fact names spec: {edges:?}");
    edges
        .entry("spec".into())
        .or_default()
        .insert("fact".into());
    assert!(
        circle(&edges).is_some(),
        "a planted circle spec -> fact -> spec is found"
    );
}

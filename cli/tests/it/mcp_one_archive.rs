//! Two recorders, one archive; readers beside a recorder (issue 41, item
//! 6), with real processes: `reel mcp record` in front of a bare MCP
//! server (tests/paging_server.py, standard library only), and `reel runs`.
//!
//! - A second `reel mcp record` on an archive a first one holds used to
//!   carry its session unrecorded, saying so in one stderr line an MCP
//!   client hides, and exit 0. It now refuses before it starts the
//!   server: exit 1, the archive named, what to do; the first's session
//!   goes on, and once it has ended the archive takes a recorder again.
//! - Read verbs racing a recorder's start and end (three `reel runs`
//!   loops) never cost the recorder its session, and never call the
//!   archive damaged or held: they read through its socket, or wait for
//!   it (before, a reader could read the journal while the recorder
//!   changed it and call the archive damaged). A read the recorder was
//!   answering as it closed still fails, saying so.

use crate::support::{reel_json, require_python};

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const REEL: &str = env!("CARGO_BIN_EXE_reel");

fn server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/paging_server.py")
}

/// A `reel mcp record` child in front of the paging server (the server
/// command prefixed by `sh -c 'touch MARKER; exec ...'`, so a test can
/// tell whether it was started).
struct Recording {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Recording {
    fn start(archive: &Path, marker: &Path) -> Recording {
        let script = format!(
            "touch '{}'; exec python3 '{}'",
            marker.display(),
            server().display()
        );
        let mut child = Command::new(REEL)
            .arg("--archive")
            .arg(archive)
            .args(["mcp", "record", "--", "sh", "-c", &script])
            .env("REEL_CONFIG_DIR", archive.with_file_name("config"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Recording {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    /// One `tools/call` through the proxy; the text answered.
    fn call(&mut self, id: u64) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "first", "arguments": {}}});
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the proxy answered {line:?} ({e})"));
        assert_eq!(answer["id"], id, "{answer}");
        answer["result"]["content"][0]["text"].clone()
    }

    /// Closes the client's side; exit code and standard error.
    fn finish(mut self) -> (Option<i32>, String) {
        drop(self.stdin.take());
        let out = self.child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// The archive's runs, as `reel runs --json` lists them: (id, state).
fn runs(archive: &Path) -> Vec<(String, String)> {
    reel_json(archive, &["runs", "--json"])["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["run_id"].as_str().unwrap().to_owned(),
                r["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_second_recorder_on_a_held_archive_refuses_before_it_starts() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let mut first = Recording::start(&archive, &dir.path().join("first-started"));
    assert_eq!(first.call(1), "hello None");
    // The first holds the archive: its run is running (read through its
    // socket).
    assert_eq!(runs(&archive).len(), 1);
    assert_eq!(runs(&archive)[0].1, "running");

    let marker = dir.path().join("second-started");
    let started = Instant::now();
    let (code, stderr) = Recording::start(&archive, &marker).finish();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "archive {} is held by another recorder",
            archive.display()
        )) && stderr.contains("nothing was started")
            && stderr.contains("give each server its own archive"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the second's server was started");
    assert!(started.elapsed() < Duration::from_secs(20), "it hung");

    // The first's session went on, whole.
    assert_eq!(first.call(2), "hello None");
    let (code, stderr) = first.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let listed = runs(&archive);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].1, "completed");
    let shown = reel_json(&archive, &["show", &listed[0].0, "--json"]);
    let calls = shown["facts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "call.started")
        .count();
    assert_eq!(calls, 2, "both calls of the first session are recorded");

    // Once the first has ended, the archive takes a recorder again.
    let mut third = Recording::start(&archive, &dir.path().join("third-started"));
    assert_eq!(third.call(1), "hello None");
    let (code, stderr) = third.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(runs(&archive).len(), 2);
}

#[test]
fn readers_racing_a_recorder_never_cost_it_its_session() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    // An archive its recorder closed (sealed): what readers open in place.
    let out = Command::new(REEL)
        .arg("--archive")
        .arg(&archive)
        .args(["--color", "never", "demo"])
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = runs(&archive).len();

    // Three `reel runs` loops, back to back, until the recorders are done.
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (stop, archive) = (stop.clone(), archive.clone());
            std::thread::spawn(move || {
                let (mut reads, mut failures) = (0, Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    let out = Command::new(REEL)
                        .arg("--archive")
                        .arg(&archive)
                        .args(["runs", "--json"])
                        .env("REEL_CONFIG_DIR", archive.with_file_name("config"))
                        .output()
                        .unwrap();
                    reads += 1;
                    if !out.status.success() || !out.stderr.is_empty() {
                        failures.push(String::from_utf8_lossy(&out.stderr).into_owned());
                    }
                }
                (reads, failures)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let sessions = 5;
    for i in 0..sessions {
        let mut recording = Recording::start(&archive, &dir.path().join(format!("started-{i}")));
        assert_eq!(recording.call(1), "hello None");
        let (code, stderr) = recording.finish();
        assert_eq!(code, Some(0), "session {i}: {stderr}");
        assert!(
            !stderr.contains("not recorded") && stderr.contains("reel: recorded MCP session"),
            "session {i}: {stderr}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        let (reads, failures) = reader.join().unwrap();
        assert!(reads > 0);
        // A read the recorder was answering when it closed says so (the
        // live client's own limit, not the archive's: run it again);
        // anything else (damage, a held archive) fails the test.
        let other: Vec<_> = failures
            .iter()
            .filter(|f| !f.contains("reading from the recorder failed"))
            .collect();
        assert!(
            other.is_empty(),
            "{} of {reads} reads failed: {failures:?}",
            failures.len()
        );
    }
    let listed = runs(&archive);
    assert_eq!(listed.len(), before + sessions, "{listed:?}");
    let recorded: Vec<_> = listed
        .iter()
        .filter(|(id, _)| id.starts_with("mcp-"))
        .collect();
    assert_eq!(recorded.len(), sessions, "{listed:?}");
    assert!(
        recorded.iter().all(|(_, state)| state == "completed"),
        "{listed:?}"
    );
}

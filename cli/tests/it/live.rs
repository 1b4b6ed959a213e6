//! Live inspection across processes: `reel demo --live-hops 120` records a
//! slow run while holding the archive and serving `<archive>/reel.sock`;
//! meanwhile `reel runs`, `reel show` and `reel tail` (other processes) read
//! it through that socket. `reel tail` must print every fact as it lands,
//! in order, and stop when the run ends.
//!
//! Every wait is bounded; every child is killed if the test fails.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const HOPS: u32 = 120;
const BOUND: Duration = Duration::from_secs(30);

/// A child process, killed (and reaped) when dropped unless it was waited.
struct Guard(Option<Child>);

impl Guard {
    fn spawn(cmd: &mut Command) -> Guard {
        Guard(Some(cmd.spawn().expect("the reel binary starts")))
    }

    /// Waits at most `bound` for the child to exit; kills it after that.
    fn wait(mut self, bound: Duration) -> std::process::ExitStatus {
        let mut child = self.0.take().expect("a child");
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the child did not exit within {bound:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn reel_cmd(archive: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reel"));
    cmd.arg("--archive")
        .arg(archive)
        .args(["--color", "never"])
        .env_remove("REEL_ARCHIVE")
        .env_remove("NO_COLOR");
    cmd
}

/// Runs a short `reel` command to completion (bounded).
fn reel(archive: &Path, args: &[&str]) -> Output {
    let mut cmd = reel_cmd(archive);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut guard = Guard::spawn(&mut cmd);
    let child = guard.0.as_mut().expect("child");
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let readers = std::thread::spawn(move || {
        let mut o = Vec::new();
        let mut e = Vec::new();
        if let Some(s) = out.as_mut() {
            let _ = s.read_to_end(&mut o);
        }
        if let Some(s) = err.as_mut() {
            let _ = s.read_to_end(&mut e);
        }
        (o, e)
    });
    let status = guard.wait(BOUND);
    let (stdout, stderr) = readers.join().expect("readers");
    Output {
        status,
        stdout,
        stderr,
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8")
}

/// Starts `reel tail [run]` and returns a receiver of its whole stdout,
/// read until it exits.
fn start_tail(archive: &Path, run: Option<&str>) -> (Guard, mpsc::Receiver<(String, String)>) {
    let mut cmd = reel_cmd(archive);
    cmd.arg("tail");
    if let Some(r) = run {
        cmd.arg(r);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut guard = Guard::spawn(&mut cmd);
    let child = guard.0.as_mut().expect("child");
    let (mut out, mut err) = (
        child.stdout.take().expect("stdout"),
        child.stderr.take().expect("stderr"),
    );
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut o = String::new();
        let mut e = String::new();
        let _ = out.read_to_string(&mut o);
        let _ = err.read_to_string(&mut e);
        let _ = tx.send((o, e));
    });
    (guard, rx)
}

/// Polls `probe` every 50 ms until it is true, at most `BOUND`.
fn wait_until(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !probe() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Checks what `reel tail demo-live` printed: every hop once, in order,
/// then the call's end and the run's end.
fn check_tail(stdout: &str) {
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("run demo-live "),
        "the header first:\n{stdout}"
    );
    let fact_lines: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.trim_start().starts_with('+'))
        .collect();
    let hop_lines: Vec<(usize, u32)> = fact_lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let at = l.find("progress Patrol hop ")?;
            let rest = &l[at + "progress Patrol hop ".len()..];
            let (n, total) = rest.split_once(" of ")?;
            assert_eq!(total, HOPS.to_string(), "{l}");
            Some((i, n.parse().expect("a hop number")))
        })
        .collect();
    let hops: Vec<u32> = hop_lines.iter().map(|(_, n)| *n).collect();
    assert_eq!(
        hops,
        (1..=HOPS).collect::<Vec<_>>(),
        "every hop exactly once, in order:\n{stdout}"
    );
    // The seqs are gapless and increasing: nothing lost, nothing repeated.
    let seqs: Vec<u64> = fact_lines
        .iter()
        .map(|l| {
            let hash = l.find('#').expect("a seq");
            l[hash + 1..]
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok())
                .expect("a seq number")
        })
        .collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "facts in seq order:\n{stdout}"
    );
    let last_hop = hop_lines.last().expect("hops").0;
    let after: Vec<&str> = fact_lines[last_hop + 1..].to_vec();
    assert_eq!(after.len(), 2, "call.ended then run.ended:\n{stdout}");
    assert!(
        after[0].contains("c1 patrol call.ended ■ ok"),
        "{}",
        after[0]
    );
    assert!(after[1].contains("run.ended completed"), "{}", after[1]);
    // Then the summary.
    assert!(stdout.contains("\ncalls\n  c1 patrol  ok"), "{stdout}");
    assert!(stdout.contains("anomalies none"), "{stdout}");
}

#[test]
fn tail_follows_a_recording_process() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("archive");
    let demo_out = std::fs::File::create(tmp.path().join("demo.out")).expect("file");
    let demo_err = std::fs::File::create(tmp.path().join("demo.err")).expect("file");
    let recorder = Guard::spawn(
        reel_cmd(&dir)
            .args([
                "demo",
                "--live-hops",
                &HOPS.to_string(),
                "--live-pause-ms",
                "50",
            ])
            .stdout(demo_out)
            .stderr(demo_err),
    );

    // The recorder serves its socket once it holds the archive (only then
    // may another process touch the directory without racing its open).
    let sock = dir.join("reel.sock");
    wait_until("the recorder's socket", || {
        std::fs::symlink_metadata(&sock).is_ok_and(|m| m.file_type().is_socket())
    });
    let mode = std::fs::symlink_metadata(&sock)
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the socket is owner-only: {mode:o}");

    // `reel runs` through the socket, until the live run shows as running.
    wait_until("demo-live listed as running", || {
        let out = reel(&dir, &["runs", "--status", "running"]);
        out.status.success()
            && text(&out.stdout)
                .lines()
                .any(|l| l.starts_with("demo-live "))
    });

    // While the recorder holds the archive: show (first, while the run is
    // surely still running), runs and stats work...
    let show = reel(&dir, &["show", "demo-live"]);
    assert!(show.status.success(), "{}", text(&show.stderr));
    let shown = text(&show.stdout);
    assert!(
        shown.starts_with("run demo-live  running"),
        "served live while recording:\n{shown}"
    );
    // A live run's open call and missing end are what a live run looks
    // like, not anomalies; `runs` counts them as `show` and its JSON do.
    assert!(
        shown.contains("\nanomalies none\n"),
        "a live run is not flagged for running:\n{shown}"
    );
    let json = reel(&dir, &["show", "demo-live", "--json"]);
    assert!(json.status.success(), "{}", text(&json.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(doc["run"]["state"], "running", "still running");
    assert_eq!(doc["timeline"]["anomalies"], serde_json::json!([]));
    let listed = reel(&dir, &["runs", "--status", "running", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert_eq!(listed["runs"][0]["run_id"], "demo-live");
    assert_eq!(listed["runs"][0]["anomalies"], 0);
    // Two followers: one names the run, one takes the newest running run.
    let (tail, tail_out) = start_tail(&dir, Some("demo-live"));
    let (tail_newest, tail_newest_out) = start_tail(&dir, None);

    let runs = reel(&dir, &["runs"]);
    assert!(runs.status.success(), "{}", text(&runs.stderr));
    let listing = text(&runs.stdout);
    for id in ["demo-live", "demo-deploy", "demo-audit-degraded"] {
        assert!(listing.contains(id), "{id} in\n{listing}");
    }
    let deploy = reel(&dir, &["show", "demo-deploy", "--json"]);
    assert!(deploy.status.success(), "{}", text(&deploy.stderr));
    let stats = reel(&dir, &["stats"]);
    assert!(stats.status.success(), "{}", text(&stats.stderr));
    // export too: the facts through the socket, the artifact from its file.
    let live_tape = tmp.path().join("deploy-live.tape.jsonl");
    let export = reel(
        &dir,
        &["export", "demo-deploy", "-o", live_tape.to_str().unwrap()],
    );
    assert!(export.status.success(), "{}", text(&export.stderr));
    assert!(
        text(&export.stderr).contains("(22 facts, 1 artifact)"),
        "{}",
        text(&export.stderr)
    );
    // ...and a verb that needs the archive itself says why it cannot.
    let verify = reel(&dir, &["verify"]);
    assert!(!verify.status.success());
    let why = text(&verify.stderr);
    assert!(
        why.contains("a running recorder holds") && !why.contains("panicked"),
        "{why}"
    );

    // The followers print every fact and stop when the run ends.
    let (stdout, stderr) = tail_out
        .recv_timeout(BOUND)
        .unwrap_or_else(|_| panic!("`reel tail demo-live` did not finish within {BOUND:?}"));
    let status = tail.wait(BOUND);
    assert!(
        status.success(),
        "reel tail demo-live: {status}: {stderr}\n{stdout}"
    );
    check_tail(&stdout);
    let (newest, stderr) = tail_newest_out
        .recv_timeout(BOUND)
        .unwrap_or_else(|_| panic!("`reel tail` did not finish within {BOUND:?}"));
    let status = tail_newest.wait(BOUND);
    assert!(status.success(), "reel tail: {status}: {stderr}\n{newest}");
    check_tail(&newest);

    // The recorder ends, releases the archive and removes its socket.
    let status = recorder.wait(BOUND);
    // The tape exported while it ran is the tape of the closed archive.
    let closed_tape = tmp.path().join("deploy-closed.tape.jsonl");
    let export = reel(
        &dir,
        &["export", "demo-deploy", "-o", closed_tape.to_str().unwrap()],
    );
    assert!(export.status.success(), "{}", text(&export.stderr));
    assert_eq!(
        std::fs::read(&live_tape).unwrap(),
        std::fs::read(&closed_tape).unwrap(),
        "exported through the socket, the same tape"
    );
    let demo_err = std::fs::read_to_string(tmp.path().join("demo.err")).expect("stderr");
    assert!(status.success(), "reel demo: {demo_err}");
    assert!(
        demo_err.contains("recorded live run demo-live"),
        "{demo_err}"
    );
    assert!(!sock.exists(), "the socket is removed on shutdown");

    // The archive, read directly now, holds what the followers printed.
    let after = reel(&dir, &["show", "demo-live"]);
    assert!(after.status.success(), "{}", text(&after.stderr));
    let fact_lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.trim_start().starts_with('+'))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(fact_lines(&text(&after.stdout)), fact_lines(&stdout));
    assert!(text(&after.stdout).starts_with("run demo-live  completed"));
}

//! sled locks an archive to one process: a second process opening it gets
//! [`ArchiveError::Locked`] naming the directory, at once (no hang), and can
//! open it once the first process let go.
//!
//! The second process is this test binary run again with only
//! [`child_opens_archive`] selected and [`DIR_VAR`] naming the archive.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reel_archive::{Archive, ArchiveConfig, ArchiveError};

/// Names the archive the child opens; unset, the child test does nothing.
const DIR_VAR: &str = "REEL_LOCK_TEST_DIR";
/// The child's exit codes.
const OPENED: i32 = 0;
const LOCKED: i32 = 3;
const OTHER_ERROR: i32 = 4;
/// How long the child may take before it counts as hung.
const TIMEOUT: Duration = Duration::from_secs(20);

/// The child: opens the archive named by [`DIR_VAR`], prints the outcome and
/// exits with a code saying which it was.
#[test]
fn child_opens_archive() {
    let Some(dir) = std::env::var_os(DIR_VAR) else {
        return;
    };
    let code = match Archive::open(&dir, ArchiveConfig::default()) {
        Ok(archive) => {
            println!("opened {}", archive.dir().display());
            drop(archive);
            OPENED
        }
        Err(e @ ArchiveError::Locked { .. }) => {
            println!("{e}");
            LOCKED
        }
        Err(e) => {
            println!("{e}");
            OTHER_ERROR
        }
    };
    use std::io::Write as _;
    std::io::stdout().flush().expect("flush stdout");
    std::process::exit(code);
}

/// Runs the child on `dir`; returns its exit code, its stdout and how long it
/// took. Fails if it does not exit within [`TIMEOUT`].
fn run_child(dir: &Path) -> (i32, String, Duration) {
    let exe = std::env::current_exe().expect("current test binary");
    let started = Instant::now();
    let mut child = Command::new(exe)
        // This test's name in the one test binary: its module path.
        .args(["--exact", "lock::child_opens_archive", "--nocapture"])
        .env(DIR_VAR, dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the second process did not return within {TIMEOUT:?}: opening a held archive hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("piped stdout")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    let code = status
        .code()
        .unwrap_or_else(|| panic!("the child died by a signal: {status:?}; stderr: {stderr}"));
    (code, format!("{stdout}{stderr}"), took)
}

#[test]
fn a_held_archive_is_refused_at_once_and_free_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(dir.path(), ArchiveConfig::default()).expect("archive opens");
    archive.flush().expect("flush");

    let (code, out, took) = run_child(dir.path());
    assert_eq!(code, LOCKED, "the child should get Locked; it said:\n{out}");
    let shown = dir.path().display().to_string();
    assert!(
        out.contains(&shown),
        "the error names the archive {shown}:\n{out}"
    );
    assert!(
        out.contains("held open by another process"),
        "the error says why:\n{out}"
    );
    // Well under the timeout: try-lock, not a wait (the child's start-up is
    // most of this).
    assert!(took < Duration::from_secs(10), "took {took:?}");

    drop(archive);
    let (code, out, _) = run_child(dir.path());
    assert_eq!(
        code, OPENED,
        "once the first process let go, the archive opens; the child said:\n{out}"
    );
    assert!(out.contains(&format!("opened {shown}")), "{out}");

    // And this process can open it again after the child closed it.
    Archive::open(dir.path(), ArchiveConfig::default()).expect("archive opens again");
}

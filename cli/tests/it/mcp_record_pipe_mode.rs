//! `reel mcp record` drives its stdin and stdout pipes through the
//! reactor, which makes them non-blocking. That mode belongs to the open
//! pipe, shared with whoever started reel (a script's next command writing
//! the same pipe would get `EAGAIN`), so reel gives the blocking mode back
//! when it is done.

#![cfg(target_os = "linux")]

use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

/// Whether `fd` of this process is non-blocking, from `/proc` (the
/// `flags` of its open file description, octal).
fn nonblocking(fd: &impl AsRawFd) -> bool {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).unwrap();
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
        .unwrap();
    flags & 0o4000 != 0
}

#[test]
fn reel_mcp_record_leaves_its_pipes_blocking() {
    // The client hangs up first; then the server goes away first while the
    // client's pipe is still open (reel's read of it still pending).
    for (server, client_first) in [("cat", true), ("true", false)] {
        check(server, client_first);
    }
}

fn check(server: &str, client_first: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (stdin_read, stdin_write) = std::io::pipe().unwrap();
    let (stdout_read, stdout_write) = std::io::pipe().unwrap();
    // The same open pipes the child gets (dup'ed descriptors share mode).
    let stdin_shared = stdin_read.try_clone().unwrap();
    let stdout_shared = stdout_write.try_clone().unwrap();
    assert!(!nonblocking(&stdin_shared) && !nonblocking(&stdout_shared));
    // Kept open while reel runs unless the client is to hang up first.
    let stdin_write = (!client_first).then_some(stdin_write);
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["--archive"])
        .arg(dir.path().join("archive"))
        .args(["mcp", "record", "--", server])
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .stdin(Stdio::from(stdin_read))
        .stdout(Stdio::from(stdout_write))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    drop(stdin_write);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("recorded MCP session"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(stdout_read);
    assert!(
        !nonblocking(&stdin_shared),
        "{server}: reel left its stdin pipe non-blocking"
    );
    assert!(
        !nonblocking(&stdout_shared),
        "{server}: reel left its stdout pipe non-blocking"
    );
}

//! What the modules of this test binary share: running the `reel`
//! binary, copying an archive, the Python SDK a test needs, reading the
//! proxy's address.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// `reel --color never`, as the tests run it: nothing from the user's
/// environment (no `REEL_ARCHIVE`, fingerprint key or `NO_COLOR`), its
/// configuration directory `config`.
pub fn reel_command(config: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reel"));
    cmd.args(["--color", "never"])
        .env_remove("REEL_ARCHIVE")
        .env_remove("REEL_FINGERPRINT_KEY")
        .env_remove("NO_COLOR")
        .env("REEL_CONFIG_DIR", config);
    cmd
}

/// Runs `reel --color never ARGS` (see [`reel_command`]) to its end.
pub fn reel(config: &Path, args: &[&str]) -> Output {
    reel_command(config)
        .args(args)
        .output()
        .expect("the reel binary runs")
}

/// Runs `reel --archive ARCHIVE ARGS`, which must succeed and print JSON
/// (`show --json`, say), with the configuration directory beside the
/// archive; returns that JSON.
pub fn reel_json(archive: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(archive)
        .args(args)
        .env("REEL_CONFIG_DIR", archive.with_file_name("config"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reel {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs `reel --archive ARCHIVE export RUN -o TAPE` (the configuration
/// directory beside the archive), which must succeed.
pub fn export_tape(archive: &Path, run_id: &str, tape: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(archive)
        .args(["export", run_id, "-o"])
        .arg(tape)
        .env("REEL_CONFIG_DIR", archive.with_file_name("config"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reel export {run_id}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Fails, saying what to install, unless `python3` imports the official
/// Python MCP SDK (the server and the client).
pub fn require_python() {
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/requirements.txt");
    match Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver, mcp.client"])
        .current_dir(std::env::temp_dir())
        .output()
    {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "the official Python MCP SDK is missing: install it with `pip install -r {}` ({})",
            requirements.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!(
            "python3 is missing ({e}): install Python 3.10 or later, then `pip install -r {}`",
            requirements.display()
        ),
    }
}

/// Copies the directory `from` to `to`, recursively (an archive, say, to
/// damage the copy).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Every file under `dir`, at any depth.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// Reads the standard error of `reel mcp record --listen` (or `reel mcp
/// mock --listen`) up to the line that says where it listens (`reel:
/// recording MCP traffic to UPSTREAM at http://ADDR/mcp (...)`, `reel:
/// serving the recorded MCP session S at http://ADDR/mcp (...)`); returns
/// that URL, the last one on the line, and everything said until then.
pub fn proxy_url(stderr: &mut impl BufRead) -> (String, String) {
    let mut said = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the proxy never said where it listens: {said}"
        );
        said.push_str(&line);
        if line.starts_with("reel: recording MCP traffic to ")
            || line.starts_with("reel: serving the recorded MCP session ")
        {
            let url = line
                .split_whitespace()
                .rev()
                .find(|w| w.starts_with("http://"))
                .expect("an address")
                .to_owned();
            return (url, said);
        }
    }
}

/// A child process killed when the test is done with it.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port (bound, then released for a server to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts connections on `port` (`what`, a server
/// starting); a bounded wait, not a timing assertion.
pub fn wait_listening(port: u16, server: &mut Killed, what: &str) {
    for _ in 0..1200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = server.0.try_wait() {
            panic!("{what} exited ({status}) before it listened");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{what} did not listen on port {port} within a minute");
}

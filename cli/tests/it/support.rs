//! What the modules of this test binary share: running the `reel`
//! binary, copying an archive, the Python SDK a test needs, reading the
//! proxy's address, a bare stdio MCP client.

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

/// A bare MCP client over stdio: line-delimited JSON-RPC written to a
/// child's (`reel mcp record -- SERVER`, say) standard input and read
/// from its standard output, for the cases an SDK client hides (the
/// lines that are not answers, ids it would not send).
pub struct StdioClient {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl StdioClient {
    /// Spawns `cmd` with piped standard streams.
    pub fn spawn(mut cmd: Command) -> StdioClient {
        use std::process::Stdio;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        StdioClient {
            child,
            stdin,
            stdout,
        }
    }

    /// Writes `message` as one line.
    pub fn send(&mut self, message: Value) {
        use std::io::Write;
        let mut line = message.to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().expect("standard input is open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Reads until the response to request `id` (a message with that id
    /// and no method); also the lines read on the way.
    pub fn until_answer(&mut self, id: u64) -> (Value, Vec<String>) {
        let mut seen = Vec::new();
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the server ended before answering {id}: {seen:?}");
            match serde_json::from_str::<Value>(&line) {
                Ok(m) if m["id"] == id && m.get("method").is_none() => return (m, seen),
                _ => seen.push(line),
            }
        }
    }

    /// `initialize` at 2025-11-25 as client `name`: the answer and the
    /// lines before it. `notifications/initialized` is the caller's, so
    /// it may look at the answer first.
    pub fn initialize(&mut self, name: &str) -> (Value, Vec<String>) {
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": name, "version": "1"}}}),
        );
        self.until_answer(1)
    }

    /// Hangs up (closes standard input) and waits for the child to end:
    /// it must end well; returns its standard error.
    pub fn hang_up(mut self) -> String {
        drop(self.stdin.take());
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut stderr).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}: {stderr}");
        stderr
    }
}

//! `reel mcp record --max-body BYTES`, through the real binary.
//!
//! - With `--listen`: a request body over the limit is refused with 413
//!   naming it, before the upstream is asked (here there is none: a 502
//!   would say it was).
//! - On stdio: a server's 96 MiB line under a 1 MiB limit reaches the
//!   client whole while the proxy never holds it (its peak resident memory
//!   stays far below the line), and the session goes on: the next call is
//!   recorded, the big one is not.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

#[test]
fn a_body_over_max_body_is_refused_by_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    // A port nobody listens on: bound, then closed.
    let upstream = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut proxy = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["--color", "never", "--archive"])
        .arg(dir.path().join("archive"))
        .args([
            "mcp",
            "record",
            "--listen",
            "127.0.0.1:0",
            "--max-body",
            "100",
        ])
        .arg("--upstream")
        .arg(format!("http://{upstream}/mcp"))
        .env("REEL_CONFIG_DIR", dir.path().join("config"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(proxy.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:") && !w.contains(&upstream.to_string()))
        .unwrap_or_else(|| panic!("no listen URL in {line:?}"))
        .to_owned();
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let ask = |len: usize| {
        let mut s = TcpStream::connect(&addr).unwrap();
        write!(
            s,
            "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n{}",
            "x".repeat(len.min(100))
        )
        .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    let refused = ask(1000);
    assert!(refused.starts_with("HTTP/1.1 413"), "{refused}");
    assert!(refused.contains("limit of 100 bytes"), "{refused}");
    // Under the limit it is forwarded (and the missing upstream named).
    let forwarded = ask(50);
    assert!(forwarded.starts_with("HTTP/1.1 502"), "{forwarded}");
    let _ = proxy.kill();
    let _ = proxy.wait();
}

/// Peak resident memory of process `pid`, in bytes (`VmHWM`).
#[cfg(target_os = "linux")]
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// The limit the stdio test gives `--max-body`.
const LIMIT: &str = "1048576";

#[cfg(target_os = "linux")]
#[test]
fn a_line_over_max_body_on_stdio_is_passed_whole_and_never_held() {
    const BIG: usize = 96 << 20;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let archive = dir.path().join("archive");
    // A server that answers "big" with one 96 MiB line and anything else
    // with a small result.
    let server = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m["params"]["name"] == "big":
        text = "x" * int(sys.argv[1])
    else:
        text = "small"
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": text}]}}) + "\n")
    sys.stdout.flush()
"#;
    let mut proxy = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["--color", "never", "--archive"])
        .arg(&archive)
        .args(["mcp", "record", "--max-body", LIMIT])
        .args(["--", "python3", "-c", server])
        .arg(BIG.to_string())
        .env("REEL_CONFIG_DIR", &config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to = proxy.stdin.take().unwrap();
    let mut from = BufReader::new(proxy.stdout.take().unwrap());
    let call = |id: u32, name: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{name}\",\"arguments\":{{}}}}}}\n"
        )
    };
    to.write_all(call(1, "big").as_bytes()).unwrap();
    to.flush().unwrap();
    let mut big = Vec::new();
    from.read_until(b'\n', &mut big).unwrap();
    assert!(
        big.len() > BIG,
        "the whole line came through: {} bytes",
        big.len()
    );
    let answer: serde_json::Value = serde_json::from_slice(&big).unwrap();
    assert_eq!(answer["id"], 1);
    assert_eq!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .map(str::len),
        Some(BIG)
    );
    // The proxy never held the line: its peak is a fraction of it.
    let peak = peak_rss(proxy.id());
    assert!(
        peak < (BIG as u64) / 2,
        "the proxy's peak resident memory was {peak} bytes for a {BIG}-byte line"
    );
    // The session goes on.
    to.write_all(call(2, "small").as_bytes()).unwrap();
    to.flush().unwrap();
    let mut small = String::new();
    from.read_line(&mut small).unwrap();
    assert!(
        small.contains("\"id\": 2") && small.contains("small"),
        "{small}"
    );
    drop(to);
    let out = proxy.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "a message from the server over {LIMIT} bytes was passed through unrecorded (--max-body)"
        )),
        "{stderr}"
    );
    // Recorded: the small call's result, not the big one's.
    let run = stderr
        .split_whitespace()
        .skip_while(|w| *w != "session")
        .nth(1)
        .unwrap_or_else(|| panic!("no recorded session named in {stderr}"));
    let shown = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["--color", "never", "--archive"])
        .arg(&archive)
        .args(["export", run, "-o", "-"])
        .env("REEL_CONFIG_DIR", &config)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert!(text.contains("small"), "{text}");
    assert!(!text.contains("xxxxxxxx"), "the big result is not recorded");
}

//! `reel mcp record --listen --max-body BYTES`, through the real binary: a
//! request body over the limit is refused with 413 naming it, before the
//! upstream is asked (here there is none: a 502 would say it was).

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
            "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n{}",
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

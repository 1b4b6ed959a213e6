//! The auth story of `reel mcp record --listen`, in front of a FastMCP
//! (4.x) server protected by a bearer token (tests/fastmcp_auth_server.py:
//! a static token verifier behind FastMCP's RemoteAuthProvider). A client
//! with the token works through the proxy; one without gets the
//! upstream's 401 with its `WWW-Authenticate` challenge untouched; the
//! RFC 9728 protected-resource metadata is forwarded as the upstream
//! wrote it (its `resource` is the upstream's URL, not the proxy's: reel
//! does not rewrite bodies it relays, and the token the client gets is
//! for the upstream); and the token is in no file of the archive or of
//! an exported tape, in plain, hex or base64.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::mcp_mock_http::{message, raw};
use crate::mcp_record_rules::http_proxy;
use crate::mcp_secrets_wire::assert_absent;
use crate::support::{free_port, reel_json, require_python, wait_listening, Killed};

const TOKEN: &str = "upstream-bearer-3f9a1c7e5b2d4f60a8c9e1b3d5f7a9c2";

/// tests/fastmcp_auth_server.py on a free port, once it listens; its
/// MCP URL.
fn protected_fastmcp() -> (Killed, String) {
    let port = free_port();
    let mut server = Killed(
        Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fastmcp_auth_server.py"))
            .args([&port.to_string(), TOKEN])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(port, &mut server, "the FastMCP auth server");
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// A GET of `path` at `addr`: status, head and body.
fn get(addr: &str, path: &str) -> (u16, String, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_owned(), body.to_owned())
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn a_bearer_protected_server_works_through_the_proxy_and_its_token_is_in_no_file() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let (_server, upstream) = protected_fastmcp();
    let upstream_addr = upstream
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let (mut proxy, addr) = http_proxy(&archive, &upstream, &[]);

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "auth-test", "version": "1"}}});

    // Without the token: the upstream's 401 and its challenge, untouched
    // (it names the upstream's metadata URL, as the upstream wrote it).
    let (status, head, _) = raw(&addr, "POST", "", Some(&init));
    assert_eq!(status, 401, "{head}");
    let (direct_status, direct_head, _) = raw(&upstream_addr, "POST", "", Some(&init));
    assert_eq!(direct_status, 401);
    let challenge = header(&head, "www-authenticate").expect("a challenge");
    assert_eq!(Some(challenge), header(&direct_head, "www-authenticate"));
    let metadata_url = format!("http://{upstream_addr}/.well-known/oauth-protected-resource/mcp");
    assert!(challenge.contains(&metadata_url), "{challenge}");

    // The protected-resource metadata through the proxy is the upstream's,
    // byte for byte: its `resource` is the upstream's URL.
    let path = "/.well-known/oauth-protected-resource/mcp";
    let (status, _, body) = get(&addr, path);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, get(&upstream_addr, path).2);
    let metadata: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(metadata["resource"], upstream.as_str());
    assert_eq!(
        metadata["authorization_servers"][0],
        "https://auth.example.com"
    );

    // With the token: the session works through the proxy.
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let (status, head, body) = raw(&addr, "POST", &auth, Some(&init));
    assert_eq!(status, 200, "{head}{body}");
    let session = header(&head, "mcp-session-id")
        .expect("a session id")
        .to_owned();
    let headers =
        format!("{auth}MCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: {session}\r\n");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = raw(&addr, "POST", &headers, Some(&initialized));
    assert!(status == 202 || status == 200, "{status}");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "through the proxy"}}});
    let (status, head, body) = raw(&addr, "POST", &headers, Some(&call));
    assert_eq!(status, 200, "{head}{body}");
    let answer = message(&body);
    assert_eq!(
        answer["result"]["content"][0]["text"], "through the proxy",
        "{answer}"
    );

    let sent = Command::new("kill")
        .args(["-INT", &proxy.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    assert!(proxy.0.wait().unwrap().success());

    let runs = reel_json(&archive, &["runs", "--json"]);
    let run_id = runs["runs"][0]["run_id"].as_str().unwrap().to_owned();
    let shown = reel_json(&archive, &["show", &run_id, "--json"]);
    let echo = shown["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "call.started" && f["data"]["tool_name"] == "echo")
        .expect("the echo call is recorded");
    assert_eq!(echo["data"]["args"]["text"], "through the proxy");
    assert!(!shown.to_string().contains(TOKEN));

    let tape = dir.path().join("auth.tape.jsonl");
    crate::support::export_tape(&archive, &run_id, &tape);
    assert_eq!(assert_absent(&tape, &[TOKEN]), 1);
    assert!(assert_absent(&archive, &[TOKEN]) > 0);
}

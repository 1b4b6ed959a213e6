//! Secrets in the new places of the 2026-07-28 wire, through `reel mcp
//! record --listen` in front of the FastMCP server over streamable HTTP
//! (tests/fastmcp_server.py): a `tools/call` with `secureArguments`
//! (SEP-3221), an `Authorization` bearer token, a `DPoP` proof, an
//! `Mcp-Param-*` copy of an argument (SEP-2243), a `whsec_` webhook
//! secret and a secure argument's value also under plain keys, which the
//! server echoes back, then the same
//! call in a batch (refused, and recorded as sent). The client gets
//! every byte as the server sent it; the record holds each secure
//! argument as a credential (need `secureArguments/NAME`, a keyed
//! fingerprint), and neither the archive's files nor the exported tape
//! hold any of the values: plain, base64 (at every alignment) or hex.

use std::path::Path;
use std::process::Command;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::mcp_mock_http::{message, raw};
use crate::mcp_record_rules::{fastmcp_http, http_proxy};
use crate::support::{reel_json, require_python};

const TENANT: &str = "tenant-4be1c0de-93aa-4f1e-b7c2-secure-arg";
const BEARER: &str = "bearer-6c1f0e2a9d8b7c6a5f4e3d2c1b0a9f8e";
const DPOP: &str = "eyJ0eXAiOiJkcG9wK2p3dCJ9.dpop-proof-5e4d3c2b1a";
const WEBHOOK: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The forms a value may take in bytes at rest: itself, lower-case hex,
/// and base64 at each of the three alignments (the whole blocks only).
pub(crate) fn forms(secret: &str) -> Vec<(String, Vec<u8>)> {
    let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
    let mut out = vec![
        ("plain".to_owned(), secret.as_bytes().to_vec()),
        ("hex".to_owned(), hex.into_bytes()),
    ];
    for shift in 0..3 {
        let padded = format!("{}{secret}", "x".repeat(shift));
        let encoded = STANDARD.encode(padded);
        // Skip the blocks holding the padding, and the last (its end
        // depends on what follows).
        let from = if shift == 0 { 0 } else { 4 };
        let to = encoded.len() - 4;
        out.push((
            format!("base64+{shift}"),
            encoded.as_bytes()[from..to].to_vec(),
        ));
    }
    out
}

pub(crate) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// No file under `path` (or `path` itself, a file) holds any form of any
/// of `secrets`; how many files were read.
pub(crate) fn assert_absent(path: &Path, secrets: &[&str]) -> usize {
    if path.is_file() {
        let bytes = std::fs::read(path).unwrap();
        for secret in secrets {
            for (form, needle) in forms(secret) {
                assert!(
                    !contains(&bytes, &needle),
                    "{secret:?} ({form}) is in {}",
                    path.display()
                );
            }
        }
        return 1;
    }
    std::fs::read_dir(path)
        .unwrap()
        .map(|e| assert_absent(&e.unwrap().path(), secrets))
        .sum()
}

#[test]
fn secure_arguments_auth_headers_param_copies_and_webhook_secrets_never_reach_the_record() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let (_server, upstream) = fastmcp_http();
    let (mut proxy, addr) = http_proxy(&archive, &upstream, &[]);

    let version = "MCP-Protocol-Version: 2025-11-25\r\n";
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "secrets-test", "version": "1"}}});
    let auth = format!("Authorization: Bearer {BEARER}\r\nDPoP: {DPOP}\r\n");
    let (status, head, body) = raw(&addr, "POST", &auth, Some(&init));
    assert_eq!(status, 200, "{head}{body}");
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("a session id")
        .trim()
        .to_owned();
    let headers = format!("{auth}{version}Mcp-Session-Id: {session}\r\n");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = raw(&addr, "POST", &headers, Some(&initialized));
    assert!(status == 202 || status == 200, "{status}");

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "echo",
        "arguments": {"text": TENANT, "note": WEBHOOK},
        "secureArguments": {"tenant_id": TENANT, "region": {"zone": 3}},
    }});
    let named = format!(
        "{headers}Mcp-Method: tools/call\r\nMcp-Name: echo\r\nMcp-Param-Note: {WEBHOOK}\r\n"
    );
    let (status, head, body) = raw(&addr, "POST", &named, Some(&call));
    assert_eq!(status, 200, "{head}{body}");
    let answer = message(&body);
    // The traffic is the server's, unchanged: the echo holds the secret.
    let echoed = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(echoed.contains(WEBHOOK), "{answer}");

    // A batch is refused and recorded (`mcp:refused`, the body as sent):
    // the secure arguments in it are redacted by their key.
    let batch = json!([call]);
    let (status, _, body) = raw(&addr, "POST", &headers, Some(&batch));
    assert_eq!(status, 400, "{body}");

    let sent = Command::new("kill")
        .args(["-INT", &proxy.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    assert!(proxy.0.wait().unwrap().success());

    let runs = reel_json(&archive, &["runs", "--json"]);
    let run_id = runs["runs"][0]["run_id"].as_str().unwrap().to_owned();
    let shown = reel_json(&archive, &["show", &run_id, "--json"]);
    let facts = shown["facts"].as_array().unwrap();
    let echo = facts
        .iter()
        .find(|f| f["kind"] == "call.started" && f["data"]["tool_name"] == "echo")
        .expect("the echo call");
    let call_id = echo["call"].as_str().unwrap();
    // The model's arguments as sent, the webhook secret and the secure
    // value the client also put under a plain key redacted (the secure
    // value is known before `call.started` is filed); the secure
    // arguments apart, as credentials.
    for key in ["text", "note"] {
        let value = echo["data"]["args"][key].as_str().unwrap();
        assert!(value.starts_with("[REDACTED"), "{key}: {value}");
    }
    let resolved: Vec<(String, String)> = facts
        .iter()
        .filter(|f| f["kind"] == "credential.resolved" && f["call"] == call_id)
        .map(|f| {
            (
                f["data"]["need"].as_str().unwrap().to_owned(),
                f["data"]["fingerprint"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let needs: Vec<&str> = resolved.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        needs,
        ["secureArguments/tenant_id", "secureArguments/region"],
        "{resolved:?}"
    );
    for (_, fingerprint) in &resolved {
        assert!(fingerprint.starts_with("hmac-sha256:"), "{fingerprint}");
    }
    assert_ne!(resolved[0].1, resolved[1].1);

    let refused = facts
        .iter()
        .find(|f| f["kind"] == "call.started" && f["data"]["tool_name"] == "mcp:refused")
        .expect("the refused batch");
    let kept = &refused["data"]["args"]["message"][0]["params"]["secureArguments"];
    assert!(
        kept.as_str().is_some_and(|m| m.starts_with("[REDACTED")),
        "{refused}"
    );

    let tape = dir.path().join("secrets.tape.jsonl");
    crate::support::export_tape(&archive, &run_id, &tape);
    let tape_text = std::fs::read_to_string(&tape).unwrap();
    assert!(tape_text.contains("secureArguments/tenant_id"));
    assert_eq!(assert_absent(&tape, &[TENANT, BEARER, DPOP, WEBHOOK]), 1);
    assert!(assert_absent(&archive, &[TENANT, BEARER, DPOP, WEBHOOK]) > 0);
    // The shown record too (what a reader sees).
    let shown_text = Value::to_string(&shown);
    for secret in [TENANT, BEARER, DPOP, WEBHOOK] {
        assert!(!shown_text.contains(secret), "{secret} is shown");
    }
}

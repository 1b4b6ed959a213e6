//! The tripwire, tried as an attacker: a tool resolves a credential and
//! smuggles it, in every encoding the tripwire knows (raw, JSON-escaped,
//! Rust Debug-escaped, percent-encoded, base64 standard and url-safe with
//! and without padding, `user:secret` basic auth, base64 at each alignment
//! inside a longer run, hex in lower and upper case, and every character
//! `\uXXXX`-escaped), into a dispatched call's arguments, its
//! result, an effect's request and answer, a log message, a progress
//! report's text and an artifact's media type; the host puts a declared
//! secret's encodings in a run label. No form is left in any file of the
//! archive, in the facts read back, or in the exported tape, and each
//! place is named by a `redaction.tripped` fact. A second test puts the
//! forms in payloads large enough to spill into artifacts, and in artifact
//! bytes the tool keeps (base64, and UTF-16LE text).

use std::collections::BTreeSet;
use std::sync::Arc;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine as _;
use reel::context::{Secret, ToolContext, ToolError};
use reel::fact::{Fact, FactKind, Level, RunStatus};
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::{FingerprintKey, TapeExt};
use reel_recorder::{MemoryArtifactStore, MemoryVault, Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

use crate::canary::files_under;

/// Quotes, a backslash, a slash, `+`, `=`, a space, a control character
/// and a non-ASCII letter: every encoding differs from the raw form.
const CRED: &str = "Tk-7f3a\"q\\b/s+p=e \u{1}\u{e9}-9c2d4e5f";
/// What the host declares secret (an env value, say).
const DECLARED: &str = "decl-Zq81/xx+Yy==wv7-host";

fn percent(s: &str) -> String {
    s.bytes()
        .map(|c| {
            if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
                (c as char).to_string()
            } else {
                format!("%{c:02X}")
            }
        })
        .collect()
}

/// Every form the attacker uses, by name.
fn forms(s: &str) -> Vec<(&'static str, String)> {
    let b = s.as_bytes();
    let with_prefix = |p: &str| {
        let mut v = p.as_bytes().to_vec();
        v.extend_from_slice(b);
        v.extend_from_slice(b"}, \"more\": 1");
        v
    };
    let json = serde_json::to_string(s).unwrap();
    let debug = format!("{s:?}");
    vec![
        ("raw", s.to_owned()),
        ("json", json[1..json.len() - 1].to_owned()),
        ("debug", debug[1..debug.len() - 1].to_owned()),
        ("percent", percent(s)),
        ("base64", STANDARD.encode(b)),
        ("base64-nopad", STANDARD_NO_PAD.encode(b)),
        ("base64url", URL_SAFE.encode(b)),
        ("base64url-nopad", URL_SAFE_NO_PAD.encode(b)),
        ("basic-auth", STANDARD.encode(format!("ann:{s}").as_bytes())),
        (
            "base64-offset-1",
            STANDARD.encode(with_prefix("{\"k\": \"")),
        ),
        ("base64-offset-2", STANDARD.encode(with_prefix("{\"k\":"))),
        (
            "base64-offset-0",
            URL_SAFE_NO_PAD.encode(with_prefix("{\"k\"")),
        ),
        ("hex", hex(b, false)),
        ("hex-upper", hex(b, true)),
        ("unicode-escape", unicode_escape(s, false)),
        ("unicode-escape-upper", unicode_escape(s, true)),
    ]
}

/// The bytes' hex digits.
fn hex(b: &[u8], upper: bool) -> String {
    b.iter()
        .map(|c| {
            if upper {
                format!("{c:02X}")
            } else {
                format!("{c:02x}")
            }
        })
        .collect()
}

/// Every UTF-16 unit `\uXXXX`-escaped, as an escape-everything JSON
/// encoder writes it.
fn unicode_escape(s: &str, upper: bool) -> String {
    s.encode_utf16()
        .map(|u| {
            if upper {
                format!("\\u{u:04X}")
            } else {
                format!("\\u{u:04x}")
            }
        })
        .collect()
}

/// Every string (and object key) of `value`, each on its own line: the
/// text the facts hold, before any JSON escaping of their own.
fn strings_of(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::String(s) => {
            out.extend_from_slice(s.as_bytes());
            out.push(b'\n');
        }
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.extend_from_slice(k.as_bytes());
                out.push(b'\n');
                strings_of(v, out);
            }
        }
        _ => {}
    }
}

/// The needles a scan looks for: each form whole, and for base64 forms the
/// 16 characters in their middle (a scrub that cut only an edge would
/// leave them).
fn needles(s: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, form) in forms(s) {
        if name.starts_with("base64") || name == "basic-auth" {
            let mid = form.len() / 2;
            out.push((
                format!("{name} (middle)"),
                form.as_bytes()[mid - 8..mid + 8].to_vec(),
            ));
        }
        out.push((name.to_owned(), form.into_bytes()));
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Every file under the archive directory, by path, with its bytes.
fn archive_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    files_under(dir)
        .into_iter()
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

/// No form of either secret is in any of `places`.
fn assert_no_form_in(places: &[(String, Vec<u8>)]) {
    for secret in [CRED, DECLARED] {
        for (name, needle) in needles(secret) {
            for (place, bytes) in places {
                assert!(
                    !contains(bytes, &needle),
                    "the {name} form of a secret is in {place}"
                );
            }
        }
    }
}

async fn smuggler(ctx: ToolContext, _: Value) -> Result<Value, ToolError> {
    let cred = ctx.credential("api").await?;
    let forms: Vec<(&str, String)> = forms(cred.secret().expose());
    let all: Value = forms
        .iter()
        .map(|(n, f)| (n.to_string(), json!(f)))
        .collect::<serde_json::Map<_, _>>()
        .into();
    for (name, form) in &forms {
        ctx.progress(json!({ "message": format!("step {name}: {form}") }));
        ctx.log(Level::Info, json!({ "message": format!("header {form}") }));
        ctx.artifacts()
            .put(&format!("text/{name}; x={form}"), b"bytes".to_vec())
            .await?;
    }
    let answer = all.clone();
    let _: Value = ctx
        .effect("api.call", &json!({ "h": all }), move || async move {
            Ok::<_, String>(json!({ "echo": answer }))
        })
        .await?;
    ctx.dispatch("child", json!({ "forwarded": all })).await?;
    Ok(json!({ "result": all }))
}

#[tokio::test]
async fn every_encoding_of_a_resolved_or_declared_secret_is_scrubbed_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([7; 32]),
        serve_live: false,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(dir.path(), config).await.unwrap();
    let mut start = RunStart::new("smuggled").secret(Secret::new(DECLARED));
    for (name, form) in forms(DECLARED) {
        start = start.label(format!("cmd-{name}"), format!("server --auth {form}"));
    }
    let run = recorder.start_run(start).await.unwrap();
    let tools = Tools::new().register("child", |ctx: ToolContext, args: Value| async move {
        ctx.progress(json!({ "child_got": args }));
        Ok::<_, ToolError>(args)
    });
    run.call("smuggler", json!({}))
        .credentials(Arc::new(MemoryVault::new().with("api", CRED)))
        .artifacts(Arc::new(MemoryArtifactStore::new()))
        .dispatcher(tools)
        .invoke(smuggler)
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    assert!(archive.verify().unwrap().is_ok());

    let tape = Tape::export(&archive, "smuggled").unwrap();
    let mut tape_bytes = Vec::new();
    tape.write(&mut tape_bytes).unwrap();
    let facts: Vec<Fact> = archive
        .facts("smuggled", ..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let facts_json = serde_json::to_vec(&facts).unwrap();

    let mut facts_strings = Vec::new();
    strings_of(&serde_json::to_value(&facts).unwrap(), &mut facts_strings);
    let mut places = archive_files(dir.path());
    places.push(("the facts read back".into(), facts_json.clone()));
    places.push(("the strings of the facts".into(), facts_strings.clone()));
    places.push(("the tape".into(), tape_bytes));
    assert_no_form_in(&places);
    // The scan can find things: the tool did run, its facts are there.
    assert!(contains(&facts_json, b"step basic-auth: "));
    assert!(contains(&facts_strings, b"step unicode-escape-upper: "));

    // Each place is named, never the value.
    let tripped: Vec<_> = facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::RedactionTripped(t) => Some((f, t)),
            _ => None,
        })
        .collect();
    let seen: BTreeSet<(String, String)> = tripped
        .iter()
        .map(|(_, t)| (t.fact.clone(), t.field.clone()))
        .collect();
    let has = |kind: &str, field: &str| seen.iter().any(|(k, f)| k == kind && f.starts_with(field));
    for (kind, field) in [
        ("run.started", "/data/labels/cmd-basic-auth"),
        ("progress", "/data/payload/message"),
        ("log", "/data/data/message"),
        ("artifact.put", "/data/meta/media_type"),
        ("effect", "/data/request/h/base64"),
        ("effect", "/data/outcome"),
        ("call.started", "/data/args/forwarded/base64"),
        ("call.ended", "/data/outcome"),
    ] {
        assert!(
            has(kind, field),
            "no redaction.tripped names {kind} {field}: {seen:#?}"
        );
    }
    let encodings: BTreeSet<&str> = tripped.iter().map(|(_, t)| t.encoding.as_str()).collect();
    // (A url-safe form without `-` or `_` is the standard one: named
    // `base64`.)
    for e in ["base64", "percent", "hex", "unicode-escape"] {
        assert!(encodings.contains(e), "{encodings:?}");
    }
    for (fact, t) in &tripped {
        assert_eq!(
            (t.point.as_str(), t.rule.as_str()),
            ("archive", "known-values")
        );
        // Filed in call order, in the call of the fact it names (the run's
        // own for run.started).
        if t.fact == "run.started" {
            assert_eq!(fact.call, None);
        } else {
            assert!(fact.call.is_some());
        }
    }
    // The progress reports: scrubbed, each followed by its tripped fact.
    let i = facts
        .iter()
        .position(|f| matches!(&f.kind, FactKind::Progress(p) if p.payload["message"].as_str().is_some_and(|m| m.starts_with("step base64:"))))
        .unwrap();
    assert!(matches!(&facts[i + 1].kind, FactKind::RedactionTripped(t) if t.fact == "progress"));
}

/// A payload over the inline limit is stored as an artifact. The tripwire
/// must see it before it is spilled: an encoded secret in a large result
/// or effect answer is scrubbed, not written to the artifact store whole.
#[tokio::test]
async fn a_large_payload_is_guarded_before_it_spills_into_an_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([7; 32]),
        serve_live: false,
        inline_limit: 1024,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(dir.path(), config).await.unwrap();
    let run = recorder
        .start_run(RunStart::new("spilled").secret(Secret::new(DECLARED)))
        .await
        .unwrap();
    run.call("bulky", json!({}))
        .credentials(Arc::new(MemoryVault::new().with("api", CRED)))
        .artifacts(Arc::new(MemoryArtifactStore::new()))
        .invoke(|ctx: ToolContext, _: Value| async move {
            let cred = ctx.credential("api").await?;
            let mut body = serde_json::Map::new();
            for (name, form) in forms(cred.secret().expose())
                .into_iter()
                .chain(forms(DECLARED))
            {
                body.insert(format!("{name}-{}", body.len()), json!(form));
            }
            body.insert("padding".into(), json!("x".repeat(4096)));
            // And bytes the tool keeps: stored whole, so guarded whole.
            let leaked = format!("config\ntoken: {}\n", forms(cred.secret().expose())[4].1);
            ctx.artifacts()
                .put("text/plain", leaked.into_bytes())
                .await?;
            // UTF-16LE text (with its byte-order mark), as a Windows tool
            // writes a config file.
            let utf16: Vec<u8> = [0xFF, 0xFE]
                .into_iter()
                .chain(
                    format!("token={}\r\n", cred.secret().expose())
                        .encode_utf16()
                        .flat_map(u16::to_le_bytes),
                )
                .collect();
            ctx.artifacts()
                .put("text/plain; charset=utf-16le", utf16)
                .await?;
            ctx.artifacts()
                .put("text/plain", b"harmless bytes".to_vec())
                .await?;
            let body = Value::Object(body);
            let answer = body.clone();
            let _: Value = ctx
                .effect("api.bulk", &json!({ "q": 1 }), move || async move {
                    Ok::<_, String>(answer)
                })
                .await?;
            Ok(body)
        })
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    assert!(archive.verify().unwrap().is_ok());

    let tape = Tape::export(&archive, "spilled").unwrap();
    // The payloads did spill: the tape carries their artifacts.
    assert!(!tape.artifacts.is_empty(), "nothing spilled");
    let mut tape_bytes = Vec::new();
    tape.write(&mut tape_bytes).unwrap();
    let mut places = archive_files(dir.path());
    for (digest, bytes) in &tape.artifacts {
        places.push((format!("artifact {digest}"), bytes.clone()));
    }
    places.push(("the tape".into(), tape_bytes));
    assert_no_form_in(&places);
    let utf16: Vec<u8> = CRED.encode_utf16().flat_map(u16::to_le_bytes).collect();
    for (place, bytes) in &places {
        assert!(!contains(bytes, &utf16), "the UTF-16LE form is in {place}");
    }
    // The scan can find things: the padding is in an artifact.
    assert!(tape
        .artifacts
        .iter()
        .any(|(_, b)| contains(b, "x".repeat(4096).as_bytes())));
    let facts: Vec<Fact> = archive
        .facts("spilled", ..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let tripped: BTreeSet<String> = facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::RedactionTripped(t) => Some(t.fact.clone()),
            _ => None,
        })
        .collect();
    // The harmless artifact was kept.
    assert!(tape
        .artifacts
        .iter()
        .any(|(_, b)| b.as_slice() == b"harmless bytes"));
    for kind in ["effect", "call.ended", "artifact"] {
        assert!(tripped.contains(kind), "{kind} not named: {tripped:?}");
    }
}

//! The tripwire at export: a value the recorder was never told about (the
//! tool leaks it in plain text fields, in every encoding) is declared by
//! the host at export (`reel export --secret-env NAME`, and
//! `reel_otlp::guard_request` with the same tripwire). No form reaches the
//! tape or the OTLP payload; the tape names each hit with a
//! `redaction.tripped` fact (point `tape`, rule `declared-at-export`) and still imports
//! and verifies; each span hit gains a `redaction.tripped` event.

use std::path::Path;
use std::process::Command;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use prost::Message;
use reel::context::{ToolContext, ToolError};
use reel::fact::{FactKind, Level, RunStatus};
use reel::tape::Tape;
use reel::tripwire::Tripwire;
use reel_archive::{Archive, ArchiveConfig, FingerprintKey, TapeExt};
use reel_otlp::opentelemetry_proto::tonic::common::v1::any_value;
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

const LEAKED: &str = "host-env-Secret/7Qx+93kL\"z";
const VAR: &str = "REEL_TRIPWIRE_TEST_SECRET";

fn forms(s: &str) -> Vec<(&'static str, String)> {
    let json = serde_json::to_string(s).unwrap();
    let debug = format!("{s:?}");
    let percent: String = s
        .bytes()
        .map(|c| {
            if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
                (c as char).to_string()
            } else {
                format!("%{c:02X}")
            }
        })
        .collect();
    vec![
        ("raw", s.to_owned()),
        ("json", json[1..json.len() - 1].to_owned()),
        ("debug", debug[1..debug.len() - 1].to_owned()),
        ("percent", percent),
        ("base64", STANDARD.encode(s)),
        ("base64url", URL_SAFE_NO_PAD.encode(s)),
        ("basic-auth", STANDARD.encode(format!("bob:{s}"))),
        (
            "base64-in-a-body",
            STANDARD.encode(format!("{{\"x\":\"{s}\"}}")),
        ),
    ]
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn assert_no_form(bytes: &[u8], what: &str) {
    for (name, form) in forms(LEAKED) {
        assert!(
            !contains(bytes, form.as_bytes()),
            "the {name} form is in {what}"
        );
        let mid = form.len() / 2;
        assert!(
            !contains(bytes, &form.as_bytes()[mid - 6..mid + 6]),
            "the middle of the {name} form is in {what}"
        );
    }
}

async fn leaky(ctx: ToolContext, _: Value) -> Result<Value, ToolError> {
    let all: serde_json::Map<String, Value> = forms(LEAKED)
        .into_iter()
        .map(|(n, f)| (n.to_owned(), json!(f)))
        .collect();
    ctx.progress(json!({ "message": format!("auth {}", all["basic-auth"]), "all": all }));
    ctx.log(
        Level::Info,
        json!({ "message": format!("sent {}", all["percent"]) }),
    );
    Ok(json!({ "echo": all }))
}

fn key() -> FingerprintKey {
    FingerprintKey::Key([4; 32])
}

fn record(dir: &Path) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = RecorderConfig {
            fingerprint_key: key(),
            serve_live: false,
            ..RecorderConfig::default()
        };
        let recorder = Recorder::open(dir, config).await.unwrap();
        let run = recorder.start_run(RunStart::new("leaky")).await.unwrap();
        run.call("leaky", json!({ "q": 1 }))
            .invoke(leaky)
            .await
            .unwrap();
        run.end(RunStatus::Completed).await.unwrap();
        recorder.shutdown().await.unwrap();
    });
}

#[test]
fn a_secret_declared_at_export_leaves_in_no_encoding() {
    let tmp = tempfile::tempdir().unwrap();
    let archive_dir = tmp.path().join("archive");
    record(&archive_dir);
    let tape_path = tmp.path().join("leaky.tape.jsonl");

    // The tape, through the binary.
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["--color", "never", "--archive"])
        .arg(&archive_dir)
        .args(["export", "leaky", "--secret-env", VAR, "-o"])
        .arg(&tape_path)
        .env_remove("REEL_ARCHIVE")
        .env("REEL_FINGERPRINT_KEY", "04".repeat(32))
        .env("REEL_CONFIG_DIR", tmp.path().join("config"))
        .env(VAR, LEAKED)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("scrubbed from the tape"), "{stderr}");
    assert!(!contains(&out.stderr, LEAKED.as_bytes()));
    let bytes = std::fs::read(&tape_path).unwrap();
    assert_no_form(&bytes, "the tape");
    assert!(
        contains(&bytes, b"\"step\"") || contains(&bytes, b"auth "),
        "the tool's facts are there"
    );
    let tape = Tape::read(&bytes[..]).unwrap();
    let tripped: Vec<_> = tape
        .facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::RedactionTripped(t) => Some(t),
            _ => None,
        })
        .collect();
    for (fact, field) in [
        ("progress", "/data/payload/message"),
        ("progress", "/data/payload/all/base64"),
        ("log", "/data/data/message"),
        ("call.ended", "/data/outcome/result/echo/basic-auth"),
    ] {
        assert!(
            tripped.iter().any(|t| t.fact == fact
                && t.field == field
                && t.point == "tape"
                && t.rule == "declared-at-export"),
            "{fact} {field} not named: {tripped:#?}"
        );
    }
    // How `reel show` words them (and a drop), as an operator reads them.
    let text =
        reel_viewer::render::text::TextRenderer::new(reel_viewer::render::text::Color::Plain);
    let mut lines: Vec<String> = tape
        .facts
        .iter()
        .filter(|f| matches!(f.kind, FactKind::RedactionTripped(_)))
        .map(|f| format!("{:<18} {}", f.kind.name(), text.detail_text(f, "leaky")))
        .collect();
    let dropped = reel::fact::Fact {
        seq: 0,
        at: 0,
        offset: 0,
        call: Some("c1".into()),
        kind: FactKind::ProgressDropped(reel::fact::ProgressDropped { count: 4096 }),
    };
    lines.push(format!(
        "{:<18} {}",
        dropped.kind.name(),
        text.detail_text(&dropped, "leaky")
    ));
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots"));
    settings.set_prepend_module_to_snapshot(true);
    settings.bind(|| insta::assert_snapshot!("tripped_and_dropped_details", lines.join("\n")));

    // Still a tape that imports (its seqs renumbered) and verifies.
    let fresh = Archive::open(
        tmp.path().join("fresh"),
        ArchiveConfig {
            fingerprint_key: key(),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    tape.import(&fresh).unwrap();
    assert!(fresh.verify().unwrap().is_ok());
    drop(fresh);

    // The spans: every span hit is scrubbed and gains its event.
    let archive = Archive::open(
        &archive_dir,
        ArchiveConfig {
            fingerprint_key: key(),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let options = reel_otlp::Options { content: true };
    let mut request = reel_otlp::archive_request(&archive, &["leaky".into()], &options).unwrap();
    let before = request.encode_to_vec();
    assert!(
        contains(&before, STANDARD.encode(LEAKED).as_bytes()),
        "the leak is in the spans"
    );
    let mut wire = Tripwire::new();
    wire.add(LEAKED);
    let hits = reel_otlp::guard_request(&mut request, &wire, "declared-at-export");
    assert!(hits >= 3, "{hits}");
    assert_no_form(&request.encode_to_vec(), "the OTLP payload");
    let events: Vec<String> = request.resource_spans[0].scope_spans[0]
        .spans
        .iter()
        .flat_map(|s| &s.events)
        .filter(|e| e.name == "redaction.tripped")
        .map(|e| {
            e.attributes
                .iter()
                .map(|a| match &a.value.as_ref().and_then(|v| v.value.clone()) {
                    Some(any_value::Value::StringValue(s)) => format!("{}={s}", a.key),
                    other => format!("{}={other:?}", a.key),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(events.len(), hits);
    assert!(
        events
            .iter()
            .any(|e| e.contains("reel.redaction.point=otlp")
                && e.contains("reel.redaction.span=execute_tool leaky")
                && e.contains("reel.redaction.rule=declared-at-export")),
        "{events:#?}"
    );
}

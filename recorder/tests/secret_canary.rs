//! The secret canary: no planted secret is ever persisted.
//!
//! Each case plants random credential values in a vault and random values
//! under secret-named keys in args, progress, log, effect and elicitation
//! payloads, and runs a careless tool that puts its resolved tokens
//! everywhere it can (log messages, progress messages, effect requests and
//! results, object keys, output notes, cleanup errors, a child call's args,
//! its own error or panic message, payloads large enough to be spilled into
//! artifacts, payloads nested past the depth cap). Then it shuts the
//! recorder down, exports every run as a tape, and scans every byte of every
//! file under the archive directory, every byte of the tape files, and the
//! decoded bytes of the tapes' artifacts: no 12-character window of any
//! planted value may appear anywhere.
//!
//! Planted values are drawn from a 16-letter alphabet that reel never
//! writes in runs of 12 by itself, and the scan is proven able to find
//! things: a control value drawn the same way, planted under a non-secret
//! key, must be found in the archive files and in the tape.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use reel::context::{Elicitation, ToolContext, ToolError};
use reel::fact::{ElicitOutcome, Level, RunStatus, TeardownScope};
use reel::tape::Tape;
use reel::tools::Tools;
use reel_recorder::{
    MemoryArtifactStore, MemoryVault, Recorder, RecorderConfig, RunStart, ScriptedElicitor,
};
use serde_json::{json, Map, Value};

/// The letters planted values are made of (none of `[REDACTED]`'s).
const ALPHA: &[u8] = b"QXZJKVWYBGHMNPUL";
/// The shortest run of a planted value the scan looks for.
const WINDOW: usize = 12;
/// Small, so that large payloads are spilled into artifacts.
const INLINE_LIMIT: usize = 4096;

/// Secret-named keys: reel's default rules and the user rule `pin_code`.
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "api_key",
    "apiKey",
    "x-api-key",
    "access_token",
    "refreshToken",
    "client_secret",
    "Authorization",
    "secret",
    "private_key",
    "session_cookie",
    "dbCredentials",
    "pin_code",
    "userPinCode",
];

#[derive(Debug, Clone)]
struct Plan {
    /// Credential values, one per need `svc0`, `svc1`, ...; `svc0` is
    /// declared, the others pulled.
    creds: Vec<String>,
    /// (secret-named key, value) planted in payloads.
    keyed: Vec<(String, String)>,
    /// A value under a non-secret key: must be found by the scan.
    control: String,
    /// How the tool ends: 0 ok, 1 error with the token, 2 respond, 3 panic.
    ending: u8,
    /// Whether payloads are large enough to be spilled.
    big: bool,
    /// Whether a secret-keyed value is nested past the depth cap.
    deep: bool,
    /// Runs recorded (each resolves the credentials again).
    runs: usize,
}

fn planted(tag: &str) -> impl Strategy<Value = String> {
    let tag = tag.to_owned();
    proptest::collection::vec(proptest::sample::select(ALPHA), 12..=40)
        .prop_map(move |body| format!("{tag}{}", String::from_utf8(body).unwrap()))
}

fn plan() -> impl Strategy<Value = Plan> {
    proptest::collection::vec(proptest::sample::select(ALPHA), 4)
        .prop_map(|t| String::from_utf8(t).unwrap())
        .prop_flat_map(|tag| {
            (
                proptest::collection::vec(planted(&tag), 1..=3),
                proptest::collection::vec(
                    (
                        proptest::sample::select(SECRET_KEYS).prop_map(str::to_owned),
                        planted(&tag),
                    ),
                    1..=6,
                ),
                planted(&tag),
                0u8..4,
                any::<bool>(),
                any::<bool>(),
                1usize..=2,
            )
        })
        .prop_map(|(creds, keyed, control, ending, big, deep, runs)| Plan {
            creds,
            keyed,
            control,
            ending,
            big,
            deep,
            runs,
        })
}

/// The secret-keyed values as one object (nested one level too).
fn keyed_object(plan: &Plan) -> Value {
    let mut m = Map::new();
    for (i, (k, v)) in plan.keyed.iter().enumerate() {
        if i % 2 == 0 {
            m.insert(k.clone(), json!(v));
        } else {
            m.insert(format!("group{i}"), json!([{ k.clone(): v, "n": i }]));
        }
    }
    Value::Object(m)
}

fn nest(leaf: Value, depth: usize) -> Value {
    let mut v = leaf;
    for _ in 0..depth {
        v = json!([v]);
    }
    v
}

/// The careless tool: puts every token it resolved everywhere it can.
async fn careless(ctx: ToolContext, args: Value, plan: Arc<Plan>) -> Result<Value, ToolError> {
    let mut tokens = Vec::new();
    if let Some(declared) = ctx.declared_credential() {
        tokens.push(declared.secret().expose().to_owned());
    }
    for i in 1..plan.creds.len() {
        tokens.push(
            ctx.credential(format!("svc{i}"))
                .await?
                .secret()
                .expose()
                .to_owned(),
        );
    }
    let t = tokens.last().cloned().unwrap_or_default();
    let all = tokens.join(" ");
    let keyed = keyed_object(&plan);

    ctx.progress(json!({
        "message": format!("using {all}"),
        "control": plan.control,
        "creds": keyed,
        "args_seen": args,
    }));
    ctx.log(Level::Info, format!("resolved tokens: {all}"));
    ctx.log(
        Level::Debug,
        json!({ "note": format!("tok={t}"), "auth": keyed }),
    );
    ctx.subflow_logger().log(
        Level::Notice,
        json!({ "message": format!("subflow sees {t}") }),
    );
    ctx.notify(
        json!({ "message": format!("notify {t}"), t.clone(): true }),
        Level::Warning,
    );

    let echo = t.clone();
    let keyed2 = keyed.clone();
    let answer: Value = ctx
        .effect(
            "api.call",
            &json!({ "auth_header": format!("Bearer {t}"), "body": keyed, t.clone(): "as a key" }),
            move || async move { Ok::<_, String>(json!({ "echo": echo, "keyed": keyed2 })) },
        )
        .await?;
    let failing = t.clone();
    let failed = ctx
        .effect(
            "api.retry",
            &json!({ "url": format!("https://x.test/?t={t}") }),
            move || async move { Err::<Value, _>(format!("401 unauthorised for token {failing}")) },
        )
        .await;
    assert!(failed.is_err());

    let schema = json!({ "type": "object", "properties": { "ok": { "type": "boolean" } } });
    let _ = ctx
        .elicit(Elicitation::form(format!("Use token {t}?"), schema))
        .await?;

    ctx.output(
        json!({ "used": t, "answer": answer }),
        Some(&format!("stage {t}")),
        Some(&format!("called the API with {all}")),
    );
    let closing = t.clone();
    ctx.on_teardown(
        TeardownScope::Call,
        &format!("conn-{t}"),
        move || async move { Err::<(), _>(format!("closing the connection for {closing} failed")) },
    )?;
    let child = ctx
        .dispatch(
            "child",
            json!({ "forwarded": t, "creds": keyed_object(&plan) }),
        )
        .await?;

    if plan.big {
        let pad: Vec<Value> = (0..INLINE_LIMIT / 16)
            .map(|i| json!({ "i": i, "line": format!("padding {i} with {t}") }))
            .collect();
        ctx.progress(json!({ "pad": pad, "creds": keyed_object(&plan), "control": plan.control }));
        ctx.log(Level::Info, json!({ "pad": pad, "all": all }));
    }
    if plan.deep {
        let leaf = json!({ "creds": keyed_object(&plan), "message": format!("deep {t}") });
        ctx.progress(json!({ "deep": nest(leaf, reel::redact::MAX_JSON_DEPTH + 10) }));
    }

    match plan.ending {
        0 => Ok(json!({ "echo": all, "creds": keyed_object(&plan), "child": child })),
        1 => Err(ToolError::msg(format!("request failed with token {t}"))),
        2 => ctx.respond(json!({ "responded": t, "creds": keyed_object(&plan) })),
        _ => panic!("the tool fell over holding {t}"),
    }
}

/// Records the plan's runs into `archive_dir`, exports each as a tape into
/// `tape_dir`, and returns the tape paths.
async fn record(plan: Plan, archive_dir: &Path, tape_dir: &Path) -> Vec<PathBuf> {
    let config = RecorderConfig {
        inline_limit: INLINE_LIMIT,
        redact_keys: vec!["pin_code".into()],
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(archive_dir, config).await.unwrap();
    let mut vault = MemoryVault::new();
    for (i, v) in plan.creds.iter().enumerate() {
        vault = vault.with(&format!("svc{i}"), v);
    }
    let vault = Arc::new(vault);
    let store = Arc::new(MemoryArtifactStore::new());
    let tools = Tools::new().register("child", |ctx: ToolContext, args: Value| async move {
        ctx.progress(json!({ "child_got": args }));
        Ok::<_, ToolError>(args)
    });
    let plan = Arc::new(plan);
    let mut ids = Vec::new();
    for r in 0..plan.runs {
        let run = recorder
            .start_run(RunStart::new(format!("run-{r}")).label("control", plan.control.clone()))
            .await
            .unwrap();
        let mut args = keyed_object(&plan);
        args["control"] = json!(plan.control);
        let elicitor = Arc::new(ScriptedElicitor::new([ElicitOutcome::Accept {
            content: json!({ "ok": true, "creds": keyed_object(&plan) }),
        }]));
        let call = run
            .call("careless", args)
            .needs("svc0")
            .credentials(vault.clone())
            .artifacts(store.clone())
            .elicitor(elicitor)
            .dispatcher(tools.clone());
        let p = plan.clone();
        // Spawned, so that the panicking variant is caught as the host would.
        let outcome = tokio::spawn(call.invoke(move |ctx, args| careless(ctx, args, p))).await;
        match (plan.ending, outcome) {
            (0 | 2, Ok(Ok(_))) => {}
            // The tool ran and failed its own way (not a refused credential).
            (1, Ok(Err(e))) if e.to_string().contains("request failed with token") => {}
            (3, Err(join)) if join.is_panic() => {}
            (e, other) => panic!("ending {e}: unexpected {other:?}"),
        }
        run.end(RunStatus::Completed).await.unwrap();
        ids.push(run.id().to_owned());
    }
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let report = archive.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    let mut tapes = Vec::new();
    for id in ids {
        let tape = Tape::export(&archive, &id).unwrap();
        let path = tape_dir.join(format!("{id}.tape.jsonl"));
        tape.write(std::io::BufWriter::new(
            std::fs::File::create(&path).unwrap(),
        ))
        .unwrap();
        tapes.push(path);
    }
    drop(archive);
    tapes
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
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

/// Where a window of a planted value occurs in `bytes`: (value, offset).
fn hits<'a>(
    bytes: &[u8],
    windows: &std::collections::HashMap<&'a [u8], &'a str>,
) -> Vec<(&'a str, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !ALPHA.contains(&bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && ALPHA.contains(&bytes[i]) {
            i += 1;
        }
        if i - start >= WINDOW {
            for w in start..=i - WINDOW {
                if let Some(v) = windows.get(&bytes[w..w + WINDOW]) {
                    out.push((*v, w));
                }
            }
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn check(plan: Plan) -> Result<(), TestCaseError> {
    let archive_dir = tempfile::tempdir().unwrap();
    let tape_dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tapes = runtime.block_on(record(plan.clone(), archive_dir.path(), tape_dir.path()));
    drop(runtime);

    let secrets: Vec<&str> = plan
        .creds
        .iter()
        .chain(plan.keyed.iter().map(|(_, v)| v))
        .map(String::as_str)
        .collect();
    let control_windows: HashSet<&[u8]> = plan.control.as_bytes().windows(WINDOW).collect();
    let mut windows = std::collections::HashMap::new();
    for s in &secrets {
        for w in s.as_bytes().windows(WINDOW) {
            // A window shared with the control (vanishingly rare) proves nothing.
            if !control_windows.contains(w) {
                windows.insert(w, *s);
            }
        }
    }

    let mut scanned = Vec::new();
    for path in files_under(archive_dir.path()) {
        scanned.push(("archive", path.clone(), std::fs::read(&path).unwrap()));
    }
    for path in &tapes {
        let bytes = std::fs::read(path).unwrap();
        let tape = Tape::read(&bytes[..]).unwrap();
        for (digest, data) in tape.artifacts {
            scanned.push(("tape artifact", path.join(digest), data));
        }
        scanned.push(("tape", path.clone(), bytes));
    }

    let archive_bytes: usize = scanned
        .iter()
        .filter(|(k, _, _)| *k == "archive")
        .map(|(_, _, b)| b.len())
        .sum();
    prop_assert!(archive_bytes > 0, "the archive is empty");
    for (kind, path, bytes) in &scanned {
        prop_assert!(
            !(*kind == "tape" && bytes.is_empty()),
            "empty tape {}",
            path.display()
        );
        let found = hits(bytes, &windows);
        prop_assert!(
            found.is_empty(),
            "planted value(s) persisted in {kind} {}: {:?}",
            path.display(),
            found.iter().take(5).collect::<Vec<_>>()
        );
    }
    let marked = scanned
        .iter()
        .any(|(k, _, b)| *k == "tape" && contains(b, reel::redact::MARKER.as_bytes()));
    prop_assert!(marked, "nothing was redacted: the tool never ran?");
    let in_archive = scanned
        .iter()
        .any(|(k, _, b)| *k == "archive" && contains(b, plan.control.as_bytes()));
    prop_assert!(
        in_archive,
        "the control value is not found in the archive files"
    );
    for path in &tapes {
        let bytes = std::fs::read(path).unwrap();
        prop_assert!(
            contains(&bytes, plan.control.as_bytes()),
            "the control value is not found in {}",
            path.display()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_planted_secret_reaches_the_archive_or_the_tape(plan in plan()) {
        check(plan)?;
    }
}

/// The scanner itself: finds a window anywhere in a run of the alphabet,
/// and nothing outside one.
#[test]
fn the_scanner_finds_planted_windows() {
    let secret = "QXZJKVWYBGHMNPULQX";
    let mut windows = std::collections::HashMap::new();
    for w in secret.as_bytes().windows(WINDOW) {
        windows.insert(w, secret);
    }
    assert!(!hits(b"..\x00QXZJKVWYBGHM\x01..", &windows).is_empty());
    assert!(
        !hits(b"ZZZZVWYBGHMNPULQXZZ", &windows).is_empty(),
        "inside a longer run"
    );
    assert!(
        hits(b"QXZJKVWYBGH", &windows).is_empty(),
        "shorter than a window"
    );
    assert!(hits(b"QXZJKV[REDACTED]WYBGHM", &windows).is_empty());
}

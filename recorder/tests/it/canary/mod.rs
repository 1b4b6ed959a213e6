//! The secret canary's plan, host, careless tool and scanner, shared by
//! `recorder/tests/it/secret_canary.rs` (archive and tape) and
//! `cli/tests/it/secret_canary_cli.rs` (the `reel` binary's output).
//!
//! A plan plants secrets of every kind reel must keep off disk:
//!
//! - credentials that overlap (one a prefix, a suffix, or inside another),
//!   resolved in a random order, and a short (1-5 character) one;
//! - values under secret-named keys of the call's args: long ones, short
//!   ones, a numeric one (a JSON number), and one with `"`, `\`, `<`, `>`,
//!   `&` and a non-ASCII letter in it;
//! - run labels under secret-named keys.
//!
//! The careless tool (and its host) then puts every one of them through
//! every string-typed argument of the public API: labels and label keys,
//! the tool name the host calls and the tool names a tool dispatches, tool
//! id, invocation id, protocol, platform, client info, claim tickets, need
//! names, progress (plain, MCP, report), log data, notify, sub-flow names,
//! effect names, requests, results and errors, media types, artifact ids
//! (with and without a store), elicitation messages, outputs, stages and
//! notes, teardown keys and cleanup errors, a late cancel reason, a child
//! call's args, a vault's failure reason, an elicitor's answer, the tool's
//! own error or panic message, payloads large enough to be spilled and
//! payloads nested past the depth cap; JSON keys and JSON numbers too.
//!
//! Not planted: run ids, session ids and the caller's identity, which are
//! identifiers the host chooses (reel keeps them as given, see
//! `reel::redact`); and artifact bytes, which are the tool's data, stored
//! as given.
//!
//! Long values are made of a 16-letter alphabet reel never writes in runs
//! of 12 by itself, so any 12-letter window of one found in a file is a
//! leak. Short values are made of Cyrillic letters reel never writes, and
//! are looked for as whole tokens (the rule reel scrubs them by) in text;
//! in binary files (the sled database) a 1-character value cannot be told
//! from noise, so the archive is also read back and scanned decoded. A
//! control value under a non-secret key must be found by every scan.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use reel::context::{Elicitation, McpProgress, Report, Stage, ToolContext, ToolError};
use reel::fact::{
    ArtifactMeta, ClientInfo, ElicitOutcome, FactKind, Identity, Level, Origin, RunStatus,
    TeardownScope,
};
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::TapeExt;
use reel_archive::{Archive, ArchiveConfig, FingerprintKey, RunFilter};
use reel_recorder::{
    MemoryArtifactStore, MemoryVault, Recorder, RecorderConfig, RunStart, ScriptedElicitor,
};
use serde_json::{json, Map, Value};

/// The letters long planted values are made of (none of `[REDACTED]`'s).
pub const ALPHA: &[u8] = b"QXZJKVWYBGHMNPUL";
/// The letters short planted values are made of.
pub const SHORT: &[char] = &['Ѫ', 'Ѭ', 'Ѯ', 'Ѱ', 'Ѳ', 'Ѵ', 'Ꙭ', 'ꙮ'];
/// The shortest run of a long planted value the scan looks for.
pub const WINDOW: usize = 12;
/// Small, so that large payloads are spilled into artifacts.
pub const INLINE_LIMIT: usize = 4096;

/// Secret-named keys: reel's default rules and the user rule `pin_code`.
pub const SECRET_KEYS: &[&str] = &[
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

/// What one case plants, and how its tool ends.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Credential values, in the order they resolve: need `svc0` is
    /// declared, the others pulled. They overlap, and the last is short.
    pub creds: Vec<String>,
    /// (secret-named key, value) planted in the args: long, short, numeric
    /// and special values.
    pub keyed: Vec<(String, Value)>,
    /// (secret-named key, value) planted as run labels.
    pub labels: Vec<(String, String)>,
    /// A value under a non-secret key: must be found by every scan.
    pub control: String,
    /// How the tool ends: 0 ok, 1 error, 2 respond, 3 panic.
    pub ending: u8,
    /// Whether payloads are large enough to be spilled.
    pub big: bool,
    /// Whether a secret-keyed value is nested past the depth cap.
    pub deep: bool,
    /// Runs recorded (each resolves the credentials again).
    pub runs: usize,
}

impl Plan {
    /// Every planted secret as text, credentials first.
    pub fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = self.creds.clone();
        out.extend(self.keyed.iter().map(|(_, v)| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }));
        out.extend(self.labels.iter().map(|(_, v)| v.clone()));
        let mut seen = HashSet::new();
        out.retain(|s| seen.insert(s.clone()));
        out
    }

    /// The secrets known when the run starts (its labels), joined.
    fn known_at_run(&self) -> String {
        let out: Vec<&str> = self.labels.iter().map(|(_, v)| v.as_str()).collect();
        out.join(" ")
    }

    /// The secrets known when the call starts (labels and args), joined.
    fn known_at_start(&self) -> String {
        let mut out: Vec<String> = self.labels.iter().map(|(_, v)| v.clone()).collect();
        out.extend(self.keyed.iter().map(|(_, v)| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }));
        out.join(" ")
    }

    /// The numbers planted as JSON numbers.
    fn numbers(&self) -> Vec<Value> {
        self.keyed
            .iter()
            .filter(|(_, v)| v.is_number())
            .map(|(_, v)| v.clone())
            .collect()
    }
}

fn alpha(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(ALPHA), len)
        .prop_map(|b| String::from_utf8(b).unwrap())
}

fn long(tag: &str) -> impl Strategy<Value = String> {
    let tag = tag.to_owned();
    alpha(12..=32).prop_map(move |body| format!("{tag}{body}"))
}

fn short() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(SHORT), 1..=5)
        .prop_map(|c| c.into_iter().collect())
}

fn key() -> impl Strategy<Value = String> {
    proptest::sample::select(SECRET_KEYS).prop_map(str::to_owned)
}

/// The plans of the canary.
pub fn plan() -> impl Strategy<Value = Plan> {
    alpha(4..=4)
        .prop_flat_map(|tag| {
            let family = (long(&tag), alpha(12..=20), alpha(12..=20), 0usize..4);
            let values = (
                proptest::collection::vec((key(), long(&tag)), 1..=3),
                proptest::collection::vec((key(), short()), 1..=3),
                (key(), 100_000_000u64..1_000_000_000),
                (key(), alpha(2..=3), alpha(2..=3), alpha(2..=3)),
            );
            let labels = (key(), short(), key(), long(&tag));
            (
                family,
                short(),
                values,
                labels,
                long(&tag),
                (0u8..4, any::<bool>(), any::<bool>(), 1usize..=2),
            )
        })
        .prop_flat_map(
            |((a, tail, head, shape), short_cred, values, labels, control, misc)| {
                // A first, then one that has A as its prefix (the case that
                // kept a tail), and by shape: A as a suffix, A inside.
                let mut family = vec![a.clone(), format!("{a}{tail}")];
                if shape & 1 == 1 {
                    family.push(format!("{head}{a}"));
                }
                if shape & 2 == 2 {
                    family.push(format!("{head}{a}{tail}"));
                }
                (
                    Just(family).prop_shuffle(),
                    Just((short_cred, values, labels, control, misc)),
                )
            },
        )
        .prop_map(
            |(mut creds, (short_cred, (longs, shorts, number, special), labels, control, misc))| {
                creds.push(short_cred);
                let mut keyed: Vec<(String, Value)> = longs
                    .into_iter()
                    .chain(shorts)
                    .map(|(k, v)| (k, json!(v)))
                    .collect();
                keyed.push((number.0, json!(number.1)));
                let (k, a, b, c) = special;
                keyed.push((k, json!(format!("{a}\"{b}\\<{c}>&é"))));
                let (k1, s1, k2, l2) = labels;
                // Distinct keys, both still secret-named.
                let k2 = if k2 == k1 { format!("{k2}_2") } else { k2 };
                let (ending, big, deep, runs) = misc;
                Plan {
                    creds,
                    keyed,
                    labels: vec![(k1, s1), (k2, l2)],
                    control,
                    ending,
                    big,
                    deep,
                    runs,
                }
            },
        )
}

/// The secret-keyed values as one object (every other one nested a level).
pub fn keyed_object(plan: &Plan) -> Value {
    let mut m = Map::new();
    for (i, (k, v)) in plan.keyed.iter().enumerate() {
        // Every value stays in the object (a repeated key would replace
        // the value before it, which reel then never sees).
        if i % 2 == 0 && !m.contains_key(k) {
            m.insert(k.clone(), v.clone());
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

/// The careless tool: puts every secret it knows everywhere it can.
async fn careless(ctx: ToolContext, args: Value, plan: Arc<Plan>) -> Result<Value, ToolError> {
    if let Some(declared) = ctx.declared_credential() {
        assert_eq!(declared.secret().expose(), plan.creds[0]);
    }
    for i in 1..plan.creds.len() {
        let c = ctx.credential(format!("svc{i}")).await?;
        assert_eq!(c.secret().expose(), plan.creds[i]);
    }
    // From here on every planted value is known to the run.
    let all = plan.secrets();
    let joined = all.join(" ");
    let keyed = keyed_object(&plan);

    ctx.progress(json!({ "message": format!("control {}", plan.control) }));
    ctx.progress(json!({
        "message": format!("using {joined}"),
        "control": plan.control,
        "creds": keyed,
        "args_seen": args,
        "numbers": plan.numbers(),
    }));
    for s in &all {
        ctx.progress(json!({ "message": format!("using {s}"), s.clone(): true, "exact": s }));
        ctx.log(Level::Info, format!("token={s};"));
        ctx.named_subflow(&format!("flow {s}"))
            .log(Level::Notice, json!({ "message": format!("sub ({s})") }));
        let echo = s.clone();
        let _: Value = ctx
            .effect(
                &format!("api.{s}"),
                &json!({ "auth_header": format!("Bearer {s}") }),
                move || async move { Ok::<_, String>(json!({ "echo": echo })) },
            )
            .await?;
    }
    ctx.progress_mcp(
        McpProgress::new(1.0)
            .total(2.0)
            .message(format!("mcp {joined}")),
    );
    ctx.report(Report {
        used_model: Some(true),
        payload: Some(json!({ "p": joined })),
    });
    ctx.log(
        Level::Debug,
        json!({ "note": format!("tokens={joined}"), "auth": keyed }),
    );
    ctx.subflow_logger().log(
        Level::Notice,
        json!({ "message": format!("subflow sees {joined}") }),
    );
    ctx.notify_at(
        Level::Warning,
        json!({ "message": format!("notify {joined}"), joined.clone(): true }),
    );
    let body = keyed.clone();
    let echo = joined.clone();
    let _: Value = ctx
        .effect(
            "api.call",
            &json!({ "body": keyed, joined.clone(): "as a key" }),
            move || async move { Ok::<_, String>(json!({ "echo": echo, "keyed": body })) },
        )
        .await?;
    let failing = joined.clone();
    let failed = ctx
        .effect(
            "api.retry",
            &json!({ "url": format!("https://x.test/?t={joined}") }),
            move || async move { Err::<Value, _>(format!("401 unauthorised for {failing}")) },
        )
        .await;
    assert!(failed.is_err());
    // A need named after secrets, and one the vault fails with them.
    let _ = ctx
        .credential(format!("missing {}", plan.known_at_start()))
        .await
        .expect_err("the vault has no such need");
    let _ = ctx
        .credential(format!("broken {}", plan.known_at_start()))
        .await
        .expect_err("the vault fails it");

    let meta = ctx
        .artifacts()
        .put(&format!("text/{joined}"), b"plain bytes".to_vec())
        .await?;
    assert!(ctx
        .artifacts()
        .get(&format!("art {joined}"))
        .await?
        .is_none());
    assert!(ctx.artifacts().get(&meta.id).await?.is_some());

    let schema = json!({ "type": "object", "properties": { "ok": { "type": "boolean" } } });
    let _ = ctx
        .elicit(Elicitation::form(
            format!("Use token {joined}?"),
            schema.clone(),
        ))
        .await?;
    let _ = ctx
        .elicit(Elicitation::url(
            format!("Sign in as {joined}"),
            format!("https://x.test/{joined}"),
            format!("el-{joined}"),
        ))
        .await?;

    ctx.set_output_as(
        json!({ "used": joined }),
        Stage::new(format!("stage {joined}")).note(format!("called the API with {joined}")),
    );
    let closing = joined.clone();
    ctx.on_teardown(
        TeardownScope::Call,
        &format!("conn-{joined}"),
        move || async move { Err::<(), _>(format!("closing the connection for {closing} failed")) },
    )?;
    // No session: refused, with a reason.
    let _ = ctx
        .on_teardown(TeardownScope::Session, &format!("s-{joined}"), || async {
            Ok::<(), String>(())
        })
        .expect_err("no session");
    let child = ctx
        .dispatch(
            "child",
            json!({ "forwarded": joined, "creds": keyed_object(&plan) }),
        )
        .await?;
    let _ = ctx
        .dispatch(&format!("tool {joined}"), json!({ "x": joined }))
        .await
        .expect_err("no such tool");

    if plan.big {
        let pad: Vec<Value> = (0..INLINE_LIMIT / 16)
            .map(|i| json!({ "i": i, "line": format!("padding {i} with {joined}") }))
            .collect();
        ctx.progress(json!({ "pad": pad, "creds": keyed_object(&plan), "control": plan.control }));
        ctx.log(Level::Info, json!({ "pad": pad, "all": joined }));
    }
    if plan.deep {
        let leaf = json!({ "creds": keyed_object(&plan), "message": format!("deep {joined}") });
        ctx.progress(json!({ "deep": nest(leaf, reel::redact::MAX_JSON_DEPTH + 10) }));
    }

    match plan.ending {
        0 => Ok(json!({ "echo": joined, "creds": keyed_object(&plan), "child": child })),
        1 => Err(ToolError::msg(format!("request failed with {joined}"))),
        2 => ctx.respond(json!({ "responded": joined, "creds": keyed_object(&plan) })),
        _ => panic!("the tool fell over holding {joined}"),
    }
}

/// A call with nothing attached: every refusal names what it was asked.
async fn bare(ctx: ToolContext, _: Value, plan: Arc<Plan>) -> Result<Value, ToolError> {
    let joined = plan.secrets().join(" ");
    let _ = ctx.artifacts().get(&format!("id {joined}")).await;
    let _ = ctx
        .artifacts()
        .put(&format!("text/{joined}"), vec![1])
        .await;
    let _ = ctx.credential(format!("svc {joined}")).await;
    let _ = ctx.dispatch(&format!("tool {joined}"), json!({})).await;
    Err(ToolError::msg(format!("bare failed with {joined}")))
}

/// The recorder's configuration for the canary: its fingerprint key in a
/// file of the test's own, not in the user's configuration directory.
pub fn config(key_file: &Path) -> RecorderConfig {
    RecorderConfig {
        inline_limit: INLINE_LIMIT,
        redact_keys: vec!["pin_code".into()],
        fingerprint_key: FingerprintKey::File(key_file.to_path_buf()),
        serve_live: false,
        ..RecorderConfig::default()
    }
}

/// Records the plan's runs into `archive_dir`, exports each as a tape into
/// `tape_dir`; returns the run ids and the tape paths.
pub async fn record(
    plan: Plan,
    archive_dir: &Path,
    tape_dir: &Path,
    key_file: &Path,
) -> (Vec<String>, Vec<PathBuf>) {
    let recorder = Recorder::open(archive_dir, config(key_file)).await.unwrap();
    let start = plan.known_at_start();
    let all = plan.secrets().join(" ");
    let mut vault =
        MemoryVault::new().failing(&format!("broken {start}"), &format!("token expired: {all}"));
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
        let mut start_run = RunStart::new(format!("run-{r}"))
            .label("control", plan.control.clone())
            .label(format!("seen {}", plan.known_at_run()), "a label key");
        for (k, v) in &plan.labels {
            start_run = start_run.label(k.clone(), v.clone());
        }
        let run = recorder.start_run(start_run).await.unwrap();
        let mut args = keyed_object(&plan);
        args["control"] = json!(plan.control);
        let elicitor = Arc::new(ScriptedElicitor::new([ElicitOutcome::Accept {
            content: json!({ "ok": true, "creds": keyed_object(&plan), "said": all }),
        }]));
        let ticket = ArtifactMeta {
            id: format!("art {start}"),
            digest: format!("sha256:{}", "0".repeat(64)),
            size: 0,
            media_type: format!("text/{start}"),
            scope: Identity::default(),
            origin: Origin {
                run_id: Some(format!("run-{r}")),
                call_id: "c0".into(),
            },
        };
        let call =
            run.call(&format!("careless-{}", plan.control), args)
                .tool_id(format!("id {start}"))
                .invocation_id(format!("inv {start}"))
                .protocol(format!("mcp {start}"))
                .platform(format!("platform {start}"))
                .client_info(ClientInfo {
                    name: format!("client {start}"),
                    version: Some(start.clone()),
                    title: Some(format!("title {start}")),
                })
                // A wanted ticket needs a declared want (seed 000).
                .spec(
                    <reel::spec::ToolSpec as reel::spec::ToolSpecExt>::new::<Value, Value>(
                        format!("careless-{}", plan.control),
                    )
                    .wants([format!("doc {start}")]),
                )
                .wanted(BTreeMap::from([(format!("doc {start}"), ticket)]))
                .needs("svc0")
                .credentials(vault.clone())
                .artifacts(store.clone())
                .elicitor(elicitor)
                .dispatcher(tools.clone());
        let canceller = call.canceller();
        let p = plan.clone();
        // Spawned, so that the panicking variant is caught as the host would.
        let outcome = tokio::spawn(call.invoke(move |ctx, args| careless(ctx, args, p))).await;
        match (plan.ending, outcome) {
            (0 | 2, Ok(Ok(_))) => {}
            // The tool ran and failed its own way (not a refused credential).
            (1, Ok(Err(e))) if e.to_string().contains("request failed with") => {}
            (3, Err(join)) if join.is_panic() => {}
            (e, other) => panic!("ending {e}: unexpected {other:?}"),
        }
        // A cancel that arrives after the call ended is recorded too.
        canceller.cancel(Some(&format!("late cancel {all}")));
        let p = plan.clone();
        let out = run
            .call(&format!("bare {start}"), json!({ "password": all }))
            .invoke(move |ctx, args| bare(ctx, args, p))
            .await;
        assert!(out.is_err());
        run.end(RunStatus::Completed).await.unwrap();
        ids.push(run.id().to_owned());
    }
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let report = archive.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    let mut tapes = Vec::new();
    for id in &ids {
        let tape = Tape::export(&archive, id).unwrap();
        let path = tape_dir.join(format!("{id}.tape.jsonl"));
        tape.write(std::io::BufWriter::new(
            std::fs::File::create(&path).unwrap(),
        ))
        .unwrap();
        tapes.push(path);
    }
    (ids, tapes)
}

/// Every file under `dir`, recursively.
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

/// The archive read back: every fact of every run, every run record, the
/// run list, and every artifact the facts reference, as JSON text.
pub fn decoded_archive(dir: &Path, key_file: &Path) -> Vec<(String, Vec<u8>)> {
    let archive = Archive::open(
        dir,
        ArchiveConfig {
            fingerprint_key: FingerprintKey::File(key_file.to_path_buf()),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let mut out = Vec::new();
    let page = archive.list_runs(&RunFilter::default()).unwrap();
    out.push(("run list".into(), serde_json::to_vec(&page).unwrap()));
    let mut digests = HashSet::new();
    for record in &page.runs {
        let id = &record.run_id;
        let r = archive.run(id).unwrap();
        out.push((format!("record {id}"), serde_json::to_vec(&r).unwrap()));
        let mut text = Vec::new();
        for fact in archive.facts(id, ..).unwrap() {
            let fact = fact.unwrap();
            let v = serde_json::to_value(&fact).unwrap();
            collect_digests(&v, &mut digests);
            text.extend(serde_json::to_vec(&v).unwrap());
            text.push(b'\n');
            if let FactKind::ArtifactPut(p) = &fact.kind {
                digests.insert(p.meta.digest.clone());
            }
        }
        out.push((format!("facts {id}"), text));
    }
    for d in digests {
        if let Some(bytes) = archive.artifact(&d).unwrap() {
            out.push((format!("artifact {d}"), bytes));
        }
    }
    out
}

fn collect_digests(v: &Value, out: &mut HashSet<String>) {
    match v {
        Value::Object(map) => {
            if let Some(d) = map.get(reel::redact::ARTIFACT_REF).and_then(Value::as_str) {
                out.insert(d.to_owned());
            }
            map.values().for_each(|v| collect_digests(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_digests(v, out)),
        _ => {}
    }
}

/// The forms a value takes in reel's outputs: as it is, JSON-escaped,
/// `{:?}`-escaped, HTML-escaped, and JSON in the HTML page's script block.
fn forms(value: &str) -> Vec<String> {
    let json = serde_json::to_string(value).unwrap();
    let json = json[1..json.len() - 1].to_owned();
    let debug = format!("{value:?}");
    let debug = debug[1..debug.len() - 1].to_owned();
    let html: String = value
        .chars()
        .map(|c| match c {
            '&' => "&amp;".into(),
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '"' => "&quot;".into(),
            '\'' => "&#39;".into(),
            c => c.to_string(),
        })
        .collect();
    let script = json
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let mut out = vec![value.to_owned(), json, debug, html, script];
    out.sort();
    out.dedup();
    out
}

fn is_word(c: Option<char>) -> bool {
    c.is_some_and(char::is_alphanumeric)
}

/// True when `text` holds `form` as a whole token: no letter or digit runs
/// on from either alphanumeric end.
fn has_token(text: &str, form: &str) -> bool {
    text.match_indices(form).any(|(i, m)| {
        let left = is_word(m.chars().next()) && is_word(text[..i].chars().next_back());
        let right = is_word(m.chars().next_back()) && is_word(text[i + m.len()..].chars().next());
        !left && !right
    })
}

/// Looks for planted values in bytes.
pub struct Scanner {
    /// Every 12-letter window of every long value.
    windows: HashMap<Vec<u8>, String>,
    /// (form, value) of values that are looked for whole, anywhere.
    whole: Vec<(String, String)>,
    /// (form, value) of short and numeric values: whole tokens, in text.
    tokens: Vec<(String, String)>,
    control: String,
}

impl Scanner {
    /// The scanner of a plan's values.
    pub fn new(plan: &Plan) -> Scanner {
        let control_windows: HashSet<&[u8]> = plan.control.as_bytes().windows(WINDOW).collect();
        let mut windows = HashMap::new();
        let mut whole = Vec::new();
        let mut tokens = Vec::new();
        for s in plan.secrets() {
            let is_long = s.len() >= WINDOW && s.bytes().all(|b| ALPHA.contains(&b));
            if is_long {
                for w in s.as_bytes().windows(WINDOW) {
                    // A window shared with the control (vanishingly rare)
                    // proves nothing.
                    if !control_windows.contains(w) {
                        windows.insert(w.to_vec(), s.clone());
                    }
                }
            } else if s.chars().count() >= reel::redact::MIN_ANYWHERE
                && !s.bytes().all(|b| b.is_ascii_digit())
            {
                whole.extend(forms(&s).into_iter().map(|f| (f, s.clone())));
            } else {
                tokens.extend(forms(&s).into_iter().map(|f| (f, s.clone())));
            }
        }
        Scanner {
            windows,
            whole,
            tokens,
            control: plan.control.clone(),
        }
    }

    /// Leaks of long values (any 12-letter window) and whole values in
    /// bytes: what can be told from noise in a binary file.
    pub fn binary_leaks(&self, bytes: &[u8]) -> Vec<String> {
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
                    if let Some(v) = self.windows.get(&bytes[w..w + WINDOW]) {
                        out.push(format!("a window of {v} at byte {w}"));
                    }
                }
            }
        }
        for (form, v) in &self.whole {
            if let Some(at) = bytes.windows(form.len()).position(|w| w == form.as_bytes()) {
                out.push(format!("{v} as {form:?} at byte {at}"));
            }
        }
        out
    }

    /// Every leak in the bytes of a text (JSON, a tape, a page, terminal
    /// output): also short and numeric values, as whole tokens.
    pub fn text_leaks(&self, bytes: &[u8]) -> Vec<String> {
        let mut out = self.binary_leaks(bytes);
        let text = String::from_utf8_lossy(bytes);
        for (form, v) in &self.tokens {
            if has_token(&text, form) {
                out.push(format!("{v} as the token {form:?}"));
            }
        }
        out
    }

    /// True when the control value is in `bytes`.
    pub fn has_control(&self, bytes: &[u8]) -> bool {
        bytes
            .windows(self.control.len())
            .any(|w| w == self.control.as_bytes())
    }
}

/// The scanner itself: finds a window anywhere in a run of the alphabet,
/// whole values in any of their forms, tokens only where they stand alone.
pub fn check_scanner() {
    let plan = Plan {
        creds: vec!["QXZJKVWYBGHMNPULQX".into(), "Ѫ".into()],
        keyed: vec![
            ("password".into(), json!("ѬѮ")),
            ("pin_code".into(), json!(739209381u64)),
            ("secret".into(), json!("ZQ\"X\\<J>&é")),
        ],
        labels: vec![],
        control: "LLLLLLLLLLLLLLLL".into(),
        ending: 0,
        big: false,
        deep: false,
        runs: 1,
    };
    let s = Scanner::new(&plan);
    for (text, leaks) in [
        (&b"..\x00QXZJKVWYBGHM\x01.."[..], true),
        (b"ZZZZVWYBGHMNPULQXZZ", true),
        (b"QXZJKVWYBGH", false),
        (b"QXZJKV[REDACTED]WYBGHM", false),
        (b"{\"m\":\"ZQ\\\"X\\\\<J>&\xc3\xa9\"}", true),
        (b"<td>ZQ&quot;X\\&lt;J&gt;&amp;\xc3\xa9</td>", true),
        (b"\"ZQ\\\"X\\\\\\u003cJ\\u003e\\u0026\xc3\xa9\"", true),
        ("using Ѫ now".as_bytes(), true),
        ("(ѬѮ)".as_bytes(), true),
        ("ѪѬ".as_bytes(), false),
        (b"pin 739209381.", true),
        (b"n 1739209381", false),
        (b"[REDACTED] [REDACTED]", false),
    ] {
        assert_eq!(
            !s.text_leaks(text).is_empty(),
            leaks,
            "{:?}: {:?}",
            String::from_utf8_lossy(text),
            s.text_leaks(text)
        );
    }
    assert!(
        s.binary_leaks("using Ѫ now".as_bytes()).is_empty(),
        "short values are not looked for in binary files"
    );
}

/// True when `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

//! The `reel` binary against real archives made by `reel demo`: insta
//! snapshots of what an operator reads (volatile values redacted by
//! [`normalize`] and [`redact_json`]), the filters, export/import, diff,
//! verify, stats, every verb's help, and the error cases (a clear message,
//! a non-zero exit, never a panic).
//!
//! Every test records its own archive in its own temporary directory: sled
//! admits one process per archive, so tests never share one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;
use tempfile::TempDir;

const DEMO_RUNS: [&str; 5] = [
    "demo-deploy",
    "demo-search",
    "demo-walk-cancelled",
    "demo-deploy-failed",
    "demo-audit-degraded",
];

// ---------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------

/// What one `reel` invocation did.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// Asserts the exit code and that nothing panicked.
    fn expect(self, code: i32, what: &str) -> Ran {
        assert!(
            !self.stderr.contains("panicked"),
            "{what}: reel panicked:\n{}",
            self.stderr
        );
        assert_eq!(
            self.code,
            Some(code),
            "{what}: exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Asserts a failure: non-zero exit, a message on stderr, no panic.
    fn fails(self, what: &str) -> Ran {
        assert!(
            !self.stderr.contains("panicked"),
            "{what}: reel panicked:\n{}",
            self.stderr
        );
        assert!(
            matches!(self.code, Some(c) if c != 0),
            "{what}: expected a non-zero exit, got {:?}\n--- stdout\n{}",
            self.code,
            self.stdout
        );
        assert!(
            self.stderr.starts_with("reel: ") || self.stderr.starts_with("error: "),
            "{what}: stderr should say what went wrong:\n{}",
            self.stderr
        );
        self
    }
}

/// Runs `reel --archive <archive> --color never <args>`.
fn reel(archive: &Path, args: &[&str]) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(archive)
        .args(["--color", "never"])
        .args(args)
        .env_remove("REEL_ARCHIVE")
        .env_remove("NO_COLOR")
        .output()
        .expect("the reel binary runs");
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// A fresh archive holding the demo runs (recorded `times` times).
struct Demo {
    tmp: TempDir,
    dir: PathBuf,
}

fn demo(times: usize) -> Demo {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("archive");
    for _ in 0..times {
        reel(&dir, &["demo"]).expect(0, "reel demo");
    }
    Demo { tmp, dir }
}

impl Demo {
    fn reel(&self, args: &[&str]) -> Ran {
        reel(&self.dir, args)
    }
}

// ---------------------------------------------------------------------------
// Redaction
// ---------------------------------------------------------------------------

/// Replaces what changes from one recording to the next with fixed tokens:
/// wall-clock times, offsets and durations, credential fingerprints (keyed
/// by a per-archive random key), random reads and the hop ids the walk
/// derives from them, artifact ids (128 random bits), raw unix nanos and
/// listing cursors, teardown key hashes (keyed like fingerprints). Content
/// digests (artifacts) are stable and kept.
fn normalize(text: &str) -> String {
    static RULES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
        // Not the `2m03s` form: no demo duration is that long, and the
        // deploy question's fixed ttl (`1m00s`) is kept.
        let dur = r"\d+(?:\.\d+)?(?:ns|µs|ms|s)";
        [
            (
                r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z".to_owned(),
                "[time]",
            ),
            // The offset column of `reel show` is right-aligned: its width
            // follows the value, so the padding goes with it.
            (format!(r"(?m)^ *\+{dur} #"), "  +[offset] #"),
            (format!(r"\b{dur}\b"), "[duration]"),
            // Table columns padded after a duration of varying width.
            (r"\[duration\] {2,}".to_owned(), "[duration]  "),
            (
                r"hmac-sha256:[0-9a-f]+".to_owned(),
                "hmac-sha256:[fingerprint]",
            ),
            (r"0x[0-9a-f]{16}".to_owned(), "0x[random]"),
            (r"hop-[0-9a-f]{4}".to_owned(), "hop-[random]"),
            // Cut lines may end inside an id: any run of its digits goes.
            (r"\bart-[0-9a-f]+".to_owned(), "art-[id]"),
            (r"\b\d{19}\b".to_owned(), "[unix-nanos]"),
            (r"--cursor [0-9a-f]+".to_owned(), "--cursor [cursor]"),
        ]
        .into_iter()
        .map(|(re, to)| (Regex::new(&re).expect("a valid regex"), to))
        .collect()
    });
    let mut out = text.to_owned();
    for (re, to) in RULES.iter() {
        out = re.replace_all(&out, *to).into_owned();
    }
    out
}

/// Fields that change from one recording to the next, by name.
const VOLATILE_FIELDS: &[&str] = &[
    "at",
    "offset",
    "duration_ns",
    "unix_nanos",
    "started_at",
    "ended_at",
    "started_offset",
    "ended_offset",
    "last_offset",
    "fingerprint",
    // Teardown key hashes: keyed under the fingerprint key, like
    // fingerprints (the text snapshots keep their equalities).
    "key_hash",
    // Generated per call from OS-seeded randomness.
    "invocation_id",
    // Teardown liveness: wall-clock times of registrations.
    "registered_at",
    "last_registered_at",
];

/// Redacts a `reel show --json` document (or any part of it) in place.
fn redact_json(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for key in VOLATILE_FIELDS {
                if let Some(field) = map.get_mut(*key) {
                    if !field.is_null() {
                        *field = Value::String(format!("[{key}]"));
                    }
                }
            }
            let kind = map.get("kind").and_then(Value::as_str).map(str::to_owned);
            match kind.as_deref() {
                Some("random") => map["data"]["value"] = "[random]".into(),
                Some("effect") if map["data"]["name"] == "github.apply" => {
                    // The apply effect returns the clock read it was given.
                    map["data"]["outcome"]["ok"]["started"] = "[clock]".into();
                }
                _ => {}
            }
            // The timeline's `ended`: [status, offset].
            if let Some(Value::Array(ended)) = map.get_mut("ended") {
                if ended.len() == 2 {
                    ended[1] = "[offset]".into();
                }
            }
            for field in map.values_mut() {
                redact_json(field);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        Value::String(s) => *s = normalize(s),
        _ => {}
    }
}

fn json_snapshot_text(raw: &str) -> String {
    let mut v: Value = serde_json::from_str(raw).expect("reel show --json prints JSON");
    redact_json(&mut v);
    serde_json::to_string_pretty(&v).expect("JSON")
}

/// Asserts a snapshot in the workspace's `snapshots/`.
fn snapshot(name: &str, value: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots"));
    settings.set_prepend_module_to_snapshot(true);
    settings.bind(|| insta::assert_snapshot!(name, value));
}

#[test]
fn normalize_redacts_what_varies_and_keeps_what_does_not() {
    let cases = [
        ("started 2026-11-30T04:39:04.822Z", "started [time]"),
        (
            "    +3.3µs #0    run.started",
            "  +[offset] #0    run.started",
        ),
        (
            "  +32.42ms #1      c1 deploy",
            "  +[offset] #1      c1 deploy",
        ),
        ("took 1.11ms  22 facts", "took [duration]  22 facts"),
        ("ok in 432.0µs → {}", "ok in [duration] → {}"),
        ("850ns 1.23s", "[duration] [duration]"),
        ("1.10ms    completed", "[duration]  completed"),
        (
            "fingerprint hmac-sha256:878c5d38fc13",
            "fingerprint hmac-sha256:[fingerprint]",
        ),
        ("random 0x48b0e346cbd6835f", "random 0x[random]"),
        ("Hop 1 of 12 — hop-9161", "Hop 1 of 12 — hop-[random]"),
        (
            "\"started\":1796014548700313248}",
            "\"started\":[unix-nanos]}",
        ),
        ("more: --cursor 98ecb9b7641e45a8", "more: --cursor [cursor]"),
        (
            "art-41dd688332008e362d1884d08ceec3f2 text/markdown 55 B",
            "art-[id] text/markdown 55 B",
        ),
        (
            "\"id\":\"art-41dd68833200… (+9 more)",
            "\"id\":\"art-[id]… (+9 more)",
        ),
        // Kept: content digests, sizes, seqs, counts, a fixed ttl.
        ("sha256:8feb6a5f98e3253eadc9", "sha256:8feb6a5f98e3253eadc9"),
        ("(form, ttl 1m00s)", "(form, ttl 1m00s)"),
        ("#12 progress (3 so far)", "#12 progress (3 so far)"),
    ];
    for (input, expected) in cases {
        assert_eq!(normalize(input), expected, "normalize({input:?})");
    }
}

// ---------------------------------------------------------------------------
// Snapshots of what an operator reads
// ---------------------------------------------------------------------------

#[test]
fn show_text_of_every_demo_run() {
    let d = demo(1);
    for run in DEMO_RUNS {
        let out = d.reel(&["show", run]).expect(0, run);
        assert!(out.stderr.is_empty(), "{run}: {}", out.stderr);
        assert!(
            !out.stdout.contains('\x1b'),
            "{run}: colours with --color never"
        );
        snapshot(&format!("show_{run}"), &normalize(&out.stdout));
    }
}

#[test]
fn show_json_of_every_demo_run() {
    let d = demo(1);
    for run in DEMO_RUNS {
        let out = d.reel(&["show", run, "--json"]).expect(0, run);
        let v: Value = serde_json::from_str(&out.stdout).expect("JSON");
        assert_eq!(v["run"]["run_id"], run);
        assert_eq!(
            v["facts"].as_array().map(Vec::len),
            v["run"]["facts"].as_u64().map(|n| n as usize),
            "{run}: every fact is in the document"
        );
        snapshot(
            &format!("show_json_{run}"),
            &json_snapshot_text(&out.stdout),
        );
    }
}

#[test]
fn runs_table() {
    let d = demo(1);
    let out = d.reel(&["runs"]).expect(0, "reel runs");
    snapshot("runs", &normalize(&out.stdout));
    let json = d.reel(&["runs", "--json"]).expect(0, "reel runs --json");
    let v: Value = serde_json::from_str(&json.stdout).expect("JSON");
    let ids: Vec<&str> = v["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["run_id"].as_str())
        .collect();
    let mut newest_first = DEMO_RUNS.to_vec();
    newest_first.reverse();
    assert_eq!(ids, newest_first);
    assert!(v["next"].is_null(), "all five fit in one page");
}

#[test]
fn colours_only_when_asked_or_on_a_terminal() {
    let d = demo(1);
    let plain = d.reel(&["show", "demo-deploy"]).expect(0, "never");
    assert!(!plain.stdout.contains('\x1b'));
    let coloured = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(&d.dir)
        .args(["show", "demo-deploy", "--color", "always"])
        .output()
        .expect("runs");
    assert!(coloured.status.success());
    assert!(
        String::from_utf8_lossy(&coloured.stdout).contains("\x1b["),
        "--color always paints"
    );
    // Auto, with stdout a pipe: no colours.
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(&d.dir)
        .args(["show", "demo-deploy"])
        .env_remove("NO_COLOR")
        .output()
        .expect("runs");
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
}

// ---------------------------------------------------------------------------
// Filters and views
// ---------------------------------------------------------------------------

/// The run ids a `reel runs` table lists, in order.
fn listed(table: &str) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("demo-"))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The cursor a page printed, if any.
fn cursor(table: &str) -> Option<String> {
    table
        .lines()
        .find_map(|l| l.strip_prefix("more: --cursor "))
        .map(str::to_owned)
}

fn started_at(d: &Demo, run: &str) -> String {
    let out = d.reel(&["show", run, "--json"]).expect(0, run);
    let v: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let nanos = v["run"]["started_at"].as_u64().expect("started_at");
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(nanos);
    humantime::format_rfc3339_nanos(t).to_string()
}

#[test]
fn runs_filters() {
    let d = demo(1);
    let search_start = started_at(&d, "demo-search");
    let failed_start = started_at(&d, "demo-deploy-failed");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--tenant", "acme"],
            vec![
                "demo-deploy-failed",
                "demo-walk-cancelled",
                "demo-search",
                "demo-deploy",
            ],
        ),
        (vec!["--tenant", "nobody"], vec![]),
        (vec!["--tool", "fetch"], vec!["demo-search"]),
        (
            vec!["--tool", "deploy"],
            vec!["demo-deploy-failed", "demo-deploy"],
        ),
        (vec!["--status", "failed"], vec!["demo-deploy-failed"]),
        (vec!["--status", "cancelled"], vec!["demo-walk-cancelled"]),
        (vec!["--status", "running"], vec![]),
        (
            vec!["--status", "completed", "--tenant", "acme"],
            vec!["demo-search", "demo-deploy"],
        ),
        (
            vec!["--since", &search_start],
            vec![
                "demo-audit-degraded",
                "demo-deploy-failed",
                "demo-walk-cancelled",
                "demo-search",
            ],
        ),
        (vec!["--until", &search_start], vec!["demo-deploy"]),
        (
            vec!["--since", &search_start, "--until", &failed_start],
            vec!["demo-walk-cancelled", "demo-search"],
        ),
        (
            vec!["--since", "1h"],
            vec![
                "demo-audit-degraded",
                "demo-deploy-failed",
                "demo-walk-cancelled",
                "demo-search",
                "demo-deploy",
            ],
        ),
        (vec!["--until", "1h"], vec![]),
        (vec!["--limit", "1"], vec!["demo-audit-degraded"]),
    ];
    for (args, expected) in cases {
        let mut full = vec!["runs"];
        full.extend(&args);
        let out = d.reel(&full).expect(0, &format!("{args:?}"));
        assert_eq!(listed(&out.stdout), expected, "reel runs {args:?}");
        if expected.is_empty() {
            assert!(out.stdout.contains("(no runs match)"), "{}", out.stdout);
        }
    }
    let bad = d
        .reel(&["runs", "--since", "last tuesday"])
        .fails("bad --since");
    assert!(bad.stderr.contains("neither a time"), "{}", bad.stderr);
    let bad = d.reel(&["runs", "--status", "done"]).fails("bad --status");
    assert!(
        bad.stderr
            .contains("running, completed, failed, cancelled, incomplete"),
        "{}",
        bad.stderr
    );
}

#[test]
fn runs_pages_continue_with_the_printed_cursor() {
    let d = demo(1);
    let mut seen = Vec::new();
    let mut pages = 0;
    let mut next: Option<String> = None;
    loop {
        let mut args = vec!["runs", "--limit", "2"];
        if let Some(c) = &next {
            args.extend(["--cursor", c.as_str()]);
        }
        let out = d.reel(&args).expect(0, "a page");
        let page = listed(&out.stdout);
        assert!(page.len() <= 2, "{page:?}");
        seen.extend(page);
        pages += 1;
        next = cursor(&out.stdout);
        if next.is_none() {
            break;
        }
        assert!(pages < 5, "the cursor must advance: {seen:?}");
    }
    let mut newest_first = DEMO_RUNS.to_vec();
    newest_first.reverse();
    assert_eq!(seen, newest_first);
    assert_eq!(pages, 3);
    // The same pages with filters: the cursor keeps the filter's order.
    let first = d
        .reel(&["runs", "--tenant", "acme", "--limit", "3"])
        .expect(0, "acme page 1");
    assert_eq!(
        listed(&first.stdout),
        ["demo-deploy-failed", "demo-walk-cancelled", "demo-search"]
    );
    let c = cursor(&first.stdout).expect("a cursor");
    let second = d
        .reel(&["runs", "--tenant", "acme", "--limit", "3", "--cursor", &c])
        .expect(0, "acme page 2");
    assert_eq!(listed(&second.stdout), ["demo-deploy"]);
    assert_eq!(cursor(&second.stdout), None);
}

#[test]
fn show_last_is_the_newest_run() {
    let d = demo(1);
    let last = d.reel(&["show", "--last"]).expect(0, "--last");
    let named = d.reel(&["show", "demo-audit-degraded"]).expect(0, "named");
    assert_eq!(last.stdout, named.stdout);
    assert!(last.stdout.starts_with("run demo-audit-degraded "));
}

/// The fact lines of `reel show` text: (seq, call, kind).
fn fact_lines(text: &str) -> Vec<(u64, Option<String>, String)> {
    static LINE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?m)^ *\+\S+ #(\d+) +(?:(c\d+) \S+ )?([a-z.]+) ").expect("regex")
    });
    LINE.captures_iter(text)
        .map(|c| {
            (
                c[1].parse().expect("seq"),
                c.get(2).map(|m| m.as_str().to_owned()),
                c[3].to_owned(),
            )
        })
        .collect()
}

#[test]
fn show_filters_by_call_and_kind() {
    let d = demo(1);
    let all = d.reel(&["show", "demo-search"]).expect(0, "all");
    let all_lines = fact_lines(&all.stdout);
    assert_eq!(all_lines.len(), 24, "{}", all.stdout);

    // --call c2: c2's facts and the run-level ones, nothing of c1 or c3.
    let c2 = d
        .reel(&["show", "demo-search", "--call", "c2"])
        .expect(0, "--call");
    let got = fact_lines(&c2.stdout);
    let expected: Vec<_> = all_lines
        .iter()
        .filter(|(_, call, _)| call.as_deref().is_none_or(|c| c == "c2"))
        .cloned()
        .collect();
    assert_eq!(got, expected);
    assert_eq!(
        got.iter().filter(|(_, c, _)| c.is_some()).count(),
        6,
        "c2 has six facts"
    );
    // The summary still describes the whole run.
    assert!(c2.stdout.contains("  c1 search  ok"), "{}", c2.stdout);

    // --kind progress (repeatable).
    let p = d
        .reel(&["show", "demo-walk-cancelled", "--kind", "progress"])
        .expect(0, "--kind");
    let kinds: Vec<_> = fact_lines(&p.stdout)
        .into_iter()
        .map(|(s, _, k)| (s, k))
        .collect();
    assert_eq!(
        kinds,
        [
            (3, "progress".into()),
            (5, "progress".into()),
            (7, "progress".into())
        ]
    );
    let two = d
        .reel(&[
            "show",
            "demo-walk-cancelled",
            "--kind",
            "progress",
            "--kind",
            "call.ended",
        ])
        .expect(0, "two kinds");
    let kinds: Vec<_> = fact_lines(&two.stdout)
        .into_iter()
        .map(|(_, _, k)| k)
        .collect();
    assert_eq!(kinds, ["progress", "progress", "progress", "call.ended"]);

    // Both filters in JSON.
    let j = d
        .reel(&[
            "show",
            "demo-search",
            "--json",
            "--call",
            "c3",
            "--kind",
            "artifact.put",
        ])
        .expect(0, "json filters");
    let v: Value = serde_json::from_str(&j.stdout).expect("JSON");
    let facts: Vec<_> = v["facts"]
        .as_array()
        .expect("facts")
        .iter()
        .map(|f| (f["seq"].as_u64(), f["kind"].as_str()))
        .collect();
    assert_eq!(facts, [(Some(14), Some("artifact.put"))]);
    // The timeline still describes the whole run (every sink folds the
    // facts a filter leaves out into it, as text and HTML do).
    let whole: Value = serde_json::from_str(
        &d.reel(&["show", "demo-search", "--json"])
            .expect(0, "json")
            .stdout,
    )
    .expect("JSON");
    assert_eq!(v["timeline"], whole["timeline"]);
    assert!(v["timeline"]["facts"].as_u64() > Some(1));
}

#[test]
fn tail_of_a_closed_archive_prints_the_run_and_exits() {
    let d = demo(1);
    let tail = d.reel(&["tail", "demo-deploy"]).expect(0, "tail");
    let show = d.reel(&["show", "demo-deploy"]).expect(0, "show");
    assert_eq!(tail.stdout, show.stdout);
    // Without a run: the newest.
    let newest = d.reel(&["tail"]).expect(0, "tail newest");
    assert!(newest.stdout.starts_with("run demo-audit-degraded "));
}

// ---------------------------------------------------------------------------
// Export, import, diff, verify, stats, help
// ---------------------------------------------------------------------------

#[test]
fn export_then_import_shows_the_same_run() {
    let d = demo(1);
    let tape = d.tmp.path().join("deploy.tape.jsonl");
    let tape_arg = tape.to_str().expect("UTF-8 path");
    let exported = d
        .reel(&["export", "demo-deploy", "-o", tape_arg])
        .expect(0, "export");
    assert!(
        exported
            .stderr
            .contains("exported run demo-deploy (22 facts, 1 artifacts)"),
        "{}",
        exported.stderr
    );
    let second = d.tmp.path().join("second");
    let imported = reel(&second, &["import", tape_arg]).expect(0, "import");
    assert!(
        imported
            .stdout
            .starts_with("imported run demo-deploy (22 facts, completed)"),
        "{}",
        imported.stdout
    );
    for view in [
        &["show", "demo-deploy"][..],
        &["show", "demo-deploy", "--json"],
    ] {
        let a = d.reel(view).expect(0, "show in the first archive");
        let b = reel(&second, view).expect(0, "show in the second archive");
        assert_eq!(a.stdout, b.stdout, "{view:?}");
    }
    // The artifact's bytes travelled with the tape.
    let v = reel(&second, &["stats", "--json"]).expect(0, "stats");
    let stats: Value = serde_json::from_str(&v.stdout).expect("JSON");
    assert_eq!(stats["artifacts"], 1);
    // Export to standard output.
    let stdout = d
        .reel(&["export", "demo-deploy", "-o", "-"])
        .expect(0, "export -");
    assert_eq!(
        stdout.stdout,
        std::fs::read_to_string(&tape).expect("tape"),
        "the same tape on stdout"
    );
}

#[test]
fn import_of_a_bad_tape_names_the_file_and_the_line() {
    let d = demo(1);
    let good = d.tmp.path().join("good.tape.jsonl");
    d.reel(&["export", "demo-search", "-o", good.to_str().expect("UTF-8")])
        .expect(0, "export");
    let text = std::fs::read_to_string(&good).expect("tape");
    let mut lines: Vec<&str> = text.lines().collect();
    lines[4] = "{\"seq\": 4, \"kind\": \"progress\", \"data\": ";
    let bad = d.tmp.path().join("bad.tape.jsonl");
    std::fs::write(&bad, lines.join("\n")).expect("write");
    let target = d.tmp.path().join("target");
    let out = reel(&target, &["import", bad.to_str().expect("UTF-8")]).fails("bad tape");
    assert!(out.stderr.contains("bad.tape.jsonl"), "{}", out.stderr);
    assert!(out.stderr.contains("line 5"), "{}", out.stderr);

    // Not a tape at all.
    let not = d.tmp.path().join("notes.txt");
    std::fs::write(&not, "hello\n").expect("write");
    let out = reel(&target, &["import", not.to_str().expect("UTF-8")]).fails("not a tape");
    assert!(out.stderr.contains("notes.txt"), "{}", out.stderr);
    assert!(out.stderr.contains("line 1"), "{}", out.stderr);

    // A file that does not exist.
    let out = reel(&target, &["import", "/nonexistent/x.tape.jsonl"]).fails("no file");
    assert!(
        out.stderr.contains("cannot read /nonexistent/x.tape.jsonl"),
        "{}",
        out.stderr
    );
}

#[test]
fn diff_of_two_recordings_of_the_same_demo() {
    let d = demo(2);
    // Same tool, same answers: the runs match. demo-deploy's github.apply
    // effect returns the clock read the tool passed it; clock reads are
    // not compared, and neither is the same read passed on.
    for run in [
        "demo-deploy",
        "demo-search",
        "demo-deploy-failed",
        "demo-audit-degraded",
    ] {
        let second = format!("{run}-2");
        let out = d.reel(&["diff", run, &second]).expect(0, run);
        assert!(
            out.stdout.contains("the runs match"),
            "{run}:\n{}",
            out.stdout
        );
        assert!(!out.stdout.contains('≠'), "{run}:\n{}", out.stdout);
    }
    // The walk draws a random seed and derives its hops from it: the two
    // walks visited different hops, which is a real difference.
    let out = d
        .reel(&["diff", "demo-walk-cancelled", "demo-walk-cancelled-2"])
        .expect(1, "walks");
    assert!(
        out.stdout.contains("▶ first difference: random.value"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("the runs differ first at fact 2"),
        "{}",
        out.stdout
    );
}

#[test]
fn diff_marks_the_first_difference() {
    let d = demo(1);
    let out = d
        .reel(&["diff", "demo-deploy", "demo-deploy-failed"])
        .expect(1, "diff");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].contains("demo-deploy") && lines[0].contains("│ demo-deploy-failed"));
    assert!(lines[1].starts_with("≠ #0 run.started"), "{}", out.stdout);
    assert!(
        lines[2].starts_with("  ▶ first difference: run.started."),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.matches("▶ first difference").count(), 1);
    // The credential is where the deploys part ways.
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("≠ #3 credential.resolved")
                && l.contains("│ #3 credential.failed")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("(no fact)"));
    assert!(
        out.stdout
            .trim_end()
            .ends_with("the runs differ first at fact 0"),
        "{}",
        out.stdout
    );
    // A run against itself.
    let same = d
        .reel(&["diff", "demo-search", "demo-search"])
        .expect(0, "self");
    assert!(
        same.stdout.contains("the runs match (24 facts"),
        "{}",
        same.stdout
    );
    // An unknown run.
    let unknown = d
        .reel(&["diff", "demo-search", "demo-serch"])
        .fails("unknown");
    assert!(
        unknown.stderr.contains("did you mean demo-search"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn stats_figures() {
    let d = demo(1);
    let out = d.reel(&["stats", "--json"]).expect(0, "stats --json");
    let s: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(s["runs"], 5);
    assert_eq!(s["facts"], 22 + 24 + 13 + 6 + 9);
    assert_eq!(s["artifacts"], 3, "deploy's plan and search's two pages");
    let bytes = s["bytes_on_disk"].as_u64().expect("bytes_on_disk");
    assert!(bytes > 0);
    assert_eq!(s["oldest"][0], "demo-deploy");
    assert_eq!(s["newest"][0], "demo-audit-degraded");

    let text = d.reel(&["stats"]).expect(0, "stats");
    let field = |name: &str| {
        text.stdout
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {name:?} line in\n{}", text.stdout))
            .to_owned()
    };
    assert_eq!(field("runs "), "5");
    assert_eq!(field("facts "), "74");
    assert_eq!(field("artifacts "), "3");
    let text_bytes: u64 = field("bytes ").parse().expect("bytes");
    // Measured a moment apart: sled may have grown its files since.
    assert!(text_bytes >= bytes, "{text_bytes} < {bytes}");
    assert_eq!(
        field("bytes/fact "),
        format!("{:.1}", text_bytes as f64 / 74.0)
    );
    assert!(field("oldest run ").starts_with("demo-deploy ("));
    assert!(field("newest run ").starts_with("demo-audit-degraded ("));
}

#[test]
fn verify_of_a_sound_archive() {
    let d = demo(1);
    let out = d.reel(&["verify"]).expect(0, "verify");
    let expected =
        Regex::new(r"^checked 5 runs, \d+ blocks, 74 facts, 3 artifacts\nok: no problem found\n$")
            .expect("regex");
    assert!(expected.is_match(&out.stdout), "{}", out.stdout);
}

#[test]
fn every_verb_has_an_example() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let top = reel(tmp.path(), &["--help"]).expect(0, "--help");
    // Every verb clap lists (so verbs added later are held to it too).
    let verbs: Vec<String> = top
        .stdout
        .split("Commands:")
        .nth(1)
        .expect("a Commands: section")
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|v| *v != "help")
        .map(str::to_owned)
        .collect();
    for known in [
        "demo", "runs", "show", "tail", "diff", "export", "import", "verify", "stats",
    ] {
        assert!(
            verbs.iter().any(|v| v == known),
            "{known} is listed: {verbs:?}"
        );
    }
    for verb in &verbs {
        let out = reel(tmp.path(), &[verb, "--help"]).expect(0, verb);
        assert!(
            out.stdout.contains("Example:"),
            "`reel {verb} --help` has no example:\n{}",
            out.stdout
        );
    }
    assert!(
        !tmp.path().join("db").exists(),
        "asking for help creates no archive"
    );
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

#[test]
fn unknown_run_suggests_near_matches() {
    let d = demo(1);
    let out = d.reel(&["show", "demo-deplo"]).fails("unknown run");
    assert!(
        out.stderr.contains("no run \"demo-deplo\""),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("did you mean demo-deploy"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    let out = d.reel(&["show", "zzzz"]).fails("far from everything");
    assert!(
        out.stderr.contains("list runs with `reel runs`"),
        "{}",
        out.stderr
    );
    for verb in [
        &["show", "demo-deplo", "--json"][..],
        &["tail", "demo-deplo"],
        &["export", "demo-deplo", "-o", "-"],
    ] {
        let out = d.reel(verb).fails(&format!("{verb:?}"));
        assert!(
            out.stderr.contains("did you mean demo-deploy"),
            "{verb:?}: {}",
            out.stderr
        );
    }
}

#[test]
fn missing_archive_says_how_to_make_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("nowhere");
    for verb in [
        &["runs"][..],
        &["show", "demo-deploy"],
        &["show", "--last"],
        &["tail"],
        &["stats"],
        &["verify"],
        &["export", "demo-deploy", "-o", "-"],
        &["diff", "a", "b"],
    ] {
        let out = reel(&missing, verb).fails(&format!("{verb:?}"));
        assert!(
            out.stderr
                .contains(&format!("no archive at {}", missing.display())),
            "{verb:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("reel demo --archive"),
            "{verb:?}: {}",
            out.stderr
        );
        assert!(!missing.exists(), "{verb:?} must not create the archive");
    }
}

#[test]
fn archive_held_by_a_process_without_a_socket() {
    let d = demo(1);
    let held =
        reel_archive::Archive::open(&d.dir, reel_archive::ArchiveConfig::default()).expect("open");
    for verb in [
        &["runs"][..],
        &["show", "demo-deploy"],
        &["tail"],
        &["stats"],
    ] {
        let out = d.reel(verb).fails(&format!("{verb:?}"));
        assert!(
            out.stderr.contains("held open by another process")
                && out.stderr.contains("serves no live socket"),
            "{verb:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&d.dir.display().to_string()),
            "{}",
            out.stderr
        );
    }
    // A stale socket file (a recorder that died) is no better.
    let sock = d.dir.join("reel.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("bind"));
    assert!(sock.exists());
    let out = d.reel(&["runs"]).fails("stale socket");
    assert!(
        out.stderr.contains("serves no live socket"),
        "{}",
        out.stderr
    );
    drop(held);
    std::fs::remove_file(&sock).expect("remove the stale socket");
    d.reel(&["runs"]).expect(0, "released");
}

/// Length of a block header (see `src/archive/block.rs`).
const HEADER_LEN: usize = 69;

/// Flips the last byte of a middle block of `run` through sled (the archive
/// closed); returns the damaged block's seq range.
fn damage_a_block(dir: &Path, run: &str) -> (u64, u64) {
    let db = open_sled(dir);
    let ordinal = db
        .open_tree("run_ids")
        .expect("run_ids")
        .get(run)
        .expect("get")
        .expect("the run is stored");
    let events = db.open_tree("events").expect("events");
    let firsts: Vec<u64> = events
        .scan_prefix(&ordinal)
        .keys()
        .map(|k| {
            let k = k.expect("key");
            u64::from_be_bytes(k[8..16].try_into().expect("8 bytes"))
        })
        .collect();
    assert!(firsts.len() >= 3, "{run} has several blocks: {firsts:?}");
    let i = firsts.len() / 2;
    let mut key = ordinal.to_vec();
    key.extend_from_slice(&firsts[i].to_be_bytes());
    let mut block = events.get(&key).expect("get").expect("block").to_vec();
    assert!(block.len() > HEADER_LEN);
    let last = block.len() - 1;
    block[last] ^= 0xff;
    events.insert(key, block).expect("insert");
    db.flush().expect("flush");
    (firsts[i], firsts[i + 1] - 1)
}

#[test]
fn a_corrupted_block_shows_the_rest_and_marks_the_gap() {
    let d = demo(1);
    let (first, last) = damage_a_block(&d.dir, "demo-deploy");
    let range = reel_viewer::timeline::seq_range(first, Some(last));

    let out = d.reel(&["show", "demo-deploy"]).expect(2, "show");
    assert!(!out.stderr.contains("panicked"));
    let lines = fact_lines(&out.stdout);
    let seqs: Vec<u64> = lines.iter().map(|(s, _, _)| *s).collect();
    let expected: Vec<u64> = (0..22).filter(|s| *s < first || *s > last).collect();
    assert_eq!(
        seqs, expected,
        "every fact but the damaged ones:\n{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains(&format!("✗ {range} damaged: could not be read")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("{range} could not be read:")),
        "the summary lists the gap as an anomaly:\n{}",
        out.stdout
    );
    assert!(out.stdout.contains("run.ended completed"));

    let json = d
        .reel(&["show", "demo-deploy", "--json"])
        .expect(2, "show --json");
    let v: Value = serde_json::from_str(&json.stdout).expect("JSON, even damaged");
    let gaps: Vec<_> = v["timeline"]["anomalies"]
        .as_array()
        .expect("anomalies")
        .iter()
        .filter(|a| a["anomaly"] == "gap")
        .map(|a| (a["first"].as_u64(), a["last"].as_u64()))
        .collect();
    assert_eq!(gaps, [(Some(first), Some(last))]);

    let verify = d.reel(&["verify"]).expect(2, "verify");
    assert!(
        verify.stdout.contains("\n1 problem:\n"),
        "{}",
        verify.stdout
    );
    assert!(
        verify
            .stdout
            .contains(&format!("run demo-deploy, seq {first}..={last}: ")),
        "{}",
        verify.stdout
    );
    // The other runs are untouched and the listing still works.
    d.reel(&["show", "demo-search"]).expect(0, "another run");
    let runs = d.reel(&["runs"]).expect(0, "runs");
    assert_eq!(listed(&runs.stdout).len(), 5);
    // A diff cannot align a run with a hole: it says so.
    let diff = d
        .reel(&["diff", "demo-deploy", "demo-search"])
        .fails("diff");
    assert!(diff.stderr.contains("damaged"), "{}", diff.stderr);
}

/// Opens an archive's sled database directly, waiting a moment for sled's
/// own background writes of the just-closed archive to let go of the lock.
fn open_sled(dir: &std::path::Path) -> sled::Db {
    let started = std::time::Instant::now();
    loop {
        match sled::open(dir) {
            Ok(db) => return db,
            Err(e) if started.elapsed() < std::time::Duration::from_secs(5) => {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("sled does not open {}: {e}", dir.display()),
        }
    }
}

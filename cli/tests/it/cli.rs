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
        // Into a pipe without COLUMNS: whole lines.
        .env_remove("COLUMNS")
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
            // A redaction marker's tag is keyed like a fingerprint.
            (r"\[REDACTED:[0-9a-f]{16}\]".to_owned(), "[REDACTED:[tag]]"),
            (r"0x[0-9a-f]{16}".to_owned(), "0x[random]"),
            (r"hop-[0-9a-f]{4}".to_owned(), "hop-[random]"),
            // Cut lines may end inside an id: any run of its digits goes.
            (r"\bart-[0-9a-f]+".to_owned(), "art-[id]"),
            // Invocation ids: 128 random bits per call, like artifact ids.
            (r"\binv-[0-9a-f]+".to_owned(), "inv-[id]"),
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

/// `normalize` for lines sized to 80 columns. A cut line (80 characters,
/// or a diff cell as wide as its column: `cell`) may end inside a
/// volatile value, and a volatile value of another length before the cut
/// moves it: so a cut keeps what precedes its last volatile value (then
/// `⟨cut⟩`), else loses its last 12 characters to `⟨cut⟩`.
fn normalize_sized(text: &str, cell: Option<usize>) -> String {
    static TIME: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\d{4}-\d{2}-\d{2}T[0-9:.]*Z?").expect("regex"));
    static DURATION: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\[duration\] +").expect("regex"));
    static CUT: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
        [
            (
                r"(\[(?:duration|time|fingerprint|random|id|unix-nanos)\])[^…]*…$",
                "$1 ⟨cut⟩",
            ),
            (r".{1,12}…$", "⟨cut⟩"),
        ]
        .into_iter()
        .map(|(re, to)| (Regex::new(re).expect("a valid regex"), to))
        .collect()
    });
    let piece = |raw: &str, cut: bool| {
        let mut out = normalize(&TIME.replace_all(raw, "[time]"));
        out = DURATION.replace_all(&out, "[duration] ").into_owned();
        if cut {
            for (re, to) in CUT.iter() {
                out = re.replace(&out, *to).into_owned();
            }
        }
        out
    };
    let width = |s: &str| s.chars().count();
    let mut out = String::new();
    for line in text.lines() {
        match (cell, line.split_once(" │ ")) {
            (Some(col), Some((left, right))) => {
                let left = left.trim_end();
                out.push_str(&piece(left, width(left) == col + 2));
                out.push_str(" │ ");
                out.push_str(&piece(right, width(right) == col));
            }
            _ => out.push_str(&piece(line, width(line) == 80)),
        }
        out.push('\n');
    }
    out
}

/// `normalize` for the `runs` table sized to a terminal: each run's age
/// becomes `[age]`, padded as it was; columns are one space apart. (Its
/// cuts are of tools, tenants and ids: nothing volatile.)
fn normalize_table(text: &str) -> String {
    static AGE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r" +\d+[smhd] ago\b").expect("regex"));
    static DURATION: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\[duration\] +").expect("regex"));
    let out = AGE.replace_all(text, |c: &regex::Captures| {
        format!(
            "{}[age]",
            " ".repeat(c[0].chars().count().saturating_sub(5))
        )
    });
    DURATION
        .replace_all(&normalize(&out), "[duration] ")
        .into_owned()
}

/// `reel ARGS` as on an 80-column terminal (`COLUMNS=80`, into a pipe).
fn reel_80(archive: &Path, args: &[&str]) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(archive)
        .args(["--color", "never"])
        .args(args)
        .env_remove("REEL_ARCHIVE")
        .env("COLUMNS", "80")
        .output()
        .expect("the reel binary runs");
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// Asserts no line of `text` is wider than 80 characters.
fn fits_80(what: &str, text: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= 80,
            "{what}: a line of {} characters:\n{line}",
            line.chars().count()
        );
    }
}

#[test]
fn eighty_columns_are_readable() {
    let d = demo(1);
    let runs = reel_80(&d.dir, &["runs"]).expect(0, "runs");
    fits_80("runs", &runs.stdout);
    // Every column is still there, headed as ever; every run id whole.
    assert!(
        runs.stdout
            .starts_with("RUN                 STARTED DURATION STATUS    TENANT TOOLS"),
        "{}",
        runs.stdout
    );
    assert_eq!(listed(&runs.stdout).len(), 5);
    snapshot("runs_80", &normalize_table(&runs.stdout));
    for run in DEMO_RUNS {
        let out = reel_80(&d.dir, &["show", run]).expect(0, run);
        fits_80(run, &out.stdout);
        // One line per fact still, every fact listed.
        let whole = d.reel(&["show", run]).expect(0, run);
        assert_eq!(
            fact_lines(&out.stdout).len(),
            fact_lines(&whole.stdout).len(),
            "{run}"
        );
        snapshot(
            &format!("show_80_{run}"),
            &normalize_sized(&out.stdout, None),
        );
    }
    let diff = reel_80(&d.dir, &["diff", "demo-deploy", "demo-deploy-failed"]).expect(1, "diff");
    fits_80("diff", &diff.stdout);
    // `≠ ` + a cell + ` │ ` + a cell.
    snapshot(
        "diff_80",
        &normalize_sized(&diff.stdout, Some((80 - 5) / 2)),
    );
    // --width still says how wide a diff is.
    let wide = reel_80(
        &d.dir,
        &[
            "diff",
            "demo-deploy",
            "demo-deploy-failed",
            "--width",
            "120",
        ],
    )
    .expect(1, "diff --width");
    assert!(
        wide.stdout.lines().any(|l| l.chars().count() > 80)
            && wide.stdout.lines().all(|l| l.chars().count() <= 120),
        "{}",
        wide.stdout
    );
    // In colour, the colours take no column.
    let coloured = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(&d.dir)
        .args(["--color", "always", "show", "demo-deploy"])
        .env("COLUMNS", "80")
        .output()
        .expect("runs");
    let coloured = String::from_utf8(coloured.stdout).expect("UTF-8");
    assert!(coloured.contains("\x1b["), "painted");
    let colours = Regex::new("\x1b\\[[0-9;]*m").expect("regex");
    let plain = colours.replace_all(&coloured, "");
    fits_80("show in colour", &plain);
    assert_eq!(
        plain,
        reel_80(&d.dir, &["show", "demo-deploy"]).stdout,
        "the same lines, painted"
    );
    // Into a pipe without COLUMNS, lines are whole (scripts read them).
    let piped = d.reel(&["show", "demo-deploy"]).expect(0, "piped");
    assert!(piped.stdout.lines().any(|l| l.chars().count() > 80));
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
    // Every verb that prints a verdict or a table paints with --color
    // always, and says the same words as without colours.
    let colours = Regex::new("\x1b\\[[0-9;]*m").expect("regex");
    for args in [
        &["runs"][..],
        &["verify"],
        &["stats"],
        &["diff", "demo-deploy", "demo-deploy-failed"],
    ] {
        let painted = Command::new(env!("CARGO_BIN_EXE_reel"))
            .arg("--archive")
            .arg(&d.dir)
            .args(["--color", "always"])
            .args(args)
            .output()
            .expect("runs");
        let painted = String::from_utf8(painted.stdout).expect("UTF-8");
        assert!(painted.contains("\x1b["), "{args:?}: --color always paints");
        let never = d.reel(args);
        assert!(!never.stdout.contains('\x1b'), "{args:?}: --color never");
        assert_eq!(
            colours.replace_all(&painted, ""),
            never.stdout,
            "{args:?}: the same words, painted"
        );
    }
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

/// Every `--json` is one document, indented the same way (two spaces a
/// level), `show`'s too (it streams, fact by fact).
#[test]
fn every_json_is_one_indented_document() {
    let d = demo(1);
    for args in [
        &["runs", "--json"][..],
        &["show", "demo-deploy", "--json"],
        &[
            "show",
            "demo-deploy",
            "--json",
            "--kind",
            "elicit.requested",
        ],
        &["stats", "--json"],
        &["verify", "--json"],
    ] {
        let out = d.reel(args).expect(0, "json");
        let doc: serde_json::Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not one JSON document: {e}"));
        let again = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        assert_eq!(
            out.stdout, again,
            "{args:?}: indented as serde_json's pretty printer does"
        );
    }
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

/// The ANOMALIES cell of each run `reel runs` lists.
fn anomalies_column(table: &str) -> Vec<(String, String)> {
    table
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("demo-"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            Some((cells.first()?.to_string(), cells.last()?.to_string()))
        })
        .collect()
}

/// Every view of every run counts its anomalies alike: the `runs` table
/// and its JSON, `show`'s summary, its JSON timeline and the HTML page.
/// `runs` exits `runs_code` (2 when it met damage counting).
fn anomalies_agree(d: &Demo, expected: &[(&str, usize)], runs_code: i32) {
    let table = d.reel(&["runs"]).expect(runs_code, "runs");
    let column = anomalies_column(&table.stdout);
    let json: Value = serde_json::from_str(
        &d.reel(&["runs", "--json"])
            .expect(runs_code, "runs --json")
            .stdout,
    )
    .expect("JSON");
    for &(run, n) in expected {
        let cell = column
            .iter()
            .find(|(id, _)| id == run)
            .map(|(_, c)| c.clone());
        assert_eq!(cell, Some(n.to_string()), "runs: {run}\n{}", table.stdout);
        let listed = json["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .find(|r| r["run_id"] == run)
            .expect("listed");
        assert_eq!(listed["anomalies"], n, "runs --json: {run}");
        let shown = d.reel(&["show", run]).stdout;
        let said = if n == 0 {
            "\nanomalies none\n".to_owned()
        } else {
            format!("\nanomalies ({n})\n")
        };
        assert!(shown.contains(&said), "show {run}: {said:?} in\n{shown}");
        let doc: Value =
            serde_json::from_str(&d.reel(&["show", run, "--json"]).stdout).expect("JSON");
        assert_eq!(
            doc["timeline"]["anomalies"].as_array().map(Vec::len),
            Some(n),
            "show --json: {run}"
        );
        let page = d.tmp.path().join(format!("{run}.html"));
        let html = d.reel(&["show", run, "--html", page.to_str().expect("UTF-8")]);
        assert!(
            html.stderr.contains(&format!("anomalies: {n})")),
            "show --html: {run}: {}",
            html.stderr
        );
        let page = std::fs::read_to_string(&page).expect("the page");
        if n > 0 {
            assert!(
                page.contains(&format!("<h2>Anomalies ({n})</h2>")),
                "{run}: the page's anomalies"
            );
        } else {
            assert!(!page.contains("<h2>Anomalies"), "{run}: no anomalies");
        }
    }
}

#[test]
fn anomalies_are_counted_alike_by_every_view() {
    let d = demo(1);
    anomalies_agree(
        &d,
        &[
            ("demo-deploy", 1), // its session cleanup failed
            ("demo-search", 0),
            ("demo-walk-cancelled", 1), // a cancel after the call ended
            ("demo-deploy-failed", 1),  // its credential failed
            ("demo-audit-degraded", 0),
        ],
        0,
    );
    let deploy = d.reel(&["show", "demo-deploy"]).expect(0, "show");
    assert!(
        deploy
            .stdout
            .contains("(session scope) failed at #19: cache directory was already gone"),
        "a failed cleanup is named:\n{}",
        deploy.stdout
    );
    // Damage is an anomaly too, in every view (`show` exits 2 for it):
    // the gap, and what it hides (which facts depends on where the writer
    // cut the blocks: an end or a cleanup's run may be in it).
    damage_a_block(&d.dir, "demo-deploy");
    let doc: Value =
        serde_json::from_str(&d.reel(&["show", "demo-deploy", "--json"]).stdout).expect("JSON");
    let n = doc["timeline"]["anomalies"].as_array().map_or(0, Vec::len);
    assert!(n >= 2, "the gap and the failed cleanup, at least: {n}");
    anomalies_agree(&d, &[("demo-deploy", n), ("demo-search", 0)], 2);
}

#[test]
fn show_refuses_a_filter_that_cannot_match_by_name() {
    let d = demo(1);
    let page = d.tmp.path().join("page.html");
    let page_arg = page.to_str().expect("UTF-8");
    for view in [&[][..], &["--json"], &["--html", page_arg]] {
        let mut args = vec!["show", "demo-search", "--kind", "bogus"];
        args.extend(view);
        let out = d.reel(&args).expect(64, "an unknown kind");
        assert!(
            out.stderr.contains("--kind bogus: no fact is of that kind")
                && out
                    .stderr
                    .contains("the kinds are run.started, call.started,")
                && out.stderr.contains("call.ended, model.called, run.ended"),
            "{view:?}: {}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "{view:?}: {}", out.stdout);
        let mut args = vec!["show", "demo-search", "--call", "c9"];
        args.extend(view);
        let out = d.reel(&args).expect(1, "an unknown call");
        assert!(
            out.stderr.contains(
                "--call c9: run demo-search has no such call; its calls are c1 (search), c2 (fetch), c3 (fetch)"
            ),
            "{view:?}: {}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "{view:?}: {}", out.stdout);
        assert!(!page.exists(), "no page is written for a refused filter");
    }
    let near = d
        .reel(&["show", "demo-search", "--kind", "progres"])
        .expect(64, "a near kind");
    assert!(
        near.stderr.contains("did you mean progress?"),
        "{}",
        near.stderr
    );
    // What can match still does.
    d.reel(&[
        "show",
        "demo-search",
        "--kind",
        "teardown.ran",
        "--call",
        "c3",
    ])
    .expect(0, "a kind the run has not, of a call it has");
}

#[test]
fn show_without_a_run_says_how_to_name_one() {
    let d = demo(1);
    let out = d.reel(&["show"]).expect(64, "no run");
    assert!(
        out.stderr.contains("`reel show --last`") && out.stderr.contains("`reel runs`"),
        "{}",
        out.stderr
    );
}

#[test]
fn runs_since_a_date_alone() {
    let d = demo(1);
    let all: Vec<&str> = DEMO_RUNS.iter().rev().copied().collect();
    for (args, expected) in [
        (["--since", "2000-01-01"], all.clone()),
        (["--since", "2999-01-01"], vec![]),
        (["--until", "2999-01-01"], all),
        (["--until", "2000-01-01"], vec![]),
    ] {
        let mut full = vec!["runs"];
        full.extend(args);
        let out = d.reel(&full).expect(0, &format!("{args:?}"));
        assert_eq!(listed(&out.stdout), expected, "{args:?}");
    }
    let bad = d
        .reel(&["runs", "--since", "2027-13-45"])
        .expect(64, "not a date");
    assert!(bad.stderr.contains("a date (2026-11-30)"), "{}", bad.stderr);
}

#[test]
fn an_empty_reel_archive_is_unset() {
    let tmp = tempfile::tempdir().expect("tempdir");
    reel(&tmp.path().join("reel-archive"), &["demo"]).expect(0, "demo");
    // No --archive: the default ./reel-archive, as if REEL_ARCHIVE were unset.
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["runs"])
        .current_dir(tmp.path())
        .env("REEL_ARCHIVE", "")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(listed(&stdout).len(), 5, "{stdout}");
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
            .contains("exported run demo-deploy (22 facts, 1 artifact)"),
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

/// The advice of a duplicate import works: `--as` imports the run again
/// beside itself, the same run under the new id (its artifacts' origin
/// too), and the archive verifies.
#[test]
fn a_duplicate_import_under_a_new_id() {
    let d = demo(1);
    let tape = d.tmp.path().join("deploy.tape.jsonl");
    let tape_arg = tape.to_str().expect("UTF-8 path");
    d.reel(&["export", "demo-deploy", "-o", tape_arg])
        .expect(0, "export");
    let twice = d.reel(&["import", tape_arg]).expect(1, "a second import");
    assert!(
        twice.stderr.contains("reel import TAPE --as NEW-ID"),
        "the refusal says how: {}",
        twice.stderr
    );
    let copy = d
        .reel(&["import", tape_arg, "--as", "deploy-copy"])
        .expect(0, "import --as");
    assert!(
        copy.stdout
            .starts_with("imported run deploy-copy (22 facts, completed)"),
        "{}",
        copy.stdout
    );
    // Fact for fact the same run (`diff` ignores the run id itself).
    d.reel(&["diff", "demo-deploy", "deploy-copy"])
        .expect(0, "the copy matches its original");
    let shown = d
        .reel(&["show", "deploy-copy", "--json"])
        .expect(0, "show the copy");
    assert!(
        !shown.stdout.contains("\"demo-deploy\""),
        "no field names the old id"
    );
    let doc: Value = serde_json::from_str(&shown.stdout).expect("JSON");
    let put = doc["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "artifact.put")
        .expect("the deploy puts an artifact");
    assert_eq!(put["data"]["meta"]["origin"]["run_id"], "deploy-copy");
    d.reel(&["verify"]).expect(0, "the archive verifies");
    // The original is untouched.
    let original = d.reel(&["show", "demo-deploy", "--json"]).expect(0, "show");
    assert!(original.stdout.contains("\"run_id\": \"demo-deploy\""));
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
        out.stdout.contains("▶ first difference: random:/value"),
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
        lines[2].starts_with("  ▶ first difference: run.started:/"),
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
fn one_of_a_thing_is_said_in_the_singular() {
    let d = demo(1);
    // An archive of one run, holding one artifact.
    let tape = d.tmp.path().join("deploy.tape.jsonl");
    let tape_arg = tape.to_str().expect("UTF-8");
    let exported = d
        .reel(&["export", "demo-deploy", "-o", tape_arg])
        .expect(0, "export");
    let one = d.tmp.path().join("one");
    reel(&one, &["import", tape_arg]).expect(0, "import");
    let salvaged = d.tmp.path().join("salvaged");
    let outputs = [
        exported.stderr,
        reel(&one, &["verify"]).expect(0, "verify").stdout,
        reel(&one, &["prune", "--older-than", "0s", "--dry-run"])
            .expect(0, "prune")
            .stdout,
        reel(
            &one,
            &[
                "salvage",
                one.to_str().expect("UTF-8"),
                "--into",
                salvaged.to_str().expect("UTF-8"),
            ],
        )
        .expect(0, "salvage")
        .stdout,
        reel(&one, &["show", "demo-deploy"])
            .expect(0, "show")
            .stdout,
    ];
    let all = outputs.join("\n");
    let wrong = Regex::new(r"\b1 (run|artifact|fact|block|call|span|repeat)s\b").expect("regex");
    assert!(!wrong.is_match(&all), "a plural for one:\n{all}");
    for said in [
        "exported run demo-deploy (22 facts, 1 artifact) to",
        "checked 1 run, ",
        ", 22 facts, 1 artifact\n",
        "would delete 1 run (",
        "and 1 artifact no remaining run refers to",
        "recovered: 1 run (0 with facts lost), ",
        "(+1 repeat)",
    ] {
        assert!(all.contains(said), "{said:?} in\n{all}");
    }
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

/// The `reel demo --archive DIR` an error advises, if it advises one.
fn advised_demo(stderr: &str) -> Option<String> {
    let at = stderr.find("`reel demo --archive ")? + "`reel demo --archive ".len();
    let len = stderr[at..].find('`')?;
    Some(stderr[at..at + len].to_owned())
}

/// `reel --archive ARCHIVE ARGS`, run in `cwd` (advice names paths as given).
fn reel_in(cwd: &Path, archive: &str, args: &[&str]) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["--archive", archive])
        .args(args)
        .current_dir(cwd)
        .env_remove("REEL_ARCHIVE")
        .output()
        .expect("the reel binary runs");
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn the_advice_for_a_folder_that_is_no_archive_works() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cwd = tmp.path();
    std::fs::create_dir(cwd.join("notarchive")).expect("mkdir");
    std::fs::write(cwd.join("notarchive/notes.txt"), "mine\n").expect("write");
    std::fs::write(cwd.join("file.txt"), "mine\n").expect("write");
    // The default's name taken by other files too: the advice goes past it.
    std::fs::create_dir(cwd.join("reel-archive")).expect("mkdir");
    std::fs::write(cwd.join("reel-archive/notes.txt"), "mine\n").expect("write");
    for (given, is) in [
        ("./notarchive", "a directory of other files"),
        ("file.txt", "a file"),
        ("./reel-archive", "a directory of other files"),
        ("./nowhere", ""),
    ] {
        let out = reel_in(cwd, given, &["runs"]).fails(given);
        if is.is_empty() {
            assert!(
                out.stderr.contains("no archive at ./nowhere"),
                "{}",
                out.stderr
            );
        } else {
            assert!(
                out.stderr
                    .contains(&format!("{given} is not a reel archive ({is})")),
                "{}",
                out.stderr
            );
        }
        // Following the advice works, and shows the runs it recorded.
        let advised = advised_demo(&out.stderr).expect("advice to record one");
        let recorded = reel_in(cwd, &advised, &["demo"]);
        assert_eq!(
            recorded.code,
            Some(0),
            "{given}: {advised}: {}",
            recorded.stderr
        );
        let runs = reel_in(cwd, &advised, &["runs"]).expect(0, &advised);
        assert_eq!(listed(&runs.stdout).len(), 5, "{}", runs.stdout);
        // Nothing of the operator's was touched.
        assert_eq!(
            std::fs::read_to_string(cwd.join("notarchive/notes.txt")).expect("kept"),
            "mine\n"
        );
        if advised != given {
            std::fs::remove_dir_all(cwd.join(&advised)).expect("clean up");
        }
    }
}

/// `salvage` of a folder that holds nothing of an archive says so and
/// fails, rather than "recovering" nothing as if it had looked; a first
/// `sync` that cannot reach its cluster leaves no empty projection behind
/// (and one that existed is kept).
#[test]
fn salvage_and_sync_refuse_what_is_not_theirs_and_leave_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let notes = tmp.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::write(notes.join("todo.txt"), "not an archive").unwrap();
    let into = tmp.path().join("salvaged");
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["salvage"])
        .arg(&notes)
        .arg("--into")
        .arg(&into)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is not a reel archive")
            && stderr.contains("pass the damaged archive's directory"),
        "{stderr}"
    );
    assert!(!into.exists(), "nothing written");

    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("nats://127.0.0.1:{port}");
    let fleet = tmp.path().join("fleet");
    let failed =
        reel(&fleet, &["sync", "--nats", &url]).expect(1, "sync of an unreachable cluster");
    assert!(failed.stderr.contains("connecting"), "{}", failed.stderr);
    assert!(!fleet.exists(), "the projection it created is gone");
    let d = demo(1);
    d.reel(&["sync", "--nats", &url])
        .expect(1, "sync into an existing archive");
    d.reel(&["show", "demo-deploy"])
        .expect(0, "the existing archive is kept");
}

#[test]
fn a_file_that_is_no_tape_is_called_so() {
    let d = demo(1);
    let target = d.tmp.path().join("target");
    for (name, bytes, why) in [
        (
            "notes.txt",
            &b"hello\n"[..],
            "its first line is no JSON object: line 1",
        ),
        ("empty.txt", b"", "it is empty"),
        (
            "bytes.bin",
            b"\xff\xfe\x00\x01\n",
            "line 1: not valid UTF-8",
        ),
        (
            "list.json",
            b"[1, 2, 3]\n",
            "its first line is no JSON object",
        ),
    ] {
        let file = d.tmp.path().join(name);
        std::fs::write(&file, bytes).expect("write");
        let out = reel(&target, &["import", file.to_str().expect("UTF-8")]).fails(name);
        assert!(
            out.stderr
                .contains(&format!("{} is not a reel tape (", file.display()))
                && out.stderr.contains(why)
                && out.stderr.contains("import a tape `reel export` wrote"),
            "{name}: {}",
            out.stderr
        );
    }
    // A JSON object that is no header keeps the header's hint.
    let file = d.tmp.path().join("object.jsonl");
    std::fs::write(&file, "{\"a\": 1}\n").expect("write");
    let out = reel(&target, &["import", file.to_str().expect("UTF-8")]).fails("object");
    assert!(
        out.stderr.contains("is this a reel tape?"),
        "{}",
        out.stderr
    );
}

#[test]
fn show_html_to_standard_output() {
    let d = demo(1);
    let out = reel_in(
        d.tmp.path(),
        d.dir.to_str().expect("UTF-8"),
        &["show", "demo-search", "--html", "-"],
    )
    .expect(0, "--html -");
    assert!(out.stdout.starts_with("<!doctype html>"), "{}", out.stdout);
    assert!(out.stdout.trim_end().ends_with("</html>"), "the whole page");
    assert!(out.stderr.contains("to standard output"), "{}", out.stderr);
    assert!(!d.tmp.path().join("-").exists(), "no file named -");
    let page = d.tmp.path().join("page.html");
    d.reel(&[
        "show",
        "demo-search",
        "--html",
        page.to_str().expect("UTF-8"),
    ])
    .expect(0, "--html FILE");
    assert_eq!(
        std::fs::read_to_string(&page).expect("page").len(),
        out.stdout.len(),
        "the same page either way"
    );
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
    let range = reel::gap::seq_range(first, Some(last));

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
    // `runs` reads the facts it counts anomalies in: it lists every run,
    // says which one is damaged, and exits 2 as every verb meeting damage.
    let runs = d.reel(&["runs"]).expect(2, "runs");
    assert_eq!(listed(&runs.stdout).len(), 5);
    assert!(
        runs.stderr
            .starts_with("reel: damaged: facts of demo-deploy could not be read"),
        "{}",
        runs.stderr
    );
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

/// `reel ARGS` whose standard output is closed by its reader before reel
/// writes (`reel runs | head -0`), or after `read` lines (`| head -1`).
fn reel_into_closed_pipe(archive: &Path, args: &[&str], read: usize) -> Ran {
    use std::io::{BufRead, BufReader, Read};
    let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(archive)
        .args(args)
        .env_remove("REEL_ARCHIVE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the reel binary runs");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout);
    let mut taken = String::new();
    for _ in 0..read {
        lines.read_line(&mut taken).expect("a line");
    }
    drop(lines);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    let status = child.wait().expect("reel ends");
    Ran {
        code: status.code(),
        stdout: taken,
        stderr,
    }
}

#[test]
fn a_reader_that_stops_early_ends_reel_quietly() {
    let d = demo(1);
    let tape = d.tmp.path().join("deploy.tape.jsonl");
    for args in [
        &["runs"][..],
        &["runs", "--json"],
        &["show", "demo-search"],
        &["show", "demo-search", "--json"],
        &["show", "--last", "--kind", "progress"],
        &["tail", "demo-deploy"],
        &["diff", "demo-deploy", "demo-deploy-failed"],
        &["export", "demo-deploy", "-o", "-"],
        &["stats"],
        &["verify"],
        &["import", tape.to_str().expect("UTF-8")],
    ] {
        if args[0] == "import" {
            d.reel(&["export", "demo-deploy", "-o", args[1]])
                .expect(0, "a tape to import");
        }
        for read in [0, 1] {
            let archive = if args[0] == "import" {
                d.tmp.path().join(format!("into-{read}"))
            } else {
                d.dir.clone()
            };
            let out = reel_into_closed_pipe(&archive, args, read);
            // `diff` still says the runs differ; the rest are done.
            let code = if args[0] == "diff" { 1 } else { 0 };
            assert_eq!(out.code, Some(code), "{args:?} after {read} lines: {out:?}");
            assert_eq!(out.stderr, "", "{args:?} after {read} lines says nothing");
        }
    }
}

// ---------------------------------------------------------------------------
// Exit codes (the book's "Exit codes" page, docs/src/exit-codes.md)
// ---------------------------------------------------------------------------

/// The codes the book's "Exit codes" table lists, with their meaning cell.
fn book_exit_codes() -> Vec<(i32, String)> {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/src/exit-codes.md"
    ))
    .expect("docs/src/exit-codes.md");
    let section = page
        .split("# Exit codes\n")
        .nth(1)
        .expect("the page has an \"Exit codes\" heading");
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let mut cells = l.trim_matches('|').split('|').map(str::trim);
            let code = cells.next()?.parse().ok()?;
            Some((code, cells.next()?.to_owned()))
        })
        .collect()
}

#[test]
fn exit_codes_follow_the_book_table() {
    let table = book_exit_codes();
    let codes: Vec<i32> = table.iter().map(|(c, _)| *c).collect();
    assert_eq!(codes, [0, 1, 2, 64], "{table:?}");
    let meaning = |code: i32| &table.iter().find(|(c, _)| *c == code).expect("listed").1;
    assert!(meaning(2).contains("damage, and nothing else"), "{table:?}");
    assert!(meaning(64).contains("command line"), "{table:?}");

    let d = demo(1);
    let notes = d.tmp.path().join("notes.txt");
    std::fs::write(&notes, "hello\n").expect("write");
    let notes = notes.to_str().expect("UTF-8 path");
    let cases: Vec<(Vec<&str>, i32)> = vec![
        // Done.
        (vec!["runs"], 0),
        (vec!["show", "demo-deploy"], 0),
        (vec!["diff", "demo-search", "demo-search"], 0),
        (vec!["--help"], 0),
        (vec!["--version"], 0),
        (vec!["show", "--help"], 0),
        // A failure that is not damage, or a difference.
        (vec!["show", "demo-deplo"], 1),
        (vec!["export", "demo-deplo", "-o", "-"], 1),
        (vec!["import", notes], 1),
        (vec!["diff", "demo-deploy", "demo-deploy-failed"], 1),
        // The command line is wrong.
        (vec!["frobnicate"], 64),
        (vec!["--bogus"], 64),
        (vec!["runs", "--bogus"], 64),
        (vec!["runs", "--limit", "many"], 64),
        (vec!["runs", "--since", "last tuesday"], 64),
        (vec!["show"], 64),
        (
            vec!["show", "demo-deploy", "--json", "--html", "x.html"],
            64,
        ),
        (vec!["diff", "demo-deploy"], 64),
        (vec!["export"], 64),
        (vec!["export", "demo-deploy"], 64),
        (
            vec!["prune", "--older-than", "1d", "--status", "running"],
            64,
        ),
        (vec!["mcp", "mock", notes], 64),
        (vec!["mcp", "mock", "demo-deploy", "--ignore", "nonce"], 64),
    ];
    for (args, code) in &cases {
        let out = d.reel(args);
        assert!(
            codes.contains(code),
            "{args:?}: {code} is not in the book's table"
        );
        assert!(!out.stderr.contains("panicked"), "{args:?}: {}", out.stderr);
        assert_eq!(
            out.code,
            Some(*code),
            "{args:?}: exit code\n--- stdout\n{}\n--- stderr\n{}",
            out.stdout,
            out.stderr
        );
        if *code > 1 {
            assert!(!out.stderr.is_empty(), "{args:?} says why");
        }
    }
    // Damage, and only damage, exits 2.
    damage_a_block(&d.dir, "demo-deploy");
    for args in [
        &["show", "demo-deploy"][..],
        &["show", "demo-deploy", "--json"],
        &["verify"],
    ] {
        d.reel(args).expect(2, &format!("{args:?} on damage"));
    }
    d.reel(&["bogus-verb"])
        .expect(64, "a usage error on a damaged archive");
}

//! Terminal injection: recorded strings that would drive the operator's
//! terminal (ESC, CSI, OSC ended by BEL and by ST, C1 controls, bidi
//! overrides, line separators) are planted in every field a tape can carry
//! (run id, session, tenant, principal, producer, labels, call ids, tool
//! names, credential needs and reasons, progress messages, log data,
//! artifact ids and media types, effect names, elicitation messages,
//! outputs, cancel reasons, cleanup keys, errors, a kind's own name),
//! imported with the real `reel import`, and then every verb that prints is
//! run, with `--color never` and `--color always`. The raw bytes of stdout
//! and stderr are checked: valid UTF-8 without a single control character
//! but newline, C1 code point, bidi control or line separator, except the
//! colour sequences reel itself paints. The payloads must still be visible,
//! escaped (`\u{1b}`), and JSON output must parse back to the original
//! strings. `reel lsp` (JSON-RPC for editors, not a terminal) is checked to
//! carry the strings unchanged.
//!
//! The checks here do not use reel's own escaping function: what is
//! allowed on a terminal is spelled out below, independently.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// The payloads
// ---------------------------------------------------------------------------

/// Everything a terminal would act on, in one string (no `/`, so that it
/// can be a file name too).
const EVIL: &str = concat!(
    "\u{1b}]0;PWNED\u{7}",       // OSC: set the window title, ended by BEL
    "\u{1b}]8;;x\u{1b}\\",       // OSC 8: a hyperlink, ended by ST (ESC \)
    "\u{1b}[2J\u{1b}[H",         // CSI: clear the screen, cursor home
    "\u{1b}[31mred",             // CSI SGR: the kind of sequence reel paints
    "\u{9b}2J",                  // C1 CSI: clear the screen in one code point
    "\u{9d}0;C1\u{9c}",          // C1 OSC ... C1 ST
    "\u{202e}txt.exe",           // right-to-left override
    "\u{2067}rli\u{2069}",       // right-to-left isolate ... pop
    "\u{2028}\n\r\t\u{7f}\u{8}", // line separator, newline, CR, tab, DEL, BS
    "\\u{1b}",                   // a literal backslash-u: not an ESC
);

/// [`EVIL`] as reel shows it: every character above as `\u{HEX}`, the
/// backslashes that would read as escapes doubled.
const EVIL_SHOWN: &str = concat!(
    r"\u{1b}]0;PWNED\u{7}",
    r"\u{1b}]8;;x\u{1b}\\",
    r"\u{1b}[2J\u{1b}[H",
    r"\u{1b}[31mred",
    r"\u{9b}2J",
    r"\u{9d}0;C1\u{9c}",
    r"\u{202e}txt.exe",
    r"\u{2067}rli\u{2069}",
    r"\u{2028}\u{a}\u{d}\u{9}\u{7f}\u{8}",
    r"\\u{1b}",
);

fn run_a() -> String {
    format!("run-a{EVIL}")
}

fn run_b() -> String {
    format!("run-b{EVIL}")
}

/// A tape of one run with [`EVIL`] in every string field. `args` differs
/// between the two runs, so that `reel diff` has a difference to quote
/// (under a key that is itself [`EVIL`]).
fn evil_tape(run_id: &str, args: &str) -> String {
    let e = EVIL;
    let call = format!("c{e}");
    let tool = format!("tool{e}");
    let who = json!({"tenant": format!("tenant{e}"), "principal": format!("principal{e}"), "conversation": e});
    let kinds: Vec<(Option<&str>, String, Value)> = vec![
        (
            None,
            "run.started".into(),
            json!({"run_id": run_id, "session_id": format!("session{e}"), "identity": who,
                   "producer": {"name": format!("producer{e}"), "version": e},
                   "labels": {e: e}, "teardown_scopes": ["call", "run"]}),
        ),
        (
            Some(&call),
            "call.started".into(),
            json!({"call_id": call, "tool_name": tool, "mode": "async", "args": {e: args}}),
        ),
        (
            Some(&call),
            "credential.requested".into(),
            json!({"need": e, "mode": "pulled"}),
        ),
        (
            Some(&call),
            "credential.failed".into(),
            json!({"need": e, "mode": "pulled", "reason": e}),
        ),
        (
            Some(&call),
            "progress".into(),
            json!({"payload": {"message": format!("progress{e}")}, "count": 1}),
        ),
        (
            Some(&call),
            "log".into(),
            json!({"level": "warning", "subflow": e, "data": format!("log{e}"), "delivered": true}),
        ),
        (
            Some(&call),
            "log".into(),
            json!({"level": "error", "data": {e: e}, "delivered": true}),
        ),
        (
            Some(&call),
            "artifact.put".into(),
            json!({"meta": {"id": format!("art{e}"),
                            "digest": "sha256:8feb6a5f98e3253eadc96876d08b454f548eb0495938196827c9bcb24e1da30e",
                            "size": 55, "media_type": format!("text/{e}"), "scope": who,
                            "origin": {"run_id": run_id, "call_id": call}}}),
        ),
        (
            Some(&call),
            "artifact.refused".into(),
            json!({"op": "get", "id": e, "reason": e}),
        ),
        (
            Some(&call),
            "teardown.registered".into(),
            json!({"scope": "run", "key_hash": format!("key{e}"), "first": true}),
        ),
        (
            Some(&call),
            "effect".into(),
            json!({"name": format!("effect{e}"), "request": e, "outcome": {"err": e}}),
        ),
        (
            Some(&call),
            "elicit.requested".into(),
            json!({"message": e, "schema": {e: e}, "mode": "form"}),
        ),
        (
            Some(&call),
            "elicit.answered".into(),
            json!({"outcome": {"outcome": "accept", "content": {e: e}}, "validation_errors": [e]}),
        ),
        (
            Some(&call),
            "call.output".into(),
            json!({"value": e, "stage": e, "note": e}),
        ),
        (Some(&call), "cancel.requested".into(), json!({"reason": e})),
        (Some(&call), format!("kind.{e}"), json!({e: e})),
        (
            Some(&call),
            "call.ended".into(),
            json!({"outcome": {"status": "error", "error": format!("error{e}")}, "duration_ns": 5000}),
        ),
        (
            None,
            "teardown.ran".into(),
            json!({"scope": "run", "key_hash": format!("key{e}"),
                   "outcome": {"outcome": "error", "message": format!("cleanup{e}")}, "duration_ns": 10}),
        ),
        (None, "run.ended".into(), json!({"status": "failed"})),
    ];
    let header = json!({
        "format": "reel.tape.v1",
        "run": {"run_id": run_id, "session_id": format!("session{e}"), "identity": who,
                "labels": {e: e}, "state": "failed", "started_at": 1_796_014_069_213_836_771_i64,
                "ended_at": 1_796_014_069_213_856_771_i64, "facts": kinds.len(), "calls": 1,
                "ended_calls": 1, "failed_credentials": 1, "tools": [tool]},
    });
    let mut lines = vec![header.to_string()];
    for (seq, (call, kind, data)) in kinds.into_iter().enumerate() {
        let seq = seq as u64;
        lines.push(
            json!({"seq": seq, "at": 1_796_014_069_213_836_771_i64 + seq as i64 * 1000,
                   "offset": seq * 1000, "call": call, "kind": kind, "data": data})
            .to_string(),
        );
    }
    lines.join("\n") + "\n"
}

// ---------------------------------------------------------------------------
// What a terminal may receive
// ---------------------------------------------------------------------------

/// The colour sequences reel paints (anstyle's bold, reset, and the
/// foreground colours of `render/text.rs`), and nothing else.
const REEL_SGR: [&str; 7] = [
    "\x1b[0m", "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[36m", "\x1b[90m",
];

/// Characters a terminal acts on instead of showing: C0 controls (newline
/// aside), DEL, C1 controls, bidi controls, the line and paragraph
/// separators.
fn acts_on_terminal(c: char) -> bool {
    let n = c as u32;
    (n < 0x20 && c != '\n')
        || (0x7f..=0x9f).contains(&n)
        || matches!(
            n,
            0x061c | 0x200e | 0x200f | 0x202a..=0x202e | 0x2066..=0x2069 | 0x2028 | 0x2029
        )
}

/// Asserts that `bytes` can do nothing on a terminal but print, apart from
/// [`REEL_SGR`] when `color`; returns the text with those removed.
fn terminal_safe(bytes: &[u8], color: bool, what: &str) -> String {
    let text =
        std::str::from_utf8(bytes).unwrap_or_else(|e| panic!("{what}: not UTF-8 ({e}): {bytes:?}"));
    let mut plain = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b' && color {
            if let Some(sgr) = REEL_SGR.iter().find(|s| rest.starts_with(*s)) {
                rest = &rest[sgr.len()..];
                continue;
            }
        }
        assert!(
            !acts_on_terminal(c),
            "{what}: {c:?} reaches the terminal at byte {}:\n{text}",
            text.len() - rest.len()
        );
        plain.push(c);
        rest = &rest[c.len_utf8()..];
    }
    plain
}

// ---------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------

/// What one `reel` invocation printed, checked and with reel's colours
/// removed.
#[derive(Debug)]
struct Shown {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `reel --archive <archive> --color <color> <args>` and checks both
/// streams with [`terminal_safe`].
fn reel_in(archive: &Path, color: bool, args: &[&str]) -> Shown {
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(archive)
        .args(["--color", if color { "always" } else { "never" }])
        .args(args)
        .env_remove("REEL_ARCHIVE")
        .env_remove("NO_COLOR")
        .output()
        .expect("the reel binary runs");
    let what = format!("reel {args:?} (colour {color})");
    let shown = Shown {
        code: out.status.code(),
        stdout: terminal_safe(&out.stdout, color, &format!("{what}, stdout")),
        stderr: terminal_safe(&out.stderr, color, &format!("{what}, stderr")),
    };
    assert!(!shown.stderr.contains("panicked"), "{what}: {shown:?}");
    shown
}

/// An archive holding the two evil runs.
struct Evil {
    tmp: TempDir,
    dir: PathBuf,
}

impl Evil {
    /// Imports the two tapes with `reel import` (checking what it says).
    fn new() -> Evil {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("archive");
        let evil = Evil { tmp, dir };
        for (id, args) in [(run_a(), "a"), (run_b(), "b")] {
            let file = evil.tape_file(&id, args);
            let out = evil.reel(true, &["import", file.to_str().expect("UTF-8 path")]);
            assert_eq!(out.code, Some(0), "{out:?}");
            let id_shown = format!("run-{}{EVIL_SHOWN}", &id[4..5]);
            assert!(
                out.stdout
                    .starts_with(&format!("imported run {id_shown} (19 facts, failed) into ")),
                "{out:?}"
            );
        }
        evil
    }

    /// Writes a tape of `run_id` into the temporary directory.
    fn tape_file(&self, run_id: &str, args: &str) -> PathBuf {
        let file = self.tmp.path().join(format!("{}.tape.jsonl", &run_id[..5]));
        std::fs::write(&file, evil_tape(run_id, args)).expect("write the tape");
        file
    }

    fn reel(&self, color: bool, args: &[&str]) -> Shown {
        reel_in(&self.dir, color, args)
    }

    /// Runs a verb with and without colours: both checked, both exiting
    /// with `code`, saying the same once reel's colours are removed.
    /// Returns the run without colours.
    fn both(&self, args: &[&str], code: i32) -> Shown {
        let never = self.reel(false, args);
        let always = self.reel(true, args);
        assert_eq!(never.code, Some(code), "{args:?}: {never:?}");
        assert_eq!(always.code, Some(code), "{args:?}: {always:?}");
        assert_eq!(always.stdout, never.stdout, "{args:?}: stdout");
        assert_eq!(always.stderr, never.stderr, "{args:?}: stderr");
        never
    }
}

/// Asserts that `text` shows [`EVIL`] escaped, `times` times at least.
fn shows_evil(text: &str, times: usize, what: &str) {
    let n = text.matches(EVIL_SHOWN).count();
    assert!(
        n >= times,
        "{what}: {EVIL_SHOWN} appears {n} times, not {times}:\n{text}"
    );
}

// ---------------------------------------------------------------------------
// Text verbs
// ---------------------------------------------------------------------------

#[test]
fn show_and_tail_escape_every_recorded_field() {
    let evil = Evil::new();
    let (a, b) = (run_a(), run_b());
    for args in [
        vec!["show", &a],
        vec!["show", "--last"],
        vec!["tail", &a],
        vec!["tail"],
    ] {
        let out = evil.both(&args, 0);
        assert!(out.stderr.is_empty(), "{args:?}: {out:?}");
        let text = &out.stdout;
        // The newest run is B (imported last); `tail` prefers running ones.
        let id = if args.len() == 1 || args[1] == "--last" {
            &b
        } else {
            &a
        };
        let line = |start: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(start))
                .unwrap_or_else(|| panic!("{args:?}: no line starting {start:?}:\n{text}"))
                .to_owned()
        };
        assert_eq!(
            text.lines().next(),
            Some(
                format!(
                    "run run-{}{EVIL_SHOWN}  failed  started 2026-11-30T04:47:49.213Z  took 18.0µs  19 facts, 1 call",
                    &id[4..5]
                )
                .as_str()
            ),
            "{args:?}:\n{text}"
        );
        shows_evil(&line("identity tenant=tenant"), 3, "identity");
        shows_evil(&line("session session"), 1, "session");
        // Each fact line: the call id and tool, and every recorded string
        // of the detail that is not JSON (JSON values are shown as JSON,
        // with JSON's escapes, cut).
        let per_fact = [6, 2, 3, 4, 3, 4, 2, 4, 3, 3, 4, 3, 3, 4, 3, 3, 3, 2, 0];
        for (seq, times) in per_fact.into_iter().enumerate() {
            let offset = if seq == 0 {
                "+0ns".to_owned()
            } else {
                format!("+{seq}.0µs")
            };
            shows_evil(&line(&offset), times, &format!("{args:?}, fact #{seq}"));
        }
        // The summary: calls, credentials, artifacts, teardowns, anomalies.
        for (start, times) in [
            (format!("c{EVIL_SHOWN} tool{EVIL_SHOWN}  error"), 3),
            ("#3 ".into(), 2),
            ("#7 put art".into(), 1),
            ("#8 refused".into(), 1),
            ("run key".into(), 2),
            ("credential \"".into(), 1),
        ] {
            shows_evil(&line(&start), times, &format!("{args:?}, line {start:?}"));
        }
        assert!(
            line("+18.0µs").ends_with("#18   run.ended failed"),
            "{args:?}:\n{text}"
        );
    }

    // Filters quote recorded strings given back as arguments.
    let call = format!("c{EVIL}");
    let out = evil.both(&["show", &a, "--call", &call, "--kind", "progress"], 0);
    shows_evil(&out.stdout, 6, "show --call --kind");
    assert!(out.stdout.contains(&format!(
        "+4.0µs #4      c{EVIL_SHOWN} tool{EVIL_SHOWN} progress progress{EVIL_SHOWN}"
    )));
}

#[test]
fn runs_stats_diff_export_html_verify_escape_what_they_quote() {
    let evil = Evil::new();
    let (a, b) = (run_a(), run_b());
    let id = |run: &str| format!("run-{run}{EVIL_SHOWN}");

    // runs: the id, tenant and tools columns, and a page's cursor.
    let out = evil.both(&["runs"], 0);
    let rows: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(rows.len(), 3, "{}", out.stdout);
    for (row, run) in rows[1..].iter().zip(["b", "a"]) {
        assert!(
            row.starts_with(&format!("{}  2026-11-30T04:47:49.213Z", id(run))),
            "{row}"
        );
        assert!(
            row.contains(&format!("  tenant{EVIL_SHOWN}  tool{EVIL_SHOWN}  19")),
            "{row}"
        );
    }
    let tenant = format!("tenant{EVIL}");
    let tool = format!("tool{EVIL}");
    let out = evil.both(
        &["runs", "--tenant", &tenant, "--tool", &tool, "--limit", "1"],
        0,
    );
    shows_evil(&out.stdout, 3, "runs --tenant --tool --limit 1");
    assert!(out.stdout.contains("\nmore: --cursor "), "{}", out.stdout);

    // stats: the oldest and newest run ids, and the archive's name.
    let out = evil.both(&["stats"], 0);
    assert!(
        out.stdout.contains(&format!("oldest run   {} (", id("a"))),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("newest run   {} (", id("b"))),
        "{}",
        out.stdout
    );

    // diff: the header, each fact, the difference's path and values.
    let out = evil.both(&["diff", &a, &b, "--width", "1000"], 1);
    let mut lines = out.stdout.lines();
    assert_eq!(
        lines.next().map(str::trim_end),
        Some(format!("  {:<497} │ {}", id("a"), id("b")).as_str())
    );
    // The two ids, the difference's path (its key is the payload).
    shows_evil(&out.stdout, 3, "diff");
    assert!(
        out.stdout.contains(&format!(
            "  ▶ first difference: call.started:/args/{EVIL_SHOWN}: \"a\" vs \"b\"\n"
        )),
        "{}",
        out.stdout
    );
    let out = evil.both(&["diff", &a, &b], 1);
    assert!(
        out.stdout.starts_with(&format!("  {}", &id("a")[..40])),
        "a cut header stays escaped:\n{}",
        out.stdout
    );

    // export -o FILE, and a file name that is itself a payload.
    let tape = evil.tmp.path().join(format!("out{EVIL}.tape.jsonl"));
    let out = evil.both(&["export", &a, "-o", tape.to_str().unwrap()], 0);
    assert!(
        out.stderr.starts_with(&format!(
            "exported run {} (19 facts, 0 artifacts) to ",
            id("a")
        )),
        "{out:?}"
    );
    assert!(
        out.stderr
            .trim_end()
            .ends_with(&format!("out{EVIL_SHOWN}.tape.jsonl")),
        "{out:?}"
    );

    // show --html FILE.
    let page = evil.tmp.path().join(format!("page{EVIL}.html"));
    let out = evil.both(&["show", &b, "--html", page.to_str().unwrap()], 0);
    assert!(
        out.stderr
            .starts_with(&format!("wrote the HTML report of run {} to ", id("b"))),
        "{out:?}"
    );
    assert!(
        out.stderr
            .contains(&format!("page{EVIL_SHOWN}.html (calls: 1, facts: 19")),
        "{out:?}"
    );
    assert!(std::fs::metadata(&page).expect("the page").len() > 1000);

    // verify of a sound archive (its problems are in
    // damage_reports_escape_the_run_they_name).
    let out = evil.both(&["verify"], 0);
    assert!(out.stdout.starts_with("checked 2 runs"), "{out:?}");
}

#[test]
fn unknown_runs_and_failed_imports_escape_what_they_quote() {
    let evil = Evil::new();
    let (a, b) = (run_a(), run_b());
    let near = format!("run-c{EVIL}");
    let quoted = format!("\"run-c{EVIL_SHOWN}\"");
    for args in [
        vec!["show", near.as_str()],
        vec!["show", &near, "--json"],
        vec!["show", &near, "--html", "x.html"],
        vec!["tail", &near],
        vec!["export", &near, "-o", "-"],
        vec!["diff", &a, &near],
    ] {
        let out = evil.both(&args, 1);
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
        assert!(
            out.stderr
                .starts_with(&format!("reel: no run {quoted} in ")),
            "{args:?}: {out:?}"
        );
        assert!(
            out.stderr.trim_end().ends_with(&format!(
                ": did you mean run-a{EVIL_SHOWN}, run-b{EVIL_SHOWN}?"
            )) || out.stderr.trim_end().ends_with(&format!(
                ": did you mean run-b{EVIL_SHOWN}, run-a{EVIL_SHOWN}?"
            )),
            "{args:?}: {out:?}"
        );
    }

    // A run that is already there: the archive's error names it.
    let file = evil.tape_file(&a, "a");
    let out = evil.both(&["import", file.to_str().unwrap()], 1);
    assert!(out.stderr.contains("already exists"), "{out:?}");
    assert!(out.stderr.contains("run-a"), "{out:?}");

    // Tape errors quote the line: an unknown level, an unknown format.
    let bad = evil.tmp.path().join("bad.tape.jsonl");
    let level = format!("\"level\":{}", json!(EVIL));
    let text = evil_tape(&b, "b").replacen("\"level\":\"warning\"", &level, 1);
    std::fs::write(&bad, text).unwrap();
    let out = evil.both(&["import", bad.to_str().unwrap()], 1);
    assert!(out.stderr.contains("line 7: not a valid fact"), "{out:?}");
    shows_evil(&out.stderr, 1, "a tape error quoting the line");
    let format = json!({ "format": format!("reel.tape.{EVIL}") }).to_string();
    std::fs::write(&bad, format + "\n").unwrap();
    let out = evil.both(&["import", bad.to_str().unwrap()], 1);
    assert!(
        out.stderr.contains("is not supported by this reel"),
        "{out:?}"
    );

    // File and archive names are payloads too.
    let missing = evil.tmp.path().join(format!("missing{EVIL}"));
    let out = evil.both(&["import", missing.to_str().unwrap()], 1);
    assert!(
        out.stderr.contains(&format!("missing{EVIL_SHOWN}: ")),
        "{out:?}"
    );
    for color in [false, true] {
        let out = reel_in(&missing, color, &["runs"]);
        assert_eq!(out.code, Some(1), "{out:?}");
        shows_evil(&out.stderr, 2, "no archive at DIR");
    }
}

#[test]
fn demo_into_an_evil_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Short: the archive's socket path must fit a sockaddr_un.
    let name = "a\u{1b}]0;X\u{7}\u{9b}2J\u{202e}\n";
    let dir = tmp.path().join(name);
    let out = reel_in(&dir, true, &["demo"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let shown = r"a\u{1b}]0;X\u{7}\u{9b}2J\u{202e}\u{a}";
    assert_eq!(out.stdout.matches(shown).count(), 4, "{out:?}");
    let out = reel_in(&dir, false, &["stats"]);
    assert!(
        out.stdout.starts_with(&format!(
            "archive      {}",
            tmp.path().join(shown).display()
        )),
        "{out:?}"
    );
}

#[test]
fn usage_errors_quoting_arguments_are_escaped() {
    let evil = Evil::new();
    let flag = format!("--{EVIL}");
    for args in [
        vec!["runs", "--status", EVIL],
        vec!["runs", "--since", EVIL],
        vec!["runs", "--limit", EVIL],
        vec![EVIL],
        vec!["show", &flag],
    ] {
        for color in [false, true] {
            let out = evil.reel(color, &args);
            assert_eq!(out.code, Some(64), "{args:?}: {out:?}");
            assert!(out.stderr.starts_with("error: "), "{args:?}: {out:?}");
            shows_evil(&out.stderr, 1, &format!("{args:?}"));
        }
    }
    // Help, which quotes nothing recorded, keeps clap's own rendering.
    let out = evil.reel(false, &["runs", "--help"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("Example: reel runs"), "{out:?}");
}

/// Flips a byte of the only block of `run` through sled (the archive
/// closed), as `tests/cli.rs` does.
fn damage(dir: &Path, run: &str) {
    let db = sled::open(dir).expect("open sled");
    let ordinal = db
        .open_tree("run_ids")
        .expect("run_ids")
        .get(run)
        .expect("get")
        .expect("the run is stored");
    let events = db.open_tree("events").expect("events");
    let (key, block) = events
        .scan_prefix(&ordinal)
        .next()
        .expect("a block")
        .expect("read");
    let mut block = block.to_vec();
    let last = block.len() - 1;
    block[last] ^= 0xff;
    events.insert(key, block).expect("insert");
    db.flush().expect("flush");
}

#[test]
fn damage_reports_escape_the_run_they_name() {
    let evil = Evil::new();
    let (a, b) = (run_a(), run_b());
    damage(&evil.dir, &a);
    let out = evil.both(&["verify"], 2);
    assert!(
        out.stdout
            .contains(&format!("\n  run run-a{EVIL_SHOWN}, seq 0..=18: ")),
        "{out:?}"
    );
    let out = evil.both(&["show", &a], 2);
    assert!(out.stdout.contains("damaged: could not be read"), "{out:?}");
    shows_evil(&out.stdout, 1, "show of a damaged run");
    // Damage exits 2 from every verb that meets it.
    let out = evil.both(&["diff", &b, &a], 2);
    assert!(
        out.stderr.starts_with(&format!(
            "reel: run run-a{EVIL_SHOWN}: facts #0..=18 are damaged"
        )),
        "{out:?}"
    );
    let out = evil.both(&["export", &a, "-o", "-"], 2);
    assert!(out.stderr.starts_with("reel: "), "{out:?}");

    let verify = evil.reel(false, &["verify", "--json"]);
    let report: Value = serde_json::from_str(&verify.stdout).expect("verify --json is JSON");
    assert_eq!(report["problems"][0]["run_id"], json!(a));
    let show = evil.reel(false, &["show", &a, "--json"]);
    assert_eq!(show.code, Some(2));
    let doc: Value = serde_json::from_str(&show.stdout).expect("show --json is JSON");
    assert_eq!(doc["run"]["run_id"], json!(a));
}

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

/// The facts of a tape, as JSON values (header first).
fn tape_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a tape line is JSON"))
        .collect()
}

/// Asserts `facts` are the tape's facts: the same kinds, calls and fields,
/// every string as it was recorded.
fn same_facts(facts: &[Value], tape: &[Value], what: &str) {
    let fact = |v: &Value| -> reel::Fact {
        serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{what}: {e}: {v}"))
    };
    assert_eq!(facts.len(), tape.len(), "{what}");
    for (got, want) in facts.iter().zip(tape) {
        let (got, want) = (fact(got), fact(want));
        assert_eq!(
            (got.seq, &got.call, &got.kind),
            (want.seq, &want.call, &want.kind),
            "{what}"
        );
    }
}

#[test]
fn json_stays_json_and_round_trips() {
    let evil = Evil::new();
    let (a, b) = (run_a(), run_b());
    let tape = tape_lines(&evil_tape(&a, "a"));
    let json = |args: &[&str]| -> (String, Value) {
        // JSON does not change with the colour choice.
        let never = evil.reel(false, args);
        let always = evil.reel(true, args);
        assert_eq!(never.code, Some(0), "{args:?}: {never:?}");
        assert_eq!(always.stdout, never.stdout, "{args:?}");
        let value = serde_json::from_str(&never.stdout)
            .unwrap_or_else(|e| panic!("{args:?} is not JSON ({e}):\n{}", never.stdout));
        (never.stdout, value)
    };

    let (text, runs) = json(&["runs", "--json"]);
    assert!(text.contains(r"\u009b") && text.contains(r"\u202e") && text.contains(r"\u2028"));
    let listed = runs["runs"].as_array().expect("runs");
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["run_id"], json!(b));
    assert_eq!(listed[1]["run_id"], json!(a));
    assert_eq!(listed[1]["identity"], tape[0]["run"]["identity"]);
    assert_eq!(listed[1]["labels"], json!({EVIL: EVIL}));
    assert_eq!(listed[1]["tools"], json!([format!("tool{EVIL}")]));

    let (_, shown) = json(&["show", &a, "--json"]);
    assert_eq!(shown["run"]["run_id"], json!(a));
    assert_eq!(shown["run"]["session_id"], json!(format!("session{EVIL}")));
    same_facts(
        shown["facts"].as_array().unwrap(),
        &tape[1..],
        "show --json",
    );
    assert_eq!(
        shown["timeline"]["calls"][0]["last_progress"],
        json!(format!("progress{EVIL}"))
    );

    let (_, stats) = json(&["stats", "--json"]);
    assert_eq!(stats["oldest"][0], json!(a));
    assert_eq!(stats["newest"][0], json!(b));

    let (_, report) = json(&["verify", "--json"]);
    assert!(report["problems"].is_array());

    // export -o -: a tape on the terminal, importable again.
    let out = evil.reel(false, &["export", &a, "-o", "-"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let exported = tape_lines(&out.stdout);
    assert_eq!(exported[0]["run"]["run_id"], json!(a));
    same_facts(&exported[1..], &tape[1..], "export -o -");
    let copy = evil.tmp.path().join("copy.tape.jsonl");
    std::fs::write(&copy, &out.stdout).unwrap();
    let other = evil.tmp.path().join("other");
    let out = reel_in(&other, false, &["import", copy.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        !out.stderr.contains("warning"),
        "the digest still matches: {out:?}"
    );
    let again = reel_in(&other, false, &["show", &a, "--json"]);
    let again: Value = serde_json::from_str(&again.stdout).expect("JSON");
    same_facts(
        again["facts"].as_array().unwrap(),
        &tape[1..],
        "re-imported",
    );
}

// ---------------------------------------------------------------------------
// The language server is not a terminal
// ---------------------------------------------------------------------------

/// `reel lsp` speaks JSON-RPC to an editor: it is not escaped for a
/// terminal, and the outline names the recorded run id and tool as they are.
#[test]
fn lsp_carries_the_strings_as_they_are() {
    let a = run_a();
    let text = evil_tape(&a, "a");
    let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("reel lsp starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |msg: Value| {
        let body = msg.to_string();
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        stdin.flush().unwrap();
    };
    let mut notes: HashMap<String, Vec<Value>> = HashMap::new();
    let mut answer = |id: i64| -> Value {
        loop {
            let mut len = None;
            loop {
                let mut line = String::new();
                assert!(stdout.read_line(&mut line).unwrap() > 0, "the server left");
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some(v) = line.strip_prefix("Content-Length:") {
                    len = v.trim().parse::<usize>().ok();
                }
            }
            let mut body = vec![0; len.expect("Content-Length")];
            stdout.read_exact(&mut body).unwrap();
            let msg: Value = serde_json::from_slice(&body).expect("JSON-RPC");
            if msg.get("method").is_none() && msg["id"] == json!(id) {
                return msg;
            }
            let method = msg["method"].as_str().unwrap_or_default().to_owned();
            notes.entry(method).or_default().push(msg);
        }
    };
    let uri = "file:///tmp/evil.tape.jsonl";
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"processId": null, "rootUri": null, "capabilities": {}}}));
    answer(1);
    send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    send(
        json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "reel-tape", "version": 1, "text": text}}}),
    );
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/documentSymbol",
                "params": {"textDocument": {"uri": uri}}}),
    );
    let outline = answer(2);
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": null}));
    answer(3);
    send(json!({"jsonrpc": "2.0", "method": "exit", "params": null}));
    assert!(child.wait().expect("reel lsp exits").success());

    let run = &outline["result"][0];
    assert_eq!(run["name"], json!(format!("run {a}")), "{outline}");
    let children = run["children"].as_array().expect("children");
    assert!(
        children.iter().any(|c| c["name"]
            .as_str()
            .is_some_and(|n| n.contains(&format!("tool{EVIL}")))),
        "{outline}"
    );
}

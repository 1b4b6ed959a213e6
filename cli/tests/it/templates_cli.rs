//! Progress wording by template key (seed 000: "Consumers override the
//! wording by template key (tool.progress, tool.progress.generic, or per
//! tool)"), through the `reel` binary: `--templates FILE` and repeatable
//! `--template KEY=TEXT` on `reel show` (text and `--html`) and `reel
//! tail`, over the committed demo tape of the search run (a `fetch` with
//! and without a message, a `search` report with none). Bad input is
//! refused before anything is shown, naming the flag or file and what is
//! wrong; recorded text inside a templated line stays escaped.
//!
//! Needs the binary: `cargo build -p reel-cli`.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

const SEARCH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/tapes/demo-search.tape.jsonl"
);

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn reel(archive: &Path, args: &[&str]) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(archive)
        .args(["--color", "never"])
        .args(args)
        .env_remove("REEL_ARCHIVE")
        .env_remove("NO_COLOR")
        .env("REEL_CONFIG_DIR", archive.with_extension("config"))
        .output()
        .expect("the reel binary runs");
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// An archive holding the tape at `tape` (imported with `reel import`).
fn archive_of(tape: &Path) -> (TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    let ran = reel(&dir, &["import", tape.to_str().unwrap()]);
    assert_eq!(ran.code, Some(0), "import: {}", ran.stderr);
    (tmp, dir)
}

fn ok(ran: Ran, what: &str) -> String {
    assert_eq!(
        ran.code,
        Some(0),
        "{what}\n--- stdout\n{}\n--- stderr\n{}",
        ran.stdout,
        ran.stderr
    );
    ran.stdout
}

/// The progress lines and the call summary of `reel show --kind progress`:
/// offsets, times and durations vary between machines and go.
fn progress_lines(stdout: &str) -> String {
    stdout
        .lines()
        .filter(|l| l.contains(" progress ") || l.contains("last progress"))
        .map(|l| match l.find('#') {
            Some(i) if l.trim_start().starts_with('+') => &l[i..],
            _ => l,
        })
        .map(|l| {
            // The summary's durations vary too.
            let mut words: Vec<&str> = l.split(' ').collect();
            for w in &mut words {
                if w.ends_with("ms") || w.ends_with("µs") || w.ends_with("ns") {
                    *w = "[duration]";
                }
            }
            words.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const FILE: &str = r#"{
  "tool.progress": "{tool} says: {message}",
  "tool.progress.generic": "{tool} is working (report {count})"
}"#;

#[test]
fn show_words_progress_lines_with_the_templates_given() {
    let (tmp, dir) = archive_of(Path::new(SEARCH));
    let file = tmp.path().join("templates.json");
    std::fs::write(&file, FILE).unwrap();
    let file = file.to_str().unwrap();

    let default = ok(
        reel(&dir, &["show", "demo-search", "--kind", "progress"]),
        "show",
    );
    let templated = ok(
        reel(
            &dir,
            &[
                "show",
                "demo-search",
                "--kind",
                "progress",
                "--templates",
                file,
                // After the file, so it wins for `fetch`'s generic line.
                "--template",
                "tool.progress.generic.fetch=`{tool}` finished a step ({{{count}}})",
            ],
        ),
        "show with templates",
    );
    assert_ne!(default, templated);
    insta::with_settings!({
        snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots"),
        prepend_module_to_snapshot => true,
    }, {
        insta::assert_snapshot!("show_search_progress_default", progress_lines(&default));
        insta::assert_snapshot!("show_search_progress_templated", progress_lines(&templated));
    });

    // `tail` of a closed archive shows the same lines.
    let tail = ok(
        reel(
            &dir,
            &[
                "tail",
                "demo-search",
                "--template",
                "tool.progress={tool} says: {message}",
            ],
        ),
        "tail",
    );
    assert!(
        tail.contains("fetch says: Fetching https://docs.example/search?q=sled block layout"),
        "{tail}"
    );

    // The HTML page words its listed lines and its waterfall the same way.
    let page = tmp.path().join("run.html");
    ok(
        reel(
            &dir,
            &[
                "show",
                "demo-search",
                "--html",
                page.to_str().unwrap(),
                "--templates",
                file,
            ],
        ),
        "show --html",
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("search is working (report 1)"),
        "the waterfall"
    );
    assert!(
        html.contains(r#""line":"fetch is working (report 2)""#),
        "a listed line"
    );
}

#[test]
fn bad_templates_are_refused_before_anything_is_shown() {
    let (tmp, dir) = archive_of(Path::new(SEARCH));
    let refused = |args: &[&str], wants: &[&str]| {
        let mut all = vec!["show", "demo-search"];
        all.extend_from_slice(args);
        let ran = reel(&dir, &all);
        assert_eq!(ran.code, Some(1), "{args:?}: {}", ran.stderr);
        assert!(
            ran.stdout.is_empty(),
            "{args:?}: nothing shown: {}",
            ran.stdout
        );
        assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
        for want in wants {
            assert!(
                ran.stderr.contains(want),
                "{args:?}: {want:?} in {}",
                ran.stderr
            );
        }
    };
    refused(
        &["--template", "tool.progress={tool}: {msg}"],
        &[
            "--template",
            "template tool.progress: unknown placeholder {msg}",
            "{tool}, {count}, {message}",
        ],
    );
    refused(
        &["--template", "tool.progress.generic={message}"],
        &["no message in a generic line"],
    );
    refused(
        &["--template", "tool.progres={message}"],
        &[
            "unknown template key \"tool.progres\"",
            "tool.progress.generic.<tool>",
        ],
    );
    refused(&["--template", "tool.progress"], &["expected KEY=TEXT"]);
    let missing = tmp.path().join("none.json");
    refused(
        &["--templates", missing.to_str().unwrap()],
        &["--templates", "none.json", "cannot read it"],
    );
    let list = tmp.path().join("list.json");
    std::fs::write(&list, r#"["tool.progress"]"#).unwrap();
    refused(
        &["--templates", list.to_str().unwrap()],
        &["list.json", "not a JSON object of template key to text"],
    );
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, r#"{"tool.progress.fetch": "{tool"}"#).unwrap();
    refused(
        &["--templates", bad.to_str().unwrap()],
        &["bad.json", "template tool.progress.fetch", "never closed"],
    );
    // tail refuses the same way.
    let ran = reel(&dir, &["tail", "demo-search", "--template", "x=y"]);
    assert_eq!(ran.code, Some(1));
    assert!(
        ran.stderr.contains("unknown template key"),
        "{}",
        ran.stderr
    );
}

#[test]
fn recorded_text_in_a_templated_line_stays_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    // The search tape with a terminal escape planted in a recorded message
    // (the tape's digest no longer matches: import warns and goes on).
    let tape = std::fs::read_to_string(SEARCH).unwrap().replace(
        "Fetching https://docs",
        r"Fetching \u001b]0;PWNED\u0007 https://docs",
    );
    let path = tmp.path().join("hostile.tape.jsonl");
    std::fs::write(&path, tape).unwrap();
    let (_keep, dir) = archive_of(&path);
    let out = ok(
        reel(
            &dir,
            &[
                "show",
                "demo-search",
                "--template",
                "tool.progress=[{tool}] {message}",
            ],
        ),
        "show",
    );
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(
        out.contains(r"[fetch] Fetching \u{1b}]0;PWNED\u{7} https://docs"),
        "{out}"
    );
}

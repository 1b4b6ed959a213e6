//! The viewer is a library: it writes where its caller says (a renderer's
//! writer, the language server's output), and its diagnostics go to
//! `tracing`, never straight to the process's standard streams (the
//! `reel` binary installs the subscriber that prints them).

use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            out.push((path.display().to_string(), text));
        }
    }
}

/// The lines of `files` that print to a standard stream.
fn printing(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .flat_map(|(path, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, line)| {
                    let code = line.split("//").next().unwrap_or_default();
                    ["eprintln!", "println!", "eprint!", "print!", "dbg!"]
                        .iter()
                        .any(|m| code.contains(m))
                })
                .map(move |(n, line)| format!("{path}:{}: {}", n + 1, line.trim()))
        })
        .collect()
}

#[test]
fn the_viewer_prints_nothing_itself() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 10, "the viewer's sources were found");
    let found = printing(&files);
    assert!(
        found.is_empty(),
        "library code logs through `tracing` (or the LSP client's log), never to stderr or stdout:\n{}",
        found.join("\n")
    );
    // The check can fail.
    let bad = [("x.rs".to_owned(), "    eprintln!(\"oops\");".to_owned())];
    assert_eq!(printing(&bad), ["x.rs:1: eprintln!(\"oops\");"]);
}

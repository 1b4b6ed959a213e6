//! The viewer is a library: it writes where its caller says (a renderer's
//! writer, the language server's output), and its diagnostics go to
//! `tracing`, never straight to the process's standard streams (the
//! `reel` binary installs the subscriber that prints them).

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
    let files: Vec<(String, String)> = super::rust_files_under("viewer/src")
        .map(|f| (f.rel.clone(), f.text.clone()))
        .collect();
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

//! Renderers name the fact enums by their stored names
//! (`reel_viewer::names`), never through `Debug`: a `Debug` name is a
//! Rust identifier that changes with a refactor, and lowercasing it
//! happens to match the stored name only for one-word variants.

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

#[test]
fn no_renderer_names_an_enum_by_its_debug_form() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 10, "the viewer's sources were found");
    let found: Vec<String> = files
        .iter()
        .flat_map(|(path, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, line)| line.contains(".to_lowercase()") && line.contains(":?"))
                .map(move |(n, line)| format!("{path}:{}: {}", n + 1, line.trim()))
        })
        .collect();
    assert!(
        found.is_empty(),
        "name fact enums with reel_viewer::names::name (their stored names), not Debug:\n{}",
        found.join("\n")
    );
}

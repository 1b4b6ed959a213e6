//! Renderers name the fact enums by their stored names
//! (`reel_viewer::names`), never through `Debug`: a `Debug` name is a
//! Rust identifier that changes with a refactor, and lowercasing it
//! happens to match the stored name only for one-word variants.

#[test]
fn no_renderer_names_an_enum_by_its_debug_form() {
    let files: Vec<(String, String)> = super::rust_files_under("viewer/src")
        .map(|f| (f.rel.clone(), f.text.clone()))
        .collect();
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

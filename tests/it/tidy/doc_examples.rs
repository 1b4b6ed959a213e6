//! Every Rust example of the README and the book is compiled by a doc test:
//! a page with a ```` ```rust ```` block is included (`include_str!` under
//! `#[cfg(doctest)]`) by the `src/lib.rs` of some crate of the workspace,
//! and no block opts out with `ignore` (`no_run` still compiles). An
//! example that stops compiling then fails `cargo test`, as a newcomer
//! copying it would.

use std::path::{Path, PathBuf};

use super::{files, File};

/// The pages that hold Rust examples: README.md and the book's sources.
fn pages() -> Vec<&'static File> {
    files()
        .iter()
        .filter(|f| {
            f.rel == "README.md"
                || f.rel
                    .strip_prefix("docs/src/")
                    .is_some_and(|name| name.ends_with(".md") && !name.contains('/'))
        })
        .collect()
}

/// The info strings of a page's fenced Rust blocks (`rust`, `rust,no_run`).
fn rust_blocks(text: &str) -> Vec<String> {
    let mut open = false;
    let mut found = Vec::new();
    for line in text.lines() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        if !open && info.trim().starts_with("rust") {
            found.push(info.trim().to_owned());
        }
        open = !open;
    }
    found
}

/// What every crate's `src/lib.rs` includes for doc tests, as paths.
fn included() -> Vec<PathBuf> {
    let libs = files()
        .iter()
        .filter(|f| f.rel == "src/lib.rs" || f.rel.split('/').skip(1).eq(["src", "lib.rs"]));
    let mut paths = Vec::new();
    for lib in libs {
        let text = &lib.text;
        if !text.contains("#[cfg(doctest)]") {
            continue;
        }
        for part in text.split("include_str!(\"").skip(1) {
            let rel = part.split('"').next().unwrap_or_default();
            let dir = lib.path.parent().unwrap_or(Path::new("."));
            if let Ok(path) = dir.join(rel).canonicalize() {
                paths.push(path);
            }
        }
    }
    paths
}

#[test]
fn every_rust_example_of_the_readme_and_the_book_is_compiled() {
    let included = included();
    let mut checked = 0;
    for page in pages() {
        let blocks = rust_blocks(&page.text);
        if blocks.is_empty() {
            continue;
        }
        checked += blocks.len();
        let name = &page.rel;
        assert!(
            included.contains(&page.path.canonicalize().expect("the page")),
            "{name} has Rust examples that no doc test compiles: include it \
             (`#[cfg(doctest)] #[doc = include_str!(..)]`) in src/lib.rs or in the lib.rs of the crate it shows"
        );
        for info in blocks {
            assert!(
                !info.split(',').any(|a| a.trim() == "ignore"),
                "{name}: a ```{info} block is never compiled: make it compile (hidden `# ` lines set it up; `no_run` for one that needs a server)"
            );
        }
    }
    assert!(
        checked >= 5,
        "only {checked} Rust examples found: the scan is broken"
    );
}

#[test]
fn the_scan_finds_blocks_and_their_options() {
    let text = "text\n```rust\nfn a() {}\n```\n```sh\nls\n```\n```rust,no_run\nx\n```\n";
    assert_eq!(rust_blocks(text), ["rust", "rust,no_run"]);
}

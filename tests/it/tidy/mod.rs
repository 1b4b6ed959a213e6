//! The tidy rules: tests that read the workspace's own files and fail on
//! what must not be there, so that an invariant of ARCHITECTURE.md fails
//! the build the day it stops being true (rust-analyzer's `tidy.rs`).
//!
//! One walk of the tree serves them all: [`files`] (every Rust source and
//! Markdown page of the workspace, build output, hidden folders and fuzz
//! corpora left out). A rule filters what it reads from there:
//!
//! - [`file_size`]: no production file or function past its size;
//! - [`key_layout`]: only `archive/src/keys.rs` builds archive keys;
//! - [`no_print`]: the viewer prints nothing itself;
//! - [`enum_names`]: renderers name fact enums by their stored names;
//! - [`doc_examples`]: every Rust example of the README and the book
//!   compiles;
//! - here: only binaries set the global allocator, and the core names no
//!   network API.
//!
//! [`dependency_direction`] holds the crate graph's rules (which crate may
//! depend on which, what the binary links), read from `cargo metadata`; its
//! source-text checks (lock copies, module circles) walk through [`files`]
//! too.

mod dependency_direction;
mod doc_examples;
mod enum_names;
mod file_size;
mod key_layout;
mod no_print;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One file of the workspace and its text.
pub struct File {
    /// Its path.
    pub path: PathBuf,
    /// Its path from the workspace root, with `/` between folders.
    pub rel: String,
    /// Its text.
    pub text: String,
}

impl File {
    /// Whether it is a Rust source file.
    pub fn is_rust(&self) -> bool {
        self.rel.ends_with(".rs")
    }

    /// Whether it is under the folder `dir` (a path from the root, such as
    /// `core/src`).
    pub fn is_under(&self, dir: &str) -> bool {
        self.rel
            .strip_prefix(dir.trim_end_matches('/'))
            .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// The workspace root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Folders never walked: build output, fuzz corpora and crash artifacts,
/// npm installs.
const NOT_WALKED: &[&str] = &["target", "corpus", "artifacts", "node_modules"];

/// Every `.rs` and `.md` file of the workspace, sorted by path, read once
/// for all the rules (hidden folders such as `.git` and [`NOT_WALKED`]
/// left out).
pub fn files() -> &'static [File] {
    static FILES: OnceLock<Vec<File>> = OnceLock::new();
    FILES.get_or_init(|| {
        let mut paths = Vec::new();
        walk(root(), &mut paths);
        paths.sort();
        let files: Vec<File> = paths
            .into_iter()
            .map(|path| {
                let rel = path
                    .strip_prefix(root())
                    .expect("walked under the root")
                    .to_string_lossy()
                    .replace('\\', "/");
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{rel} does not read as text: {e}"));
                File { path, rel, text }
            })
            .collect();
        assert!(
            files.iter().filter(|f| f.is_rust()).count() > 100,
            "found only {} files under {}: is the walk broken?",
            files.len(),
            root().display()
        );
        files
    })
}

/// The Rust files under `dir` (a path from the root; `""` for all).
pub fn rust_files_under(dir: &str) -> impl Iterator<Item = &'static File> + '_ {
    files()
        .iter()
        .filter(move |f| f.is_rust() && (dir.is_empty() || f.is_under(dir)))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{} does not read: {e}", dir.display()));
    for entry in entries {
        let entry = entry.expect("a readable folder entry");
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if entry.file_type().expect("a file type").is_dir() {
            if !name.starts_with('.') && !NOT_WALKED.contains(&name.as_ref()) {
                walk(&path, out);
            }
        } else if name.ends_with(".rs") || name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The files that set a global allocator other than a binary's: a
/// binary's `main.rs`, `src/bin/`, or an integration test of its own
/// (`<crate>/tests/NAME.rs`, a binary apart from the crate's `tests/it`).
fn allocator_setters<'a>(files: impl Iterator<Item = &'a File>) -> Vec<String> {
    // Spelt in two pieces so that this file does not name it.
    let needle = concat!("#[global", "_allocator]");
    files
        .filter(|f| f.text.lines().any(|l| l.trim_start().starts_with(needle)))
        .filter(|f| {
            let parts: Vec<&str> = f.rel.split('/').collect();
            let test_binary = parts.len() >= 2 && parts[parts.len() - 2] == "tests";
            let binary = f.rel.ends_with("src/main.rs")
                || test_binary
                || parts.contains(&"bin") && parts.contains(&"src");
            !binary
        })
        .map(|f| f.rel.clone())
        .collect()
}

#[test]
fn only_binaries_set_the_allocator() {
    let found = allocator_setters(rust_files_under(""));
    assert!(
        found.is_empty(),
        "a library sets the global allocator (only a binary's main.rs, src/bin/ or an integration test file may): {found:?}"
    );
    // The check can fail.
    let planted = |rel: &str| File {
        path: rel.into(),
        rel: rel.into(),
        text: concat!("#[global", "_allocator]\nstatic A: System = System;\n").into(),
    };
    let files = [
        planted("recorder/src/lib.rs"),
        planted("recorder/tests/it/alloc.rs"),
        planted("cli/src/main.rs"),
        planted("recorder/tests/progress_alloc.rs"),
    ];
    assert_eq!(
        allocator_setters(files.iter()),
        ["recorder/src/lib.rs", "recorder/tests/it/alloc.rs"]
    );
}

#[test]
fn the_core_names_no_network_api() {
    let words = [
        "std::net",
        "TcpStream",
        "UdpSocket",
        "TcpListener",
        "tokio::",
    ];
    let mut sources = rust_files_under("core/src").peekable();
    assert!(sources.peek().is_some(), "no sources under core/src");
    for file in sources {
        for word in words {
            assert!(
                !file.text.contains(word),
                "{} names {word}: the core does no network IO",
                file.rel
            );
        }
    }
}

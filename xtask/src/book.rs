//! `cargo xtask book`: the link check over README.md and `docs/src` (and
//! README.md's length), then `mdbook build docs` (into `docs/book/`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::links::{self, BOOK_SRC};
use crate::{provision, run, Failure};

/// Checks the links, then builds the book.
pub fn check_and_build(root: &Path, mdbook: &Path) -> Result<(), Failure> {
    check_links(root)?;
    run(Command::new(mdbook)
        .args(["build", "docs"])
        .current_dir(root))?;
    println!("xtask: book built in {}", root.join("docs/book").display());
    Ok(())
}

/// README.md is what a newcomer reads in five minutes; the guides are
/// the book's.
const README_MAX_LINES: usize = 250;

/// The link check alone: prints each broken link as `file:line: why`.
pub fn check_links(root: &Path) -> Result<(), Failure> {
    let readme = read(root, Path::new("README.md"))?;
    if let Some(too_long) = readme_too_long(&readme) {
        return Err(Failure(too_long));
    }
    let mut files = BTreeMap::new();
    files.insert(PathBuf::from("README.md"), readme);
    for page in markdown_under(root, Path::new(BOOK_SRC))? {
        let text = read(root, &page)?;
        files.insert(page, text);
    }
    let exists = |p: &Path| root.join(p).exists();
    let (problems, counts) = links::check(&files, &exists);
    for problem in &problems {
        eprintln!("{problem}");
    }
    if !problems.is_empty() {
        return Err(Failure(format!(
            "link check: {} broken in {} files (README.md and {BOOK_SRC})",
            problems.len(),
            counts.files
        )));
    }
    println!(
        "xtask: link check: {} links in {} files resolve, every page is in SUMMARY.md",
        counts.links, counts.files
    );
    Ok(())
}

/// Installs mdBook when missing, then checks and builds the book.
pub fn task(root: &Path) -> Result<(), Failure> {
    let mdbook = provision::mdbook()?;
    check_and_build(root, &mdbook)
}

/// What is wrong with README.md's length, if anything.
fn readme_too_long(text: &str) -> Option<String> {
    let lines = text.lines().count();
    (lines > README_MAX_LINES).then(|| {
        format!(
            "README.md has {lines} lines, over {README_MAX_LINES}: it is the five-minute \
             entry (what reel is, the set-up commands, one example per audience, links); \
             move the guide text into a page of {BOOK_SRC}"
        )
    })
}

fn read(root: &Path, path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(root.join(path))
        .map_err(|e| Failure(format!("cannot read {}: {e}", path.display())))
}

/// Every `.md` file under `dir` (relative to `root`), relative to `root`.
fn markdown_under(root: &Path, dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(root.join(dir))
        .map_err(|e| Failure(format!("cannot list {}: {e}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(|e| Failure(format!("cannot list {}: {e}", dir.display())))?;
        let path = dir.join(entry.file_name());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(markdown_under(root, &path)?);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readme_length_is_held() {
        assert_eq!(readme_too_long(&"line\n".repeat(README_MAX_LINES)), None);
        let too_long = readme_too_long(&"line\n".repeat(README_MAX_LINES + 1));
        assert!(
            too_long.is_some_and(|m| m.starts_with("README.md has 251 lines, over 250")),
            "a README past the limit is refused"
        );
    }
}

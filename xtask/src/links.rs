//! The book's link check: every relative link and `#anchor` of README.md
//! and of the book's pages resolves, and every page is in SUMMARY.md.
//!
//! Anchors are the ids mdBook 0.5 gives headings (`mdbook-html`'s
//! `id_from_content` and `unique_id`): the heading's text, trimmed and
//! lowercased, letters, digits, `_` and `-` kept, whitespace made `-`,
//! the rest dropped; a repeated id gets `-1`, `-2`, ... in page order; an
//! explicit `{#id}` is taken as written. GitHub's ids for README.md are
//! the same for the headings written here. Links with a scheme
//! (`https:`, `mailto:`) are not followed: the check reads no network.
//!
//! A page of the book links only to pages of the book: mdBook turns a
//! `.md` link into an `.html` one, so a link out of `docs/src` breaks in
//! the rendered book. README.md may link anywhere in the repository.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// The book's sources, relative to the repository root.
pub const BOOK_SRC: &str = "docs/src";

/// One broken link, or one page missing from SUMMARY.md.
#[derive(Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file, relative to the repository root.
    pub file: PathBuf,
    /// 1-based.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

/// What the check found besides the problems.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub files: usize,
    pub links: usize,
}

/// Checks the links of `files` (path relative to the repository root, and
/// text). A link to a Markdown file among `files` has its anchor checked;
/// any other target only has to exist, which `exists` answers.
pub fn check(
    files: &BTreeMap<PathBuf, String>,
    exists: &dyn Fn(&Path) -> bool,
) -> (Vec<Problem>, Counts) {
    let anchors: BTreeMap<&Path, HashSet<String>> = files
        .iter()
        .map(|(path, text)| (path.as_path(), anchors(text)))
        .collect();
    let book = Path::new(BOOK_SRC);
    let summary = book.join("SUMMARY.md");
    let mut problems = Vec::new();
    let mut counts = Counts {
        files: files.len(),
        links: 0,
    };
    let mut in_summary = HashSet::new();
    for (file, text) in files {
        for link in links(text) {
            counts.links += 1;
            let found = resolve(file, &link.dest, book, &anchors, exists);
            if *file == summary {
                if let Ok(Some(target)) = &found {
                    in_summary.insert(target.clone());
                }
            }
            if let Err(message) = found {
                problems.push(Problem {
                    file: file.clone(),
                    line: link.line,
                    message,
                });
            }
        }
    }
    if files.contains_key(&summary) {
        for file in files.keys() {
            let page = file.starts_with(book) && *file != summary;
            if page && file.extension().is_some_and(|e| e == "md") && !in_summary.contains(file) {
                problems.push(Problem {
                    file: file.clone(),
                    line: 1,
                    message: format!(
                        "not in {}: list the page there, or remove it",
                        summary.display()
                    ),
                });
            }
        }
    }
    problems.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    (problems, counts)
}

/// Where `dest`, linked from `file`, leads: `Ok(Some(path))` for a file of
/// the repository, `Ok(None)` for a link the check does not follow, or
/// what is wrong with it.
fn resolve(
    file: &Path,
    dest: &str,
    book: &Path,
    anchors: &BTreeMap<&Path, HashSet<String>>,
    exists: &dyn Fn(&Path) -> bool,
) -> Result<Option<PathBuf>, String> {
    if has_scheme(dest) {
        return Ok(None);
    }
    let (path, anchor) = match dest.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (dest, None),
    };
    if path.starts_with('/') {
        return Err(format!(
            "`{dest}` is absolute: write it relative to {}",
            file.display()
        ));
    }
    let target = if path.is_empty() {
        file.to_path_buf()
    } else {
        let joined = file.parent().unwrap_or(Path::new("")).join(path);
        normalize(&joined).ok_or_else(|| format!("`{dest}` leads out of the repository"))?
    };
    if file.starts_with(book) && !target.starts_with(book) {
        return Err(format!(
            "`{dest}` leads out of the book ({}), which breaks in the rendered book: \
             name the file as `code`, or link it from README.md",
            book.display()
        ));
    }
    if let Some(ids) = anchors.get(target.as_path()) {
        if let Some(anchor) = anchor.filter(|a| !a.is_empty()) {
            if !ids.contains(anchor) {
                return Err(format!(
                    "`{dest}`: {} has no heading with the id `{anchor}`",
                    target.display()
                ));
            }
        }
        return Ok(Some(target));
    }
    if !exists(&target) {
        return Err(format!("`{dest}`: no such file {}", target.display()));
    }
    if anchor.is_some_and(|a| !a.is_empty()) {
        return Err(format!(
            "`{dest}`: the check reads no headings of {}: link the file without the anchor",
            target.display()
        ));
    }
    Ok(Some(target))
}

/// `https:`, `mailto:`, `//host`: a link the check does not follow.
fn has_scheme(dest: &str) -> bool {
    if dest.starts_with("//") {
        return true;
    }
    match dest.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// `a/./b/../c` as `a/c`; `None` when it climbs above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// The parser as mdBook 0.5 sets it up (`mdbook-markdown`'s defaults).
fn parser(text: &str) -> Parser<'_> {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_FOOTNOTES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TASKLISTS);
    options.insert(Options::ENABLE_HEADING_ATTRIBUTES);
    options.insert(Options::ENABLE_SMART_PUNCTUATION);
    options.insert(Options::ENABLE_DEFINITION_LIST);
    options.insert(Options::ENABLE_GFM);
    Parser::new_ext(text, options)
}

/// One link (or image) of a page.
#[derive(Debug, PartialEq, Eq)]
struct Link {
    dest: String,
    line: usize,
}

/// The links and images of `text`, in order (none from code).
fn links(text: &str) -> Vec<Link> {
    parser(text)
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => Some(Link {
                dest: dest_url.into_string(),
                line: text[..range.start].matches('\n').count() + 1,
            }),
            _ => None,
        })
        .collect()
}

/// The ids mdBook gives the headings (and definition terms) of `text`.
fn anchors(text: &str) -> HashSet<String> {
    let mut ids = HashSet::new();
    let mut used = HashSet::new();
    // The text of the heading being read, and its explicit id.
    let mut heading: Option<(String, Option<String>)> = None;
    for event in parser(text) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                heading = Some((String::new(), id.map(|id| id.into_string())));
            }
            Event::Start(Tag::DefinitionListTitle) => heading = Some((String::new(), None)),
            Event::Text(t) | Event::Code(t) => {
                if let Some((content, _)) = &mut heading {
                    content.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some((content, _)) = &mut heading {
                    content.push('\n');
                }
            }
            Event::End(TagEnd::Heading(_) | TagEnd::DefinitionListTitle) => {
                if let Some((content, explicit)) = heading.take() {
                    // mdBook takes an explicit id as written, and does
                    // not count it among the generated ones.
                    let id = match explicit {
                        Some(id) => id,
                        None => unique_id(&id_from_content(&content), &mut used),
                    };
                    ids.insert(id);
                }
            }
            _ => {}
        }
    }
    ids
}

/// mdBook's `id_from_content`.
pub fn id_from_content(content: &str) -> String {
    content
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// mdBook's `unique_id`: `id`, else `id-1`, `id-2`, ...
fn unique_id(id: &str, used: &mut HashSet<String>) -> String {
    if used.insert(id.to_owned()) {
        return id.to_owned();
    }
    (1..)
        .map(|n| format!("{id}-{n}"))
        .find(|candidate| used.insert(candidate.clone()))
        .expect("an unused suffix")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks `files` (path, text) where `others` also exist, and
    /// compares the problems, as printed, with `expected`.
    fn check_files(files: &[(&str, &str)], others: &[&str], expected: &[&str]) {
        let files: BTreeMap<PathBuf, String> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
            .collect();
        let others: Vec<PathBuf> = others.iter().map(PathBuf::from).collect();
        let exists = |p: &Path| others.iter().any(|o| o == p);
        let (problems, _) = check(&files, &exists);
        let got: Vec<String> = problems.iter().map(Problem::to_string).collect();
        assert_eq!(got, expected, "{files:#?}");
    }

    const SUMMARY: &str = "# Summary\n\n[Intro](intro.md)\n- [Guide](guide.md)\n";

    #[test]
    fn a_whole_book_passes() {
        check_files(
            &[
                ("docs/src/SUMMARY.md", SUMMARY),
                (
                    "docs/src/intro.md",
                    "# Intro\n\nSee [the guide](guide.md#set-up-and-run), [below](#more), \
                     [out](https://example.com/x#y).\n\n## More\n",
                ),
                ("docs/src/guide.md", "# Guide\n\n## Set up and run\n"),
                (
                    "README.md",
                    "# reel\n\n[guide](docs/src/guide.md#guide) [code](src/lib.rs) \
                     [mail](mailto:a@b.c)\n",
                ),
            ],
            &["src/lib.rs"],
            &[],
        );
    }

    #[test]
    fn broken_files_and_anchors_are_named_with_their_line() {
        check_files(
            &[
                ("docs/src/SUMMARY.md", SUMMARY),
                (
                    "docs/src/intro.md",
                    "# Intro\n\n[a](gide.md)\n\n[b](guide.md#set-up)\n[c](#intro-1)\n",
                ),
                ("docs/src/guide.md", "# Guide\n"),
                ("README.md", "[d](docs/src/nope.md) [e](cli/tests/missing.rs)\n"),
            ],
            &[],
            &[
                "README.md:1: `docs/src/nope.md`: no such file docs/src/nope.md",
                "README.md:1: `cli/tests/missing.rs`: no such file cli/tests/missing.rs",
                "docs/src/intro.md:3: `gide.md`: no such file docs/src/gide.md",
                "docs/src/intro.md:5: `guide.md#set-up`: docs/src/guide.md has no heading with the id `set-up`",
                "docs/src/intro.md:6: `#intro-1`: docs/src/intro.md has no heading with the id `intro-1`",
            ],
        );
    }

    #[test]
    fn a_page_outside_summary_and_a_link_out_of_the_book_are_problems() {
        check_files(
            &[
                ("docs/src/SUMMARY.md", SUMMARY),
                ("docs/src/intro.md", "# Intro\n\n[arch](../../ARCHITECTURE.md)\n"),
                ("docs/src/guide.md", "# Guide\n"),
                ("docs/src/orphan.md", "# Orphan\n"),
            ],
            &["ARCHITECTURE.md"],
            &[
                "docs/src/intro.md:3: `../../ARCHITECTURE.md` leads out of the book (docs/src), \
                 which breaks in the rendered book: name the file as `code`, or link it from README.md",
                "docs/src/orphan.md:1: not in docs/src/SUMMARY.md: list the page there, or remove it",
            ],
        );
    }

    #[test]
    fn odd_destinations() {
        check_files(
            &[(
                "README.md",
                "[a](/etc/passwd) [b](../../x.md) [c](src/lib.rs#L3) [d](#) [e](./README.md#x)\n\n# X\n",
            )],
            &["src/lib.rs"],
            &[
                "README.md:1: `/etc/passwd` is absolute: write it relative to README.md",
                "README.md:1: `../../x.md` leads out of the repository",
                "README.md:1: `src/lib.rs#L3`: the check reads no headings of src/lib.rs: link the file without the anchor",
            ],
        );
    }

    #[test]
    fn links_in_code_are_not_links() {
        check_files(
            &[(
                "README.md",
                "```md\n[a](nope.md)\n```\n\n`[b](nope.md)`\n\n    [c](nope.md)\n",
            )],
            &[],
            &[],
        );
    }

    /// The ids mdBook gives a page's headings, compared with `expected`.
    fn check_anchors(text: &str, expected: &[&str]) {
        let mut got: Vec<String> = anchors(text).into_iter().collect();
        got.sort();
        let mut expected: Vec<&str> = expected.to_vec();
        expected.sort();
        assert_eq!(got, expected, "{text}");
    }

    #[test]
    fn heading_ids_follow_mdbook() {
        check_anchors("# Exit codes\n", &["exit-codes"]);
        // Code spans count; punctuation goes, `-` and `_` stay.
        check_anchors(
            "### `reel mcp record`: record any MCP server's traffic\n",
            &["reel-mcp-record-record-any-mcp-servers-traffic"],
        );
        check_anchors(
            "## `--passes`: add more rustdoc passes\n",
            &["--passes-add-more-rustdoc-passes"],
        );
        check_anchors("## Über 12_a\n", &["über-12_a"]);
        // Repeats are numbered in order; an explicit id is as written.
        check_anchors(
            "# A\n## A\n## A\n## B {#custom}\n",
            &["a", "a-1", "a-2", "custom"],
        );
        // A `#` line in a code block is no heading; a setext heading is.
        check_anchors(
            "```sh\n# not a heading\n```\n\nSetext\n======\n",
            &["setext"],
        );
        // Definition terms get ids too.
        check_anchors("Term\n: its definition\n", &["term"]);
    }

    #[test]
    fn ids_from_content() {
        for (content, id) in [
            (
                "Method-call 🐙 expressions \u{1f47c}",
                "method-call--expressions-",
            ),
            ("_-_12345", "_-_12345"),
            ("中文標題 CJK title", "中文標題-cjk-title"),
            ("  Many hosts: NATS  ", "many-hosts-nats"),
            ("", ""),
        ] {
            assert_eq!(id_from_content(content), id, "{content:?}");
        }
    }
}

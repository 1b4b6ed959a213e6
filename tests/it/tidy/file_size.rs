//! The size limits of ARCHITECTURE.md, enforced: no production file over
//! [`FILE_LIMIT`] lines and no function over [`FN_LIMIT`] lines, unless the
//! exception lists below name it with the one responsibility it is and why.
//!
//! What counts:
//! - every `.rs` file under the workspace root, except those under a
//!   `tests/`, `benches/`, `examples/`, `fuzz/` or `target/` folder (test
//!   code, not production code) and hidden folders (`.git`);
//! - a file's lines are its lines minus the lines of its top-level
//!   `#[cfg(test)] mod ... { ... }` blocks: a unit-test module grows with
//!   its cases (tests are data), which says nothing of how many jobs the
//!   production code above it does. The functions inside such a block are
//!   not measured either;
//! - a function is measured from the line of its `fn` to the line of its
//!   closing brace, nested closures and items included.
//!
//! The scanner blanks comments, strings (raw and byte ones too) and char
//! literals before it matches braces, so a `"{"` or a `// }` does not
//! move it; `scanner_*` tests below hold it to synthetic input, so the
//! check can fail.

use super::File;

/// A production file's limit, in lines (test modules excluded).
const FILE_LIMIT: usize = 600;
/// A function's limit, in lines.
const FN_LIMIT: usize = 150;

/// Files allowed past [`FILE_LIMIT`]: (path from the workspace root, the
/// one responsibility, why it is one file).
const FILE_EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "core/src/strategy.rs",
        "proptest strategies for the fact model (test support)",
        "one strategy per fact kind and per field shape, side by side with the \
         catalogue they mirror; compiled only with the `proptest` feature",
    ),
    (
        "mcp/src/proxy/link.rs",
        "linking a proxied session's messages to their calls",
        "one state machine over a session's JSON-RPC messages: its states and \
         transitions read together",
    ),
    (
        "replayer/src/replay/backend.rs",
        "the replay backend: every capability answered from the record",
        "one CallBackend impl, a method per capability, sharing the call's \
         matching state",
    ),
];

/// Functions allowed past [`FN_LIMIT`]: (path, function name, why).
const FN_EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "src/redact/walk.rs",
        "walk_fields",
        "one match arm per fact kind, every field named (no `..`), so a field \
         added to the catalogue does not compile until it is placed",
    ),
    (
        "core/src/strategy.rs",
        "fact_kind",
        "one prop_oneof! arm per fact kind (test support): the kinds side by side",
    ),
];

/// Folder names whose files are not production code.
const SKIPPED_DIRS: &[&str] = &["tests", "benches", "fuzz", "target", "examples"];

#[test]
fn production_files_and_functions_stay_within_the_limits() {
    let files: Vec<&File> = super::rust_files_under("")
        .filter(|f| is_production(&f.rel))
        .collect();
    assert!(
        files.len() > 50,
        "found only {} production files: is the walk broken?",
        files.len()
    );

    let mut failures = Vec::new();
    let mut used_file = vec![false; FILE_EXCEPTIONS.len()];
    let mut used_fn = vec![false; FN_EXCEPTIONS.len()];
    for file in files {
        let rel = file.rel.as_str();
        let measured = measure(&file.text);
        if measured.lines > FILE_LIMIT {
            match FILE_EXCEPTIONS.iter().position(|(path, ..)| *path == rel) {
                Some(i) => used_file[i] = true,
                None => failures.push(format!(
                    "{rel}: {} production lines (limit {FILE_LIMIT}): split it by \
                     responsibility, or add it to FILE_EXCEPTIONS with the one job it does",
                    measured.lines
                )),
            }
        }
        for f in measured.functions.iter().filter(|f| f.lines > FN_LIMIT) {
            match FN_EXCEPTIONS
                .iter()
                .position(|(path, name, _)| *path == rel && *name == f.name)
            {
                Some(i) => used_fn[i] = true,
                None => failures.push(format!(
                    "{rel}:{}: fn {} is {} lines (limit {FN_LIMIT}): split it, or add it \
                     to FN_EXCEPTIONS with the reason",
                    f.line, f.name, f.lines
                )),
            }
        }
    }
    for (i, (path, ..)) in FILE_EXCEPTIONS.iter().enumerate() {
        if !used_file[i] {
            failures.push(format!(
                "FILE_EXCEPTIONS names {path}, which is within the limit (or gone): remove it"
            ));
        }
    }
    for (i, (path, name, _)) in FN_EXCEPTIONS.iter().enumerate() {
        if !used_fn[i] {
            failures.push(format!(
                "FN_EXCEPTIONS names {path}: fn {name}, which is within the limit (or gone): remove it"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whether the file at `rel` (from the root) is production code: under no
/// [`SKIPPED_DIRS`] folder.
fn is_production(rel: &str) -> bool {
    !rel.split('/').any(|part| SKIPPED_DIRS.contains(&part))
}

/// What the scanner found in one file.
#[derive(Debug, PartialEq)]
struct Measured {
    /// Lines outside top-level `#[cfg(test)] mod` blocks.
    lines: usize,
    /// Functions outside those blocks.
    functions: Vec<Function>,
}

/// One function: its name, the line of its `fn` (1-based) and its length.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// Measures one file's text.
fn measure(text: &str) -> Measured {
    let code: Vec<char> = blank(text).chars().collect();
    let line_of = line_index(&code);
    let total = text.lines().count();

    // Top-level `#[cfg(test)] mod name {...}` spans, as char ranges.
    let mut test_spans = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < code.len() {
        match code[i] {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            '#' if depth == 0
                && starts_with_tokens(&code, i, &["#", "[", "cfg", "(", "test", ")", "]"]) =>
            {
                if let Some(open) = mod_block_after(&code, i) {
                    let close = matching_brace(&code, open);
                    test_spans.push((i, close));
                    i = close + 1;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    let in_test = |pos: usize| test_spans.iter().any(|&(a, b)| pos >= a && pos <= b);
    let test_lines: usize = test_spans
        .iter()
        .map(|&(a, b)| line_of[b] - line_of[a] + 1)
        .sum();

    let mut functions = Vec::new();
    let mut i = 0;
    while i + 2 < code.len() {
        if is_word_at(&code, i, "fn") && !in_test(i) {
            let mut j = i + 2;
            while j < code.len() && code[j].is_whitespace() {
                j += 1;
            }
            let start = j;
            while j < code.len() && is_ident(code[j]) {
                j += 1;
            }
            if j > start {
                let name: String = code[start..j].iter().collect();
                if let Some(open) = body_open(&code, j) {
                    let close = matching_brace(&code, open);
                    functions.push(Function {
                        name,
                        line: line_of[i],
                        lines: line_of[close] - line_of[i] + 1,
                    });
                }
            }
            i = j;
            continue;
        }
        i += 1;
    }
    Measured {
        lines: total - test_lines,
        functions,
    }
}

/// `text` with comments, string contents and char literals replaced by
/// spaces (newlines kept, so line numbers hold).
fn blank(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let push_blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        let prev_ident = i > 0 && is_ident(c[i - 1]);
        // Line comment.
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
            continue;
        }
        // Block comment, nested.
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    push_blank(&mut out, c[i]);
                    i += 1;
                }
            }
            continue;
        }
        // Raw strings: r"..", r#".."#, br"..".
        if !prev_ident && (c[i] == 'r' || (c[i] == 'b' && c.get(i + 1) == Some(&'r'))) {
            let mut j = if c[i] == 'b' { i + 2 } else { i + 1 };
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) == Some(&'"') {
                out.extend(std::iter::repeat_n(' ', j + 1 - i));
                i = j + 1;
                loop {
                    if i >= c.len() {
                        break;
                    }
                    if c[i] == '"' && (0..hashes).all(|k| c.get(i + 1 + k) == Some(&'#')) {
                        out.extend(std::iter::repeat_n(' ', hashes + 1));
                        i += hashes + 1;
                        break;
                    }
                    push_blank(&mut out, c[i]);
                    i += 1;
                }
                continue;
            }
        }
        // Strings: "..", b"..".
        if c[i] == '"' || (!prev_ident && c[i] == 'b' && c.get(i + 1) == Some(&'"')) {
            if c[i] == 'b' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' && i + 1 < c.len() {
                    push_blank(&mut out, c[i]);
                    i += 1;
                }
                push_blank(&mut out, c[i]);
                i += 1;
            }
            out.push(' ');
            i += 1;
            continue;
        }
        // Char literals ('x', '\n', '\u{..}', b'x'); a lifetime ('a) stays.
        if c[i] == '\'' {
            let is_char = match c.get(i + 1) {
                Some('\\') => true,
                Some(_) => c.get(i + 2) == Some(&'\''),
                None => false,
            };
            if is_char {
                out.push(' ');
                i += 1;
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                while i < c.len() && c[i] != '\'' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
                continue;
            }
        }
        out.push(c[i]);
        i += 1;
    }
    out
}

fn is_ident(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

fn is_word_at(code: &[char], i: usize, word: &str) -> bool {
    let w: Vec<char> = word.chars().collect();
    code.len() >= i + w.len()
        && code[i..i + w.len()] == w[..]
        && (i == 0 || !is_ident(code[i - 1]))
        && code.get(i + w.len()).is_none_or(|&ch| !is_ident(ch))
}

/// The 1-based line of every char.
fn line_index(code: &[char]) -> Vec<usize> {
    let mut line = 1;
    let mut out = Vec::with_capacity(code.len() + 1);
    for &ch in code {
        out.push(line);
        if ch == '\n' {
            line += 1;
        }
    }
    out.push(line);
    out
}

/// Whether the tokens at `i` are `tokens`, whitespace between them allowed.
fn starts_with_tokens(code: &[char], mut i: usize, tokens: &[&str]) -> bool {
    for token in tokens {
        while i < code.len() && code[i].is_whitespace() {
            i += 1;
        }
        let t: Vec<char> = token.chars().collect();
        if code.len() < i + t.len() || code[i..i + t.len()] != t[..] {
            return false;
        }
        i += t.len();
    }
    true
}

/// After a `#[cfg(test)]` at `i`: the `{` of the `mod name {` it marks
/// (other attributes and `pub` allowed between), if it marks one.
fn mod_block_after(code: &[char], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < code.len() && code[j] != ']' {
        j += 1;
    }
    j += 1;
    loop {
        while j < code.len() && code[j].is_whitespace() {
            j += 1;
        }
        if code.get(j) == Some(&'#') {
            while j < code.len() && code[j] != ']' {
                j += 1;
            }
            j += 1;
        } else if is_word_at(code, j, "pub") {
            j += 3;
            if code.get(j) == Some(&'(') {
                while j < code.len() && code[j] != ')' {
                    j += 1;
                }
                j += 1;
            }
        } else {
            break;
        }
    }
    if !is_word_at(code, j, "mod") {
        return None;
    }
    j += 3;
    while j < code.len() && code[j] != '{' && code[j] != ';' {
        j += 1;
    }
    (code.get(j) == Some(&'{')).then_some(j)
}

/// The `{` opening a function's body, from just after its name; `None` for
/// a declaration without a body (`fn f();` in a trait). Brackets and
/// parentheses are skipped, so `[u8; 4]` in a signature is not its end.
fn body_open(code: &[char], mut j: usize) -> Option<usize> {
    let mut nesting = 0usize;
    while j < code.len() {
        match code[j] {
            '(' | '[' => nesting += 1,
            ')' | ']' => nesting = nesting.saturating_sub(1),
            ';' if nesting == 0 => return None,
            '{' if nesting == 0 => return Some(j),
            _ => {}
        }
        j += 1;
    }
    None
}

/// The `}` closing the `{` at `open` (the end of the text if unbalanced).
fn matching_brace(code: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &ch) in code.iter().enumerate().skip(open) {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    code.len().saturating_sub(1)
}

/// Checks the scanner on one synthetic input: the production line count and
/// each function as (name, first line, length).
fn check(input: &str, lines: usize, functions: &[(&str, usize, usize)]) {
    let measured = measure(input);
    let expected = Measured {
        lines,
        functions: functions
            .iter()
            .map(|&(name, line, lines)| Function {
                name: name.to_string(),
                line,
                lines,
            })
            .collect(),
    };
    assert_eq!(measured, expected, "input:\n{input}");
}

#[test]
fn scanner_measures_functions_by_their_braces() {
    check(
        "fn a() {\n    1;\n}\n\nfn b(x: [u8; 4]) -> u8 {\n    x[0]\n}\n",
        7,
        &[("a", 1, 3), ("b", 5, 3)],
    );
    // A declaration without a body, and a function pointer type, are no
    // functions.
    check(
        "trait T {\n    fn f(&self);\n    fn g(&self, h: fn(u8) -> u8) {\n    }\n}\n",
        5,
        &[("g", 3, 2)],
    );
    // Nested functions are measured inside their parent and on their own.
    check(
        "fn outer() {\n    fn inner() {\n    }\n}\n",
        4,
        &[("outer", 1, 4), ("inner", 2, 2)],
    );
}

#[test]
fn scanner_skips_braces_in_strings_chars_and_comments() {
    check(
        concat!(
            "fn a() {\n",
            "    let s = \"}}} \\\" }\";\n",
            "    let r = r#\"} \" }\"#;\n",
            "    let b = b\"}\";\n",
            "    let c = '}';\n",
            "    let e = '\\'';\n",
            "    // }\n",
            "    /* } /* nested } */ } */\n",
            "    let l: &'static str = s;\n",
            "}\n",
            "fn after() {\n",
            "}\n",
        ),
        12,
        &[("a", 1, 10), ("after", 11, 2)],
    );
}

#[test]
fn scanner_leaves_out_test_modules() {
    check(
        concat!(
            "fn a() {\n",
            "}\n",
            "#[cfg(test)]\n",
            "mod tests {\n",
            "    fn long() {\n",
            "        \"}\";\n",
            "    }\n",
            "}\n",
        ),
        2,
        &[("a", 1, 2)],
    );
    // `#[cfg(test)]` on something else than a module counts.
    check("#[cfg(test)]\nfn helper() {\n}\n", 3, &[("helper", 2, 2)]);
}

#[test]
fn scanner_finds_a_function_over_the_limit() {
    let body = "    let x = 1;\n".repeat(FN_LIMIT);
    let input = format!("fn long() {{\n{body}}}\n");
    let measured = measure(&input);
    assert_eq!(measured.functions.len(), 1);
    assert!(measured.functions[0].lines > FN_LIMIT);
}

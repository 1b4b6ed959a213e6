//! Only `archive/src/keys.rs` builds archive keys (ARCHITECTURE.md's
//! invariant): every other source file of the crate asks `keys` for a key,
//! a prefix, a range bound or a cursor. This test reads them all and fails
//! on key-building code outside `keys.rs`:
//!
//! - `to_be_bytes()` (an ordinal, seq or time laid out as key bytes); the
//!   exceptions are the block header's fact count in `block.rs`, which is
//!   the block format, not a key, and the slots of the control file in
//!   `control.rs` (a file outside sled, not a key);
//! - `[0xff; ..]` (a hand-made upper range bound), outside `block.rs`'s
//!   test payloads;
//! - `scan_prefix(` with anything but a `keys::` prefix;
//! - `.range(` over a hand-built `a..b` range;
//! - the key-part helpers (`time_bytes`, `index_key`, `name_prefix`,
//!   `state_byte`), which only `keys.rs` may combine.
//!
//! `the_scan_finds_the_old_key_building_code` holds the scan to lines of
//! the code before keys owned the layout (commit 8fc7f55), so that it
//! cannot pass by finding nothing.

/// One finding: file, line number, the rule, the line.
#[derive(Debug)]
struct Finding {
    file: String,
    line: usize,
    rule: &'static str,
    text: String,
}

/// The text of `line` up to a `//` comment.
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// The argument text of the call whose `(` is at `open` (up to its
/// matching `)`, or the end of the text).
fn argument(line: &str, open: usize) -> &str {
    let mut depth = 0;
    for (i, c) in line[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &line[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    &line[open + 1..]
}

/// The key-building code in one file's `text` (`file` is its name, e.g.
/// `list.rs`).
fn scan(file: &str, text: &str) -> Vec<Finding> {
    let mut found = Vec::new();
    let mut flag = |line: usize, rule: &'static str, text: &str| {
        found.push(Finding {
            file: file.to_owned(),
            line: line + 1,
            rule,
            text: text.trim().to_owned(),
        })
    };
    for (n, raw) in text.lines().enumerate() {
        let line = code(raw);
        for (at, _) in line.match_indices(".to_be_bytes()") {
            let before = &line[..at];
            let operand = before
                .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default();
            let control_slot = file == "control.rs" && !line.contains("meta");
            if !(control_slot || file == "block.rs" && operand == "count") {
                flag(n, "to_be_bytes() lays out key bytes", raw);
            }
        }
        if line.contains("[0xff;") && file != "block.rs" {
            flag(n, "[0xff; ..] is a hand-made range bound", raw);
        }
        for helper in ["time_bytes(", "index_key(", "name_prefix(", "state_byte("] {
            if line.contains(helper) {
                flag(n, "a key-part helper combined outside keys.rs", raw);
            }
        }
    }
    // Calls whose argument rustfmt may put on the next lines: read over
    // the whole file (comments cut), so a split call is still seen.
    let whole: String = text.lines().map(|l| format!("{}\n", code(l))).collect();
    let line_of = |at: usize| whole[..at].matches('\n').count();
    for (at, m) in whole.match_indices("scan_prefix(") {
        let arg = argument(&whole, at + m.len() - 1);
        if !arg.trim_start().starts_with("keys::") {
            let n = line_of(at);
            flag(
                n,
                "scan_prefix( with a raw prefix",
                text.lines().nth(n).unwrap_or_default(),
            );
        }
    }
    for (at, m) in whole.match_indices(".range(") {
        let arg = argument(&whole, at + m.len() - 1);
        if arg.contains("..") {
            let n = line_of(at);
            flag(
                n,
                ".range( over a hand-built range",
                text.lines().nth(n).unwrap_or_default(),
            );
        }
    }
    found
}

#[test]
fn only_keys_rs_builds_archive_keys() {
    let files: Vec<&super::File> = super::rust_files_under("archive/src").collect();
    assert!(
        files.len() >= 10,
        "the archive's sources were not found in archive/src"
    );
    let mut findings = Vec::new();
    for file in files {
        let name = file.rel.trim_start_matches("archive/src/");
        if name == "keys.rs" {
            continue;
        }
        let text = &file.text;
        findings.extend(scan(name, text));
    }
    assert!(
        findings.is_empty(),
        "key-building code outside archive/src/keys.rs (ask `keys` for the key instead):\n{}",
        findings
            .iter()
            .map(|f| format!("  {}:{}: {}: {}", f.file, f.line, f.rule, f.text))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_scan_finds_the_old_key_building_code() {
    // Lines of archive/src/lib.rs, list.rs and verify.rs at commit 8fc7f55,
    // before keys.rs owned the whole layout: each must be found.
    let old = [
        (
            "lib.rs",
            "            .insert(ordinal.to_be_bytes(), encode_record(&record))",
        ),
        (
            "lib.rs",
            "            .insert(run_id, &ordinal.to_be_bytes())",
        ),
        (
            "lib.rs",
            "            for item in t.events.scan_prefix(ordinal.to_be_bytes()) {",
        ),
        (
            "lib.rs",
            "            .scan_prefix([keys::state_byte(RunState::Running)])",
        ),
        (
            "lib.rs",
            "            .range(keys::event_key(ordinal, 0)..=keys::event_key(ordinal, start))",
        ),
        ("lib.rs", "        let mut range = events.range(lo..=hi);"),
        (
            "lib.rs",
            "                keys::index_key(&keys::name_prefix(tool), after.started_at, ordinal),",
        ),
        (
            "list.rs",
            "            None => hi.extend_from_slice(&[0xff; 17]),",
        ),
        ("list.rs", "            hex::encode(ordinal.to_be_bytes())"),
        ("list.rs", "        for item in tree.range(lo..hi).rev() {"),
        (
            "verify.rs",
            "            .scan_prefix(ordinal.to_be_bytes())",
        ),
        (
            "verify.rs",
            "            want_time.insert(keys::index_key(&[], r.started_at, ord));",
        ),
    ];
    let split = "        let blocks = events\n            .scan_prefix(\n                ordinal_bytes,\n            )\n            .range(\n                lo..hi,\n            );";
    assert_eq!(
        scan("read.rs", split).len(),
        2,
        "a call split over lines is seen"
    );
    for (file, line) in old {
        assert!(
            !scan(file, line).is_empty(),
            "the scan misses old key-building code in {file}: {line}"
        );
    }
    // And it leaves alone what is not a key: the block header's count, a
    // comment, a call that asks keys.
    for (file, line) in [
        (
            "block.rs",
            "    value.extend_from_slice(&count.to_be_bytes());",
        ),
        (
            "read.rs",
            "        // ordinal.to_be_bytes() is keys.rs's business",
        ),
        (
            "read.rs",
            "            .range(keys::events_range(ordinal, 0, start))",
        ),
        (
            "recover.rs",
            "            for item in t.events.scan_prefix(keys::events_prefix(ordinal)) {",
        ),
    ] {
        let found = scan(file, line);
        assert!(found.is_empty(), "{file}: {line}: {found:?}");
    }
}

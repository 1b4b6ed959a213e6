//! Internals of the test macros. Not a stable API: use the macros.

use std::path::{Path, PathBuf};

pub use insta;

use reel::tools::Tools;

use reel::report::ReplayReport;

use crate::{replay, Recording, ReplayOptions};

/// Resolves `tape` against the calling crate's manifest directory.
pub fn tape_path(manifest_dir: &str, tape: &str) -> PathBuf {
    let p = Path::new(tape);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        Path::new(manifest_dir).join(p)
    }
}

/// Replays a tape on a fresh thread with its own runtime, whose clock is
/// paused (sleeps in tools advance virtual time; no wall clock is waited
/// on). Works from synchronous and asynchronous tests alike.
pub fn replay_tape(
    manifest_dir: &str,
    tape: &str,
    tools: &Tools,
    options: &ReplayOptions,
) -> ReplayReport {
    let path = tape_path(manifest_dir, tape);
    let mut recording = match Recording::from_tape_file(&path) {
        Ok(r) => r,
        Err(e) => panic!("reel: cannot replay {}: {e}", path.display()),
    };
    // As the test named it: the same on every machine and checkout.
    recording.source = tape.to_owned();
    let tools = tools.clone();
    let options = options.clone();
    let worker = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a replay runtime");
        // Moved in: the tape is replayed once, so nothing is copied.
        rt.block_on(replay(recording, &tools, &options))
    });
    match worker.join() {
        Ok(report) => report,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Fails the test with every divergence, one readable line each. On a
/// divergence the report is also written beside the tape
/// (`<tape>.report.json`), where an editor running `reel lsp` shows it; on
/// a match a stale report there is removed.
#[track_caller]
pub fn assert_matched(manifest_dir: &str, tape: &str, report: &ReplayReport) {
    let path = tape_path(manifest_dir, tape);
    if report.is_match() {
        let _ = std::fs::remove_file(ReplayReport::path_beside(&path));
        return;
    }
    let written = match report.write_beside(&path) {
        Ok(p) => format!(
            "the report is in {} (for your editor's `reel lsp`; not meant to be committed: \
             add `*.report.json` to .gitignore; a replay that matches removes it)",
            p.display()
        ),
        Err(e) => format!("(the report could not be written beside the tape: {e})"),
    };
    panic!(
        "replay of {} diverged:\n  {}\n\n{report}\n{written}",
        report.source,
        report.problems().join("\n  ")
    );
}

/// The insta settings of reel snapshots: insta's own place (`snapshots/`
/// beside the test file), volatile fields (times, durations, clock reads)
/// redacted. The one place that lists them.
pub fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_prepend_module_to_snapshot(true);
    for selector in [
        ".facts[].at",
        ".facts[].offset",
        ".facts[].data.duration_ns",
        ".facts[].data.unix_nanos",
        ".calls[].result.expected.duration_ns",
    ] {
        s.add_redaction(selector, "[volatile]");
    }
    s
}

/// The report as snapshotted: JSON, with the ids recorders draw at random
/// (artifact ids `art-…` and invocation ids `inv-…`, 128 random bits each)
/// numbered in order of first appearance (`art-[1]`, `art-[2]`, `inv-[1]`), wherever
/// they appear (a fact's field, a claim ticket, a result). Recording the
/// same behaviour again then changes no line, and which facts share an id
/// stays visible.
pub fn snapshot_value(report: &ReplayReport) -> serde_json::Value {
    let mut value = serde_json::to_value(report).unwrap_or(serde_json::Value::Null);
    let mut seen: Vec<String> = Vec::new();
    number_ids(&mut value, &mut seen);
    value
}

fn number_ids(value: &mut serde_json::Value, seen: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => {
            if let Some(numbered) = numbered_ids(s, seen) {
                *s = numbered;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| number_ids(v, seen)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| number_ids(v, seen)),
        _ => {}
    }
}

/// `text` with each random id numbered (`None`: it holds none). An id is
/// `art-` or `inv-` followed by at least 16 lowercase hex digits, not
/// preceded by a letter or digit.
fn numbered_ids(text: &str, seen: &mut Vec<String>) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut i = 0;
    while i + 4 <= bytes.len() {
        let prefix = &text.as_bytes()[i..i + 4];
        let starts = (prefix == b"art-" || prefix == b"inv-")
            && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric());
        let digits = if starts {
            bytes[i + 4..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
                .count()
        } else {
            0
        };
        if digits < 16 {
            i += 1;
            continue;
        }
        let id = &text[i..i + 4 + digits];
        if !seen.iter().any(|s| s == id) {
            seen.push(id.to_owned());
        }
        // Numbered among the ids of its kind: art-[1], art-[2], inv-[1].
        let n = seen
            .iter()
            .filter(|s| s.starts_with(&id[..4]))
            .position(|s| s == id)
            .map_or(0, |n| n + 1);
        out.push_str(&text[copied..i]);
        out.push_str(&format!("{}[{n}]", &id[..4]));
        i += 4 + digits;
        copied = i;
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// Replays `$tape` (a path relative to the calling crate) against `$tools`
/// and fails the test with the readable divergence if anything differs.
/// Returns the report.
///
/// ```no_run
/// use reel::tools::Tools;
/// # async fn deploy(_: reel::context::ToolContext, _: serde_json::Value) -> Result<(), reel::context::ToolError> { Ok(()) }
/// let tools = Tools::new().register("deploy", deploy);
/// reel_replayer::assert_replays!("tests/tapes/deploy.tape.jsonl", tools);
/// ```
#[macro_export]
macro_rules! assert_replays {
    ($tape:expr, $tools:expr $(,)?) => {
        $crate::assert_replays!($tape, $tools, $crate::ReplayOptions::default())
    };
    ($tape:expr, $tools:expr, $options:expr $(,)?) => {{
        let report =
            $crate::support::replay_tape(env!("CARGO_MANIFEST_DIR"), $tape, &$tools, &$options);
        $crate::support::assert_matched(env!("CARGO_MANIFEST_DIR"), $tape, &report);
        report
    }};
}

/// Replays `$tape` against `$tools`, fails on any divergence, and snapshots
/// the report (the re-derived timeline and results) with insta, in
/// `snapshots/` beside the test file (insta's place), named after the
/// calling test; times and durations redacted, random artifact and
/// invocation ids numbered ([`support::snapshot_value`]), so recording the
/// same behaviour again changes no line.
///
/// [`support::snapshot_value`]: crate::support::snapshot_value
#[macro_export]
macro_rules! assert_replay_snapshot {
    ($tape:expr, $tools:expr $(,)?) => {
        $crate::assert_replay_snapshot!($tape, $tools, $crate::ReplayOptions::default())
    };
    ($tape:expr, $tools:expr, $options:expr $(,)?) => {{
        let report = $crate::assert_replays!($tape, $tools, $options);
        let value = $crate::support::snapshot_value(&report);
        $crate::support::snapshot_settings().bind(|| {
            $crate::support::insta::assert_json_snapshot!(value);
        });
        report
    }};
}

#[cfg(test)]
mod tests {
    use super::numbered_ids;

    #[test]
    fn random_ids_are_numbered_in_order_of_first_appearance() {
        let art = "art-0123456789abcdef0123456789abcdef";
        let inv = "inv-fedcba9876543210fedcba9876543210";
        let mut seen = Vec::new();
        assert_eq!(
            numbered_ids(&format!("{art} then {inv}, {art}"), &mut seen).as_deref(),
            Some("art-[1] then inv-[1], art-[1]")
        );
        assert_eq!(
            numbered_ids(&format!("reel-artifact:{inv}"), &mut seen).as_deref(),
            Some("reel-artifact:inv-[1]")
        );
        // Not ids: too short, inside a word, upper case.
        for text in [
            "art-1234",
            "part-0123456789abcdef01",
            "art-0123456789ABCDEF01",
            "no id",
        ] {
            assert_eq!(numbered_ids(text, &mut seen), None, "{text}");
        }
    }
}

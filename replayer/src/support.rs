//! Internals of the test macros. Not a stable API: use the macros.

use std::path::{Path, PathBuf};

pub use insta;

use reel::tools::Tools;

use crate::{replay, Recording, ReplayOptions, ReplayReport};

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
        Ok(p) => format!("the report is in {}", p.display()),
        Err(e) => format!("(the report could not be written beside the tape: {e})"),
    };
    panic!(
        "replay of {} diverged:\n  {}\n\n{report}\n{written}",
        report.source,
        report.problems().join("\n  ")
    );
}

/// The workspace root above `manifest_dir` (where `snapshots/` lives).
pub fn workspace_root(manifest_dir: &str) -> PathBuf {
    let start = Path::new(manifest_dir);
    start
        .ancestors()
        .find(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .map(|t| t.contains("[workspace]"))
                .unwrap_or(false)
        })
        .unwrap_or(start)
        .to_path_buf()
}

/// The insta settings of reel snapshots: stored under the workspace's
/// `snapshots/`, with volatile fields (times, durations, clock reads)
/// redacted. The one place that lists them.
pub fn snapshot_settings(manifest_dir: &str) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(workspace_root(manifest_dir).join("snapshots"));
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
/// the report (the re-derived timeline and results) with insta, under the
/// workspace's `snapshots/`, named after the calling test, volatile fields
/// redacted.
#[macro_export]
macro_rules! assert_replay_snapshot {
    ($tape:expr, $tools:expr $(,)?) => {
        $crate::assert_replay_snapshot!($tape, $tools, $crate::ReplayOptions::default())
    };
    ($tape:expr, $tools:expr, $options:expr $(,)?) => {{
        let report = $crate::assert_replays!($tape, $tools, $options);
        $crate::support::snapshot_settings(env!("CARGO_MANIFEST_DIR")).bind(|| {
            $crate::support::insta::assert_json_snapshot!(report);
        });
        report
    }};
}

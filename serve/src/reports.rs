//! Replay reports on disk: `reel serve --reports DIR` lists the
//! `*.report.json` files under `DIR` (the replayer writes one beside a
//! tape that diverged, `<tape>.report.json`; see
//! `reel_core::report::ReplayReport::path_beside`), and reads one with the
//! tape beside it, when there is one, as the recording.
//!
//! A report is reached by its name in the listing, never by a path the
//! browser sends: nothing outside `DIR` can be read.

use std::path::{Path, PathBuf};

use reel_core::report::ReplayReport;
use reel_core::tape::Tape;
use reel_core::Fact;

/// How deep under the reports directory reports are looked for.
const MAX_DEPTH: usize = 6;
/// The most reports listed.
const MAX_REPORTS: usize = 2000;
/// The largest report file read (a report carries the replayed facts).
const MAX_REPORT_BYTES: u64 = 256 * 1024 * 1024;
/// The file name ending of a report.
pub(crate) const SUFFIX: &str = ".report.json";

/// One report file.
#[derive(Debug, Clone)]
pub(crate) struct ReportFile {
    /// Its path under the reports directory, `/`-separated: its name in
    /// the console's addresses.
    pub(crate) name: String,
    /// Where it is.
    pub(crate) path: PathBuf,
    /// When it was written, for the listing's order.
    pub(crate) modified: Option<std::time::SystemTime>,
}

/// The reports under `dir`, newest first.
pub(crate) fn list(dir: &Path) -> Result<Vec<ReportFile>, String> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    let top = std::fs::read_dir(dir).map_err(|e| {
        format!(
            "cannot read the reports directory {}: {e} (check --reports)",
            dir.display()
        )
    })?;
    drop(top);
    while let Some((at, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            let file_name = entry.file_name().to_string_lossy().into_owned();
            if kind.is_dir()
                && depth < MAX_DEPTH
                && !file_name.starts_with('.')
                && file_name != "target"
            {
                stack.push((path, depth + 1));
            } else if kind.is_file() && file_name.ends_with(SUFFIX) && out.len() < MAX_REPORTS {
                let Ok(rel) = path.strip_prefix(dir) else {
                    continue;
                };
                let name = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                let modified = entry.metadata().ok().and_then(|m| m.modified().ok());
                out.push(ReportFile {
                    name,
                    path,
                    modified,
                });
            }
        }
    }
    out.sort_by(|a, b| b.modified.cmp(&a.modified).then(a.name.cmp(&b.name)));
    Ok(out)
}

/// Reads a report.
pub(crate) fn read(path: &Path) -> Result<ReplayReport, String> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .len();
    if len > MAX_REPORT_BYTES {
        return Err(format!(
            "{} is {len} bytes: larger than the console reads ({MAX_REPORT_BYTES})",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "{} is not a reel replay report ({e}): reports are the JSON the replayer writes \
             beside a tape (`<tape>.report.json`)",
            path.display()
        )
    })
}

/// The recorded facts of the tape beside a report (`<tape>.report.json`
/// sits beside `<tape>`), when it is there and reads.
pub(crate) fn tape_beside(report: &Path) -> Option<Vec<Fact>> {
    let name = report.to_string_lossy();
    let tape = PathBuf::from(name.strip_suffix(SUFFIX)?);
    let file = std::fs::File::open(tape).ok()?;
    Tape::read(std::io::BufReader::new(file))
        .ok()
        .map(|t| t.facts)
}

//! `reel stats`: figures about the archive.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_viewer::render::terminal::{escape, JsonSafe};
use reel_viewer::render::text::{timestamp, TextRenderer, Tone};

use crate::failure::{shown, Failure};

mod tools;

/// `reel stats`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct StatsArgs {
    /// Print as JSON.
    #[arg(long)]
    json: bool,
    /// Figures per tool instead of the archive's: calls, errors, error
    /// rate, p50/p95/p99 duration and progress reports per call, over the
    /// runs the filters below select (from each run's summary).
    #[arg(long, value_enum)]
    by: Option<By>,
    /// With --by: only runs of this tenant.
    #[arg(long, requires = "by")]
    tenant: Option<String>,
    /// With --by: only runs that called this tool.
    #[arg(long, requires = "by")]
    tool: Option<String>,
    /// With --by: only runs in this state (running, completed, failed, cancelled, incomplete).
    #[arg(long, requires = "by")]
    status: Option<reel::RunState>,
    /// With --by: only runs started at or after this time: RFC 3339 (2026-11-30T08:00:00Z), a date (2026-11-30, midnight UTC) or an age (2h, 3days).
    #[arg(long, requires = "by", value_parser = super::runs::parse_time, conflicts_with = "window")]
    since: Option<i64>,
    /// With --by: only runs started before this time: RFC 3339, a date or an age.
    #[arg(long, requires = "by", value_parser = super::runs::parse_time)]
    until: Option<i64>,
    /// With --by: the last span of time (1h, 7days): --since that long ago.
    #[arg(long, requires = "by", value_parser = humantime::parse_duration)]
    window: Option<std::time::Duration>,
}

/// What `reel stats --by` groups by.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// Per tool name.
    Tool,
}

/// Prints runs, facts, artifacts and bytes on disk (the names in bold
/// with colours); with `--by tool`, the figures per tool.
pub fn run(dir: &Path, args: StatsArgs, text: TextRenderer) -> Result<ExitCode, Failure> {
    if args.by.is_some() {
        return tools::run(dir, &args, text);
    }
    let s = crate::source::open(dir)?.stats()?;
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(JsonSafe::new(&mut out), &s)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{}      {}",
        text.tone(Tone::Strong, "archive"),
        shown(dir)
    )?;
    writeln!(
        out,
        "{}         {}",
        text.tone(Tone::Strong, "runs"),
        s.runs
    )?;
    writeln!(
        out,
        "{}        {}",
        text.tone(Tone::Strong, "facts"),
        s.facts
    )?;
    writeln!(
        out,
        "{}    {}",
        text.tone(Tone::Strong, "artifacts"),
        s.artifacts
    )?;
    writeln!(
        out,
        "{}        {}",
        text.tone(Tone::Strong, "bytes"),
        s.bytes_on_disk
    )?;
    if s.facts > 0 {
        writeln!(
            out,
            "{}   {:.1}",
            text.tone(Tone::Strong, "bytes/fact"),
            s.bytes_on_disk as f64 / s.facts as f64
        )?;
    }
    if let Some((id, at)) = &s.oldest {
        writeln!(
            out,
            "{}   {} ({})",
            text.tone(Tone::Strong, "oldest run"),
            escape(id),
            timestamp(*at)
        )?;
    }
    if let Some((id, at)) = &s.newest {
        writeln!(
            out,
            "{}   {} ({})",
            text.tone(Tone::Strong, "newest run"),
            escape(id),
            timestamp(*at)
        )?;
    }
    // The writer's journal (through the recorder's socket, while one
    // holds the archive): unapplied bytes and the appends that waited for
    // the checkpointer.
    if let Some(j) = &s.journal {
        writeln!(
            out,
            "{}      {} unapplied bytes (bound {}), {} checkpoints, {} syncs",
            text.tone(Tone::Strong, "journal"),
            j.unapplied_bytes,
            j.unapplied_bound,
            j.checkpoints,
            j.syncs
        )?;
        writeln!(
            out,
            "{}  {} appends waited for the checkpointer ({:.1} ms in all)",
            text.tone(Tone::Strong, "bound waits"),
            j.bound_waits,
            j.bound_waited_us as f64 / 1000.0
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

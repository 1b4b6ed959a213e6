//! `reel stats`: figures about the archive.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_viewer::render::terminal::{escape, JsonSafe};
use reel_viewer::render::text::{timestamp, TextRenderer, Tone};

use crate::failure::{shown, Failure};

/// `reel stats`'s arguments.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

/// Prints runs, facts, artifacts and bytes on disk (the names in bold
/// with colours).
pub fn run(dir: &Path, args: StatsArgs, text: TextRenderer) -> Result<ExitCode, Failure> {
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

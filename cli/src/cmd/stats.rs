//! `reel stats`: figures about the archive.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_viewer::render::terminal::{escape, JsonSafe};
use reel_viewer::render::text::timestamp;

use crate::failure::{shown, Failure};
use crate::source::Source;

/// `reel stats`'s arguments.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

/// Prints runs, facts, artifacts and bytes on disk.
pub fn run(dir: &Path, args: StatsArgs) -> Result<ExitCode, Failure> {
    let s = Source::open(dir)?.stats()?;
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(JsonSafe::new(&mut out), &s)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "archive      {}", shown(dir))?;
    writeln!(out, "runs         {}", s.runs)?;
    writeln!(out, "facts        {}", s.facts)?;
    writeln!(out, "artifacts    {}", s.artifacts)?;
    writeln!(out, "bytes        {}", s.bytes_on_disk)?;
    if s.facts > 0 {
        writeln!(
            out,
            "bytes/fact   {:.1}",
            s.bytes_on_disk as f64 / s.facts as f64
        )?;
    }
    if let Some((id, at)) = &s.oldest {
        writeln!(out, "oldest run   {} ({})", escape(id), timestamp(*at))?;
    }
    if let Some((id, at)) = &s.newest {
        writeln!(out, "newest run   {} ({})", escape(id), timestamp(*at))?;
    }
    Ok(ExitCode::SUCCESS)
}

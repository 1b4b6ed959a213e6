//! `reel verify`: check every block, hash chain, seq and index.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_viewer::render::terminal::{escape, JsonSafe};

use crate::failure::Failure;

/// `reel verify`'s arguments.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Verifies the archive; exits 2 when a problem is found.
pub fn run(dir: &Path, args: VerifyArgs) -> Result<ExitCode, Failure> {
    let archive = super::open_existing(dir, "verify")?;
    let report = archive.verify()?;
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(JsonSafe::new(&mut out), &report)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "checked {} runs, {} blocks, {} facts, {} artifacts",
            report.runs, report.blocks, report.facts, report.artifacts
        )?;
        if report.pruned > 0 {
            writeln!(
                out,
                "{} runs were pruned (`reel prune`): not damage",
                report.pruned
            )?;
        }
        if !report.known_losses.is_empty() {
            let n = report.known_losses.len();
            writeln!(
                out,
                "{n} known {} (facts `reel salvage` could not recover; not damage):",
                if n == 1 { "loss" } else { "losses" }
            )?;
            for p in &report.known_losses {
                writeln!(out, "  {}", escape(&p.to_string()))?;
            }
        }
        if report.is_ok() {
            writeln!(out, "ok: no problem found")?;
        } else {
            let n = report.problems.len();
            writeln!(out, "{n} {}:", if n == 1 { "problem" } else { "problems" })?;
            for p in &report.problems {
                writeln!(out, "  {}", escape(&p.to_string()))?;
            }
        }
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

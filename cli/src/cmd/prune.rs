//! `reel prune --older-than 30d [--tenant T] [--status S] [--dry-run]`:
//! retention (see `reel_archive::Archive::prune`).

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel::RunState;
use reel_archive::PruneFilter;
use reel_viewer::render::terminal::{escape, JsonSafe};

use crate::failure::Failure;
use reel_viewer::render::text::counted;

/// A pause before each deletion, in milliseconds, each announced on
/// standard error (`prune step N`): for the crash tests, which kill a prune
/// right after a given step. Not documented to users.
const PAUSE_ENV: &str = "REEL_PRUNE_PAUSE_MS";

/// `reel prune`'s arguments.
#[derive(Args, Debug)]
pub struct PruneArgs {
    /// Delete runs started longer ago than this (30d, 12h) or before this
    /// time (2026-11-01T00:00:00Z).
    #[arg(long, value_name = "AGE", value_parser = super::runs::parse_time)]
    older_than: i64,
    /// Only runs of this tenant.
    #[arg(long)]
    tenant: Option<String>,
    /// Only runs in this state (completed, failed, cancelled, incomplete).
    #[arg(long)]
    status: Option<RunState>,
    /// Say what would be deleted; delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Prunes.
pub fn run(dir: &Path, args: PruneArgs) -> Result<ExitCode, Failure> {
    if args.status == Some(RunState::Running) {
        return Err(Failure::usage(
            "--status running: a running run is never pruned; pass completed, failed, cancelled or incomplete",
        ));
    }
    let archive = super::open_existing_to_write(dir, "prune")?;
    let filter = PruneFilter {
        started_before: args.older_than,
        tenant: args.tenant,
        status: args.status,
    };
    let pause = std::env::var(PAUSE_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(std::time::Duration::from_millis);
    let bar = (io::stdout().is_terminal() && !args.json).then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} runs")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(if args.dry_run { "counting" } else { "pruning" });
        bar
    });
    let mut steps = 0u64;
    let report = archive.prune(&filter, args.dry_run, &mut |done, total| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
        if let Some(p) = pause {
            steps += 1;
            eprintln!("prune step {steps}");
            std::thread::sleep(p);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(JsonSafe::new(&mut out), &report)?;
        writeln!(out)?;
    } else {
        let verb = if report.dry_run {
            "would delete"
        } else {
            "deleted"
        };
        writeln!(
            out,
            "{verb} {} ({}, {}) and {} no remaining run refers to",
            counted(report.runs.len() as u64, "run"),
            counted(report.blocks, "block"),
            counted(report.facts, "fact"),
            counted(report.artifacts, "artifact")
        )?;
        for run in &report.runs {
            writeln!(out, "  {}", escape(run))?;
        }
        if let Some(why) = &report.artifacts_kept {
            writeln!(out, "artifacts kept: {}", escape(why))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `reel salvage DAMAGED --into NEW`: every intact block and artifact of a
//! damaged archive into a fresh one (see `reel_archive::salvage`).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use reel_archive::ArchiveConfig;
use reel_viewer::render::terminal::{escape, JsonSafe};

use crate::failure::{shown, Failure};
use reel_viewer::render::text::counted;

/// `reel salvage`'s arguments.
#[derive(Args, Debug)]
pub struct SalvageArgs {
    /// The damaged archive directory (only read, never written).
    damaged: PathBuf,
    /// Where to write the fresh archive: a new or empty directory.
    #[arg(long, value_name = "NEW")]
    into: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Salvages; exits 2 when something was lost, 0 when nothing was.
pub fn run(args: SalvageArgs) -> Result<ExitCode, Failure> {
    if !args.damaged.is_dir() {
        return Err(Failure::msg(format!(
            "no archive directory at {}: pass the damaged archive's directory",
            shown(&args.damaged)
        )));
    }
    let report = reel_archive::salvage(&args.damaged, &args.into, ArchiveConfig::default())
        .map_err(|e| Failure::msg(e.to_string()))?;
    let lost = report.lost_anything();
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(JsonSafe::new(&mut out), &report)?;
        writeln!(out)?;
    } else {
        match &report.sled_refused {
            None => writeln!(out, "sled opened the store; its raw files were scanned too")?,
            Some(why) => writeln!(
                out,
                "sled could not read the store ({}); its raw files were scanned",
                escape(why)
            )?,
        }
        writeln!(
            out,
            "recovered: {} ({} with facts lost), {}, {}, {}",
            counted(report.runs_recovered as u64, "run"),
            report.runs_broken,
            counted(report.blocks_recovered as u64, "block"),
            counted(report.facts_recovered as u64, "fact"),
            counted(report.artifacts_recovered as u64, "artifact")
        )?;
        writeln!(
            out,
            "lost: {}, {} no recovered run leads to, {}, {}",
            counted(report.runs_lost as u64, "run"),
            counted(report.blocks_unplaced as u64, "block"),
            counted(report.facts_lost as u64, "fact"),
            counted(report.artifacts_lost as u64, "artifact")
        )?;
        if report.flushes_lost_by_sled > 0 {
            writeln!(
                out,
                "sled's own recovery lost {} durable flush{} (the control record's count); \
                 the raw scan recovered what is counted above",
                report.flushes_lost_by_sled,
                if report.flushes_lost_by_sled == 1 {
                    ""
                } else {
                    "es"
                }
            )?;
        }
        if let Some(detail) = &report.journal_damaged {
            writeln!(
                out,
                "the journal is damaged ({}): acknowledged batches only it held may be lost; \
                 every intact frame was read",
                escape(detail)
            )?;
        }
        for run in report.runs.iter().filter(|r| !r.lost.is_empty()) {
            let seqs: Vec<String> = run
                .lost
                .iter()
                .map(|l| format!("{}..={}", l.first, l.last))
                .collect();
            writeln!(
                out,
                "  run {}: chain broken, seqs {} lost",
                escape(&run.run_id),
                seqs.join(", ")
            )?;
        }
        writeln!(
            out,
            "fresh archive: {} (check it with `reel verify --archive {}`)",
            shown(&args.into),
            shown(&args.into)
        )?;
    }
    Ok(if !lost {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

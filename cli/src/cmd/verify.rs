//! `reel verify`: check every block, hash chain, seq and index.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_viewer::render::terminal::{escape, JsonSafe};

use crate::failure::Failure;
use reel_viewer::render::text::{counted, TextRenderer, Tone};

/// `reel verify`'s arguments.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also check the archive, a projection made by `reel sync`, against
    /// this NATS cluster's stream (comma-separated client URLs): every
    /// run's last block there is in the projection, fact for fact.
    #[arg(long)]
    nats: Option<String>,
}

/// Verifies the archive; exits 2 when a problem is found. The verdict is
/// painted: ok green, problems red, what is not damage yellow.
pub fn run(dir: &Path, args: VerifyArgs, text: TextRenderer) -> Result<ExitCode, Failure> {
    let archive = super::open_existing(dir, "verify")?;
    let report = archive.verify()?;
    let against = match &args.nats {
        Some(urls) => Some(reel_nats::verify_projection(
            &super::sync::nats_config(urls)?,
            &archive,
        )?),
        None => None,
    };
    let mut out = io::stdout().lock();
    let stream_ok = against.as_ref().is_none_or(|a| a.is_ok());
    if let Some(a) = &against {
        if !args.json {
            writeln!(
                out,
                "against the cluster: {} of {} up to date",
                a.matching,
                counted(a.streams, "run")
            )?;
            for p in &a.problems {
                writeln!(out, "  {}", escape(p))?;
            }
        }
    }
    if args.json {
        match &against {
            // With --nats, both checks: the archive's and the cluster's.
            Some(against) => serde_json::to_writer_pretty(
                JsonSafe::new(&mut out),
                &serde_json::json!({ "archive": &report, "cluster": against }),
            )?,
            None => serde_json::to_writer_pretty(JsonSafe::new(&mut out), &report)?,
        }
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "checked {}, {}, {}, {}",
            counted(report.runs, "run"),
            counted(report.blocks, "block"),
            counted(report.facts, "fact"),
            counted(report.artifacts, "artifact")
        )?;
        if report.pruned > 0 {
            let pruned = format!(
                "{} pruned (`reel prune`): not damage",
                if report.pruned == 1 {
                    "1 run was".to_owned()
                } else {
                    format!("{} runs were", report.pruned)
                }
            );
            writeln!(out, "{}", text.tone(Tone::Warn, &pruned))?;
        }
        if !report.known_losses.is_empty() {
            let n = report.known_losses.len();
            let head = format!(
                "{n} known {} (facts `reel salvage` could not recover; not damage):",
                if n == 1 { "loss" } else { "losses" }
            );
            writeln!(out, "{}", text.tone(Tone::Warn, &head))?;
            for p in &report.known_losses {
                writeln!(out, "  {}", escape(&p.to_string()))?;
            }
        }
        if report.is_ok() && stream_ok {
            writeln!(out, "{}", text.tone(Tone::Good, "ok: no problem found"))?;
        } else if report.is_ok() {
            // Not "ok": the exit status says otherwise.
            writeln!(
                out,
                "{}",
                text.tone(
                    Tone::Bad,
                    "the archive itself: no problem found; against the cluster: the problems above"
                )
            )?;
        } else {
            let n = report.problems.len();
            let head = format!("{n} {}:", if n == 1 { "problem" } else { "problems" });
            writeln!(out, "{}", text.tone(Tone::Bad, &head))?;
            for p in &report.problems {
                writeln!(out, "  {}", escape(&p.to_string()))?;
            }
        }
    }
    Ok(if report.is_ok() && stream_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

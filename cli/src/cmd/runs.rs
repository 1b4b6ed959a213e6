//! `reel runs`: list runs, newest first, filtered and paged.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use reel::RunState;
use reel_archive::RunFilter;
use reel_viewer::render::terminal::{escape, JsonSafe};
use reel_viewer::render::text::{duration, timestamp};

use crate::failure::Failure;
use crate::source::Source;

/// `reel runs`'s arguments.
#[derive(Args, Debug)]
pub struct RunsArgs {
    /// Only runs of this tenant.
    #[arg(long)]
    tenant: Option<String>,
    /// Only runs that called this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only runs in this state (running, completed, failed, cancelled, incomplete).
    #[arg(long)]
    status: Option<RunState>,
    /// Only runs started at or after this time: RFC 3339 (2026-11-30T08:00:00Z) or an age (2h, 3days).
    #[arg(long, value_parser = parse_time)]
    since: Option<i64>,
    /// Only runs started before this time: RFC 3339 or an age.
    #[arg(long, value_parser = parse_time)]
    until: Option<i64>,
    /// At most this many runs.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Continue after a previous page (the cursor it printed).
    #[arg(long)]
    cursor: Option<String>,
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn parse_time(s: &str) -> Result<i64, String> {
    if let Ok(t) = humantime::parse_rfc3339_weak(s) {
        return Ok(nanos(t));
    }
    match humantime::parse_duration(s) {
        Ok(age) => Ok(nanos(SystemTime::now() - age)),
        Err(_) => Err(format!(
            "\"{s}\" is neither a time (2026-11-30T08:00:00Z) nor an age (2h, 30min, 3days)"
        )),
    }
}

fn nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Prints one page of runs as a table (or JSON), and the cursor of the next.
pub fn run(dir: &Path, args: RunsArgs) -> Result<ExitCode, Failure> {
    let source = Source::open(dir)?;
    let page = source.list_runs(&RunFilter {
        tenant: args.tenant,
        tool: args.tool,
        status: args.status,
        since: args.since,
        until: args.until,
        limit: Some(args.limit),
        cursor: args.cursor.map(reel_archive::Cursor),
    })?;
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(JsonSafe::new(&mut out), &page)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    // Recorded cells are escaped before the widths are measured.
    let rows: Vec<[String; 8]> = page
        .runs
        .iter()
        .map(|r| {
            [
                match &r.outside_run {
                    None => escape(&r.run_id).into_owned(),
                    Some(_) => format!("{} (no run)", escape(&r.run_id)),
                },
                timestamp(r.started_at),
                r.duration_ns().map(duration).unwrap_or_else(|| "-".into()),
                r.state.to_string(),
                escape(r.tenant().unwrap_or("-")).into_owned(),
                r.tools
                    .iter()
                    .map(|t| escape(t))
                    .collect::<Vec<_>>()
                    .join(","),
                r.facts.to_string(),
                r.flagged().to_string(),
            ]
        })
        .collect();
    let head = [
        "RUN",
        "STARTED",
        "DURATION",
        "STATUS",
        "TENANT",
        "TOOLS",
        "FACTS",
        "ANOMALIES",
    ];
    let mut widths = head.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    writeln!(out, "{}", line(&head.map(String::from)))?;
    for row in &rows {
        writeln!(out, "{}", line(row))?;
    }
    if rows.is_empty() {
        writeln!(out, "(no runs match)")?;
    }
    if let Some(next) = page.next {
        writeln!(out, "more: --cursor {}", escape(&next.0))?;
    }
    Ok(ExitCode::SUCCESS)
}

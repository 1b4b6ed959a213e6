//! `reel runs`: list runs, newest first, filtered and paged.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use reel::RunState;
use reel_archive::RunFilter;
use reel_viewer::render::terminal::width::fit;
use reel_viewer::render::terminal::{escape, JsonSafe};
use reel_viewer::render::text::{duration, timestamp, TextRenderer, Tone};
use serde_json::Value;

use crate::failure::{exit, Failure};
use crate::stream;
use reel_archive::live::Source;

/// `reel runs`'s arguments.
#[derive(Args, Debug, Clone)]
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
    /// Only runs started at or after this time: RFC 3339 (2026-11-30T08:00:00Z), a date (2026-11-30, midnight UTC) or an age (2h, 3days).
    #[arg(long, value_parser = parse_time)]
    since: Option<i64>,
    /// Only runs started before this time: RFC 3339, a date or an age.
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
    // A date alone (2027-01-01): its midnight, UTC.
    let is_date = s.len() == 10
        && s.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if is_date {
        if let Ok(t) = humantime::parse_rfc3339(&format!("{s}T00:00:00Z")) {
            return Ok(nanos(t));
        }
    }
    match humantime::parse_duration(s) {
        Ok(age) => Ok(nanos(SystemTime::now() - age)),
        Err(_) => Err(format!(
            "\"{s}\" is neither a time (2026-11-30T08:00:00Z), a date (2026-11-30) nor an age (2h, 30min, 3days)"
        )),
    }
}

fn nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        // Past 2262 a time does not fit: it is later than every run.
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// How long ago, in one unit: `42s ago`, `5m ago`, `3h ago`, `12d ago`.
fn age(ns: i64) -> String {
    let s = ns.max(0) / 1_000_000_000;
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3_599 => format!("{}m ago", s / 60),
        3_600..=172_799 => format!("{}h ago", s / 3_600),
        _ => format!("{}d ago", s / 86_400),
    }
}

/// Prints one page of runs as a table (or JSON), and the cursor of the
/// next; a table wider than the renderer's width is narrowed to it, and
/// states and anomalies are painted in its colours.
pub fn run(dir: &Path, args: RunsArgs, text: TextRenderer) -> Result<ExitCode, Failure> {
    let width = text.width;
    let source = crate::source::open(dir)?;
    let page = source.list_runs(&RunFilter {
        tenant: args.tenant,
        tool: args.tool,
        status: args.status,
        since: args.since,
        until: args.until,
        limit: Some(args.limit),
        cursor: args.cursor.map(reel_archive::Cursor),
    })?;
    let (anomalies, damaged) = anomalies(&source, &page.runs);
    // Said after the listing.
    let done = || {
        if damaged.is_empty() {
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "reel: damaged: facts of {} could not be read (each gap counted as an anomaly): `reel show RUN` shows where, `reel verify` checks the archive",
            escape(&damaged.join(", "))
        );
        ExitCode::from(exit::DAMAGE)
    };
    let mut out = io::stdout().lock();
    if args.json {
        let mut doc = serde_json::to_value(&page)?;
        if let Some(runs) = doc.get_mut("runs").and_then(Value::as_array_mut) {
            for (run, n) in runs.iter_mut().zip(&anomalies) {
                if let Some(run) = run.as_object_mut() {
                    run.insert("anomalies".into(), serde_json::json!(n));
                }
            }
        }
        serde_json::to_writer_pretty(JsonSafe::new(&mut out), &doc)?;
        writeln!(out)?;
        return Ok(done());
    }
    // Recorded cells are escaped before the widths are measured.
    let mut rows = cells(&page.runs, &anomalies);
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
    let measure = |rows: &[[String; 8]]| {
        let mut widths = head.map(str::len);
        for row in rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        widths
    };
    let mut widths = measure(&rows);
    let mut gap = "  ";
    let mut started_right = false;
    // Too wide for the terminal: every column stays, their cells shrink.
    // The start becomes an age (right-aligned), columns part by one
    // space, then the tools, the tenant and last the run id are cut.
    let natural = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    if let Some(max) = width.filter(|max| natural > *max) {
        let now = nanos(SystemTime::now());
        for (row, r) in rows.iter_mut().zip(&page.runs) {
            row[1] = age(now.saturating_sub(r.started_at));
        }
        widths = measure(&rows);
        gap = " ";
        started_right = true;
        let mut excess = (widths.iter().sum::<usize>() + widths.len() - 1).saturating_sub(max);
        for col in [5, 4, 0] {
            let cut = excess.min(widths[col] - head[col].len());
            widths[col] -= cut;
            excess -= cut;
        }
    }
    // Cells are fitted and padded uncoloured, then painted: the colours
    // take no column. The header is bold; a run's state in its colour, a
    // non-zero anomaly count yellow (`?`, unknown, red).
    let line = |cells: &[String], tones: &[Option<Tone>]| {
        let last = cells.len() - 1;
        cells
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (c, w))| {
                let c = fit(c, w);
                let padded = if i == 1 && started_right {
                    format!("{c:>w$}")
                } else if i == last {
                    c
                } else {
                    format!("{c:<w$}")
                };
                match tones.get(i).copied().flatten() {
                    Some(tone) => text.tone(tone, &padded),
                    None => padded,
                }
            })
            .collect::<Vec<_>>()
            .join(gap)
            .trim_end()
            .to_owned()
    };
    writeln!(
        out,
        "{}",
        line(&head.map(String::from), &[Some(Tone::Strong); 8])
    )?;
    for ((row, r), n) in rows.iter().zip(&page.runs).zip(&anomalies) {
        let mut tones = [None; 8];
        tones[3] = Some(TextRenderer::state_tone(r.state));
        tones[7] = match n {
            Some(0) => None,
            Some(_) => Some(Tone::Warn),
            None => Some(Tone::Bad),
        };
        writeln!(out, "{}", line(row, &tones))?;
    }
    if rows.is_empty() {
        writeln!(out, "(no runs match)")?;
    }
    if let Some(next) = page.next {
        writeln!(out, "more: --cursor {}", escape(&next.0))?;
    }
    Ok(done())
}

/// Each run's anomalies, counted as `show` counts them (its facts are
/// read: the index knows calls and credentials, not what happened in
/// them); a run whose facts cannot be read at all counts as unknown. Also
/// the runs where damage was met: it is said, and exits 2, as every verb
/// does.
fn anomalies(source: &Source, runs: &[reel::RunRecord]) -> (Vec<Option<usize>>, Vec<String>) {
    let mut damaged = Vec::new();
    let mut counts = Vec::with_capacity(runs.len());
    for r in runs {
        match stream::anomalies(source, r) {
            Ok(streamed) => {
                if streamed.damaged {
                    damaged.push(r.run_id.clone());
                }
                counts.push(Some(streamed.timeline.anomalies.len()));
            }
            Err(e) => {
                if e.code == exit::DAMAGE {
                    damaged.push(r.run_id.clone());
                }
                counts.push(None);
            }
        }
    }
    (counts, damaged)
}

/// The table's cells of each run, escaped: id, start, duration, status,
/// tenant, tools, facts, anomalies (`?` when unknown).
fn cells(runs: &[reel::RunRecord], anomalies: &[Option<usize>]) -> Vec<[String; 8]> {
    runs.iter()
        .zip(anomalies)
        .map(|(r, anomalies)| {
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
                anomalies.map_or_else(|| "?".into(), |n| n.to_string()),
            ]
        })
        .collect()
}

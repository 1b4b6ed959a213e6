//! `reel stats --by tool`: per tool, over the runs the filters select,
//! merged from the runs' summaries (see `reel_archive`'s `summary`).

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use reel::summary::{Overview, ToolSummary};
use reel_archive::RunFilter;
use reel_viewer::render::terminal::{escape, JsonSafe};
use reel_viewer::render::text::{duration, timestamp, TextRenderer, Tone};
use serde_json::{json, Value};

use super::StatsArgs;
use crate::failure::Failure;

/// One tool's figures as `--json` prints them.
fn figures(tool: &str, t: &ToolSummary) -> Value {
    json!({
        "tool": tool,
        "calls": t.calls,
        "errors": t.errors,
        "aborted": t.aborted,
        "error_rate": t.error_rate(),
        "p50_ns": t.durations.quantile(0.50),
        "p95_ns": t.durations.quantile(0.95),
        "p99_ns": t.durations.quantile(0.99),
        "progress": t.progress,
        "progress_per_call": t.progress_per_call(),
    })
}

pub(super) fn run(dir: &Path, args: &StatsArgs, text: TextRenderer) -> Result<ExitCode, Failure> {
    // --window 1h: since an hour ago.
    let since = match args.window {
        Some(w) => Some(
            std::time::SystemTime::now()
                .checked_sub(w)
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
        ),
        None => args.since,
    };
    let filter = RunFilter {
        tenant: args.tenant.clone(),
        tool: args.tool.clone(),
        status: args.status,
        since,
        until: args.until,
        limit: None,
        cursor: None,
    };
    let o = crate::source::open(dir)?.overview(&filter, 1)?;
    let mut out = io::stdout().lock();
    if args.json {
        // The window in unix nanos (`until` excluded); runs without a
        // stored summary read from their facts; runs left out unread.
        let tools: Vec<Value> = o
            .tools
            .iter()
            .map(|(name, t)| figures(name, &t.total))
            .collect();
        let figures = json!({
            "since": o.since,
            "until": o.until,
            "runs": o.runs,
            "from_facts": o.from_facts,
            "unreadable": o.unreadable,
            "tools": tools,
        });
        serde_json::to_writer_pretty(JsonSafe::new(&mut out), &figures)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    table(&mut out, &o, text)?;
    Ok(ExitCode::SUCCESS)
}

/// The figures as a table, tool names escaped, headers in bold.
fn table(out: &mut impl Write, o: &Overview, text: TextRenderer) -> io::Result<()> {
    let from_facts = if o.from_facts > 0 {
        format!(" ({} summarized from their facts)", o.from_facts)
    } else {
        String::new()
    };
    let window = if o.runs > 0 {
        format!(", started {} to {}", timestamp(o.since), timestamp(o.until))
    } else {
        String::new()
    };
    writeln!(
        out,
        "{} {}{from_facts}{window}",
        text.tone(Tone::Strong, "runs"),
        o.runs
    )?;
    if o.unreadable > 0 {
        writeln!(
            out,
            "{} {} runs whose facts could not be read are left out: `reel verify` checks the archive",
            text.tone(Tone::Strong, "left out"),
            o.unreadable
        )?;
    }
    if o.tools.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = o.tools.keys().map(|n| escape(n).into_owned()).collect();
    let w = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let head = format!(
        "{:<w$}  {:>7}  {:>6}  {:>6}  {:>8}  {:>8}  {:>8}  {:>13}",
        "tool", "calls", "errors", "rate", "p50", "p95", "p99", "progress/call"
    );
    writeln!(out, "{}", text.tone(Tone::Strong, &head))?;
    let ns = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), duration);
    for (name, t) in names.iter().zip(o.tools.values()) {
        let t = &t.total;
        let pad = w.saturating_sub(name.chars().count());
        writeln!(
            out,
            "{name}{:pad$}  {:>7}  {:>6}  {:>5.1}%  {:>8}  {:>8}  {:>8}  {:>13.1}",
            "",
            t.calls,
            t.errors,
            t.error_rate() * 100.0,
            ns(t.durations.quantile(0.50)),
            ns(t.durations.quantile(0.95)),
            ns(t.durations.quantile(0.99)),
            t.progress_per_call()
        )?;
    }
    Ok(())
}

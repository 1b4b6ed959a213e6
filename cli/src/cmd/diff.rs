//! `reel diff`: two runs' facts side by side, aligned by position, with the
//! first difference marked. Differences are found by the replayer's
//! matcher, ignoring what always differs between two runs (times,
//! durations, run ids, invocation ids, clock reads). A value a tool got from a clock read
//! and passed on (into an effect's request or result, an output) is the
//! same read in both runs: a field that holds run A's clock read where run
//! B holds the clock read aligned with it is not a difference either. The
//! same goes for artifact ids, which stores draw at random (the ids of two
//! aligned `artifact.put`s are one id), and for an artifact scope made from
//! the run id (`run:<id>`).
//!
//! The alignment is the viewer's (`reel_viewer::diff`, which matches with
//! the core's matcher, the rules the replayer applies): the console's
//! compare page (`reel serve`, `/compare?a=A&b=B`) aligns with the same
//! code. This module only words it for the terminal.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel::fact::FactKind;
use reel::matching::{show, FieldDiff};
use reel::Fact;
use reel_viewer::diff::align;
use reel_viewer::render::terminal::escape;
use reel_viewer::render::terminal::width::{fit, wrap};
use reel_viewer::render::text::{Color, TextRenderer, Tone};

use crate::failure::Failure;
use crate::stream::resolve_run;
use reel_archive::live::{Item, Source};

/// `reel diff`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct DiffArgs {
    /// The first run.
    run_a: String,
    /// The second run.
    run_b: String,
    /// Width of the side-by-side view (default: the terminal's, or
    /// `COLUMNS`; 160 into a pipe or a file).
    #[arg(long)]
    width: Option<usize>,
}

/// Prints the two runs side by side; exits 1 when they differ.
pub fn run(dir: &Path, args: DiffArgs, paint: TextRenderer) -> Result<ExitCode, Failure> {
    let source = crate::source::open(dir)?;
    let fa = collect_facts(&source, &args.run_a)?;
    let fb = collect_facts(&source, &args.run_b)?;
    let width = args.width.or(paint.width).unwrap_or(160).max(40);
    let (text, first) = render(&args.run_a, &fa, &args.run_b, &fb, width, &paint);
    let code = if first.is_some() {
        ExitCode::from(crate::failure::exit::FAILURE)
    } else {
        ExitCode::SUCCESS
    };
    match io::stdout().lock().write_all(text.as_bytes()) {
        // The answer is known before a line is written: a reader that
        // stopped early (`| head -1`) does not change it.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(code),
        other => other.map(|()| code).map_err(Failure::from),
    }
}

/// Every fact of a run; a run with a gap cannot be diffed.
fn collect_facts(source: &Source, run_id: &str) -> Result<Vec<Fact>, Failure> {
    resolve_run(source, run_id)?;
    let mut facts = Vec::new();
    for item in source.facts(run_id, 0..u64::MAX, false)? {
        match item? {
            Item::Fact(f) => facts.push(f),
            Item::Gap(gap) => {
                return Err(Failure::damaged(format!(
                    "run {run_id}: facts #{}..{} are damaged ({}): cannot diff a run with a gap",
                    gap.first,
                    gap.last.map(|l| format!("={l}")).unwrap_or_default(),
                    gap.detail
                )))
            }
        }
    }
    Ok(facts)
}

/// The first difference: (index, field diffs).
pub type First = Option<(usize, Vec<FieldDiff>)>;

/// One fact on one line as `reel show` words it (`#seq kind detail`),
/// escaped for the terminal (recorded kinds and payloads are untrusted).
/// `tools` names each call's tool.
fn summary(f: &Fact, tools: &HashMap<&str, &str>) -> String {
    let tool = f
        .call
        .as_deref()
        .and_then(|c| tools.get(c).copied())
        .unwrap_or_default();
    let detail = TextRenderer::new(Color::Plain).detail_text(f, tool);
    format!("#{} {} {detail}", f.seq, escape(f.kind.name()))
}

/// Each call's tool, by call id.
fn tools(facts: &[Fact]) -> HashMap<&str, &str> {
    facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CallStarted(c) => Some((c.call_id.as_str(), c.tool_name.as_str())),
            _ => None,
        })
        .collect()
}

/// Renders the two runs side by side; returns the text and the first
/// difference. Every recorded string in it (run ids, facts, field paths
/// and values) is escaped for the terminal. In `paint`'s colours (none
/// without): the runs' ids bold, a differing row's mark and the first
/// difference red, the verdict green when the runs match; colours are
/// added after the columns are fitted, so they take no column.
pub fn render(
    a_id: &str,
    a: &[Fact],
    b_id: &str,
    b: &[Fact],
    width: usize,
    paint: &TextRenderer,
) -> (String, First) {
    let rows = align(a, b);
    // `≠ ` + left + ` │ ` + right.
    let col = width.saturating_sub(5) / 2;
    let (tools_a, tools_b) = (tools(a), tools(b));
    let mut out = String::new();
    let head = format!(
        "  {:<col$} │ {}",
        fit(&escape(a_id), col),
        fit(&escape(b_id), col)
    );
    let _ = writeln!(out, "{}", paint.tone(Tone::Strong, &head));
    let mut first: First = None;
    for (i, diff) in rows.into_iter().enumerate() {
        let (fa, fb) = (a.get(i), b.get(i));
        let mark = if diff.is_empty() {
            " ".to_owned()
        } else {
            paint.tone(Tone::Bad, "≠")
        };
        let left = fa
            .map(|f| summary(f, &tools_a))
            .unwrap_or_else(|| "(no fact)".into());
        let right = fb
            .map(|f| summary(f, &tools_b))
            .unwrap_or_else(|| "(no fact)".into());
        let _ = writeln!(
            out,
            "{mark} {:<col$} │ {}",
            fit(&left, col),
            fit(&right, col)
        );
        if !diff.is_empty() && first.is_none() {
            for (n, d) in diff.iter().enumerate() {
                let lead = if n == 0 {
                    "▶ first difference"
                } else {
                    "  also"
                };
                let line = format!(
                    "  {lead}: {}: {} vs {}",
                    escape(&d.path),
                    escape(&show(&d.expected)),
                    escape(&show(&d.actual))
                );
                let _ = writeln!(
                    out,
                    "{}",
                    paint.tone(Tone::Bad, &wrap(&line, width, "      "))
                );
            }
            first = Some((i, diff));
        }
    }
    match &first {
        None => {
            let verdict = format!(
                "the runs match ({}; times, durations and ids ignored)",
                reel_viewer::render::text::counted(a.len() as u64, "fact")
            );
            let _ = writeln!(out, "{}", paint.tone(Tone::Good, &verdict));
        }
        Some((i, _)) => {
            let verdict = format!("the runs differ first at fact {i}");
            let _ = writeln!(out, "{}", paint.tone(Tone::Bad, &verdict));
        }
    }
    (out, first)
}

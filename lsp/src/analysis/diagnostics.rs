//! Diagnostics: parse errors, stream-rule breaks, the timeline's
//! anomalies, and a replay report's divergences at their lines.

use std::collections::HashSet;

use crate::document::Index;

use super::*;

/// What is known about the replay report beside the tape.
#[derive(Debug, Clone, Copy)]
pub enum ReportInput<'a> {
    /// There is none (or the document is not a file).
    None,
    /// It was read.
    Read {
        /// The report's file name, for messages.
        name: &'a str,
        /// What it says.
        report: &'a ReplayReport,
    },
    /// It is there but could not be read.
    Unreadable {
        /// The report's file name.
        name: &'a str,
        /// Why.
        error: &'a str,
    },
}

/// Every diagnostic of a document: lines that are not valid tape lines
/// (with the parser's column), structural problems, the timeline's
/// anomalies at the lines they concern, and the divergences of a replay
/// report beside the tape.
pub fn diagnostics(view: View<'_>, enc: Encoding, report: ReportInput<'_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    invalid_lines(view, enc, &mut out);
    index_problems(view, enc, &mut out);
    let top = view.index.header.or(view.index.run_started).unwrap_or(0);
    report_divergences(view, enc, report, top, &mut out);

    out.sort_by_key(|d| d.range.start.line);
    if out.len() > MAX_DIAGNOSTICS {
        let more = out.len() - MAX_DIAGNOSTICS;
        out.truncate(MAX_DIAGNOSTICS);
        out.push(diag(
            line_range(view, top, enc),
            DiagnosticSeverity::INFORMATION,
            "too-many",
            SOURCE,
            format!("{more} more problems are not shown"),
        ));
    }
    out
}

/// One diagnostic.
fn diag(
    range: Range,
    severity: DiagnosticSeverity,
    code: &str,
    source: &str,
    message: String,
) -> Diagnostic {
    Diagnostic {
        range,
        severity: Some(severity),
        code: Some(NumberOrString::String(code.to_owned())),
        code_description: None,
        source: Some(source.to_owned()),
        message,
        related_information: None,
        tags: None,
        data: None,
    }
}

/// Lines that are not valid tape lines, with the parser's column.
fn invalid_lines(view: View<'_>, enc: Encoding, out: &mut Vec<Diagnostic>) {
    for (n, line) in view.lines.iter().enumerate() {
        if let Parsed::Invalid { column, what } = line.parsed() {
            let mut range = line_range(view, n, enc);
            if let Some(col) = column {
                range.start.character = enc.units(line.text(), col.saturating_sub(1));
            }
            out.push(diag(
                range,
                DiagnosticSeverity::ERROR,
                "invalid-line",
                SOURCE,
                what.clone(),
            ));
        }
    }
}

/// The line an anomaly of the timeline concerns.
fn anomaly_line(ix: &Index, a: &Anomaly) -> usize {
    match a {
        Anomaly::Gap(gap) => ix
            .line_of_gap(gap.first)
            .or_else(|| gap.last.and_then(|l| ix.line_of_seq(l.saturating_add(1)))),
        Anomaly::UnendedRun => ix.run_started.or(ix.header),
        other => other.seq().and_then(|s| ix.line_of_seq(s)),
    }
    .unwrap_or(0)
}

/// The index's structural problems and the timeline's anomalies, at the
/// lines they concern.
fn index_problems(view: View<'_>, enc: Encoding, out: &mut Vec<Diagnostic>) {
    let ix = view.index;
    // A seq that skips ahead is a gap the timeline reports too: one
    // diagnostic on its line.
    let gap_lines: HashSet<usize> = ix
        .timeline
        .anomalies
        .iter()
        .filter(|a| matches!(a, Anomaly::Gap(_)))
        .map(|a| anomaly_line(ix, a))
        .collect();
    for p in &ix.problems {
        if p.code == GAP && gap_lines.contains(&p.line) {
            continue;
        }
        let severity = match p.code {
            "call-restarted" => DiagnosticSeverity::WARNING,
            "unknown-kind" => DiagnosticSeverity::INFORMATION,
            _ => DiagnosticSeverity::ERROR,
        };
        out.push(diag(
            line_range(view, p.line, enc),
            severity,
            p.code,
            SOURCE,
            p.message.clone(),
        ));
    }
    for a in &ix.timeline.anomalies {
        let line = anomaly_line(ix, a);
        let code = serde_json::to_value(a)
            .ok()
            .and_then(|v| v.get("anomaly").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| "anomaly".into());
        let severity = if matches!(a, Anomaly::Gap(_)) {
            DiagnosticSeverity::ERROR
        } else {
            DiagnosticSeverity::WARNING
        };
        out.push(diag(
            line_range(view, line, enc),
            severity,
            &code,
            SOURCE,
            a.describe(),
        ));
    }
}

/// What the replay report beside the tape says: unreadable, of another
/// run, or its divergences at their lines (`top` when none fits).
fn report_divergences(
    view: View<'_>,
    enc: Encoding,
    report: ReportInput<'_>,
    top: usize,
    out: &mut Vec<Diagnostic>,
) {
    let ix = view.index;
    let (name, report) = match report {
        ReportInput::None => return,
        ReportInput::Unreadable { name, error } => {
            out.push(diag(
                line_range(view, top, enc),
                DiagnosticSeverity::WARNING,
                "report-unreadable",
                REPORT_SOURCE,
                format!("the replay report {name} could not be read: {error}"),
            ));
            return;
        }
        ReportInput::Read { name, report } => (name, report),
    };
    let run = ix.timeline.run.as_ref().map(|r| r.run_id.as_str());
    if let (theirs, Some(ours)) = (report.run_id.as_str(), run) {
        if theirs != ours {
            out.push(diag(
                line_range(view, top, enc),
                DiagnosticSeverity::WARNING,
                "report-other-run",
                REPORT_SOURCE,
                format!(
                    "the replay report {name} is about run {theirs:?}, not this tape's run {ours:?}: its divergences are not shown"
                ),
            ));
            return;
        }
    }
    for (c, d) in report
        .calls
        .iter()
        .filter_map(|c| Some((c, c.divergence.as_ref()?)))
    {
        let call = ix.call(&c.call_id);
        let by_index = call.and_then(|c| {
            c.items
                .iter()
                .filter_map(|item| match item {
                    Item::Line(l) => Some(*l),
                    Item::Call(_) => None,
                })
                .nth(d.index)
        });
        let line = d
            .seq
            .and_then(|s| ix.line_of_seq(s))
            .or(by_index)
            .or(call.map(|c| c.started))
            .unwrap_or(top);
        out.push(diag(
            line_range(view, line, enc),
            DiagnosticSeverity::ERROR,
            d.kind.as_str(),
            REPORT_SOURCE,
            format!("replay diverged ({name}): {}", d.line),
        ));
    }
}

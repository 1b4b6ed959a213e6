//! The page's sections, written by [`HtmlWriter::finish`](super::HtmlWriter::finish)
//! once the timeline is whole: the header, the anomalies, the waterfall
//! and the ledgers. Every recorded string is escaped where it lands
//! ([`escape`]). Public so that other pages of a run (the console of
//! `reel serve`) show the same sections, not a second rendering of the
//! timeline.
//!
//! The waterfall places its bars with `style` attributes (`left`,
//! `width`, `padding-left`): a page that serves it under a
//! Content-Security-Policy must allow style attributes
//! (`style-src-attr 'unsafe-inline'`), never inline scripts.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use reel_core::fact::{CallStatus, TeardownOutcome};
use reel_core::{RunRecord, RunState};

use super::{escape, fragment, ROW_CLASS};
use crate::names::{call_status, name};
use crate::render::text::{duration, timestamp};
use crate::timeline::{Anomaly, CallNode, Timeline};

fn state_class(state: RunState) -> &'static str {
    match state {
        RunState::Completed => "st-ok",
        RunState::Running => "st-running",
        RunState::Cancelled => "st-aborted",
        _ => "st-error",
    }
}

/// The run's header: id, state, start, duration, identity, counts,
/// labels and kinds; `listed` is how many facts the page lists.
pub fn header(page: &mut String, r: &RunRecord, t: &Timeline, listed: u64) {
    // A call outside any run has no run: the title says so.
    let title = match &r.outside_run {
        None => format!(
            "<span class=\"muted\">run</span> <span class=\"mono\">{}</span>",
            escape(&r.run_id)
        ),
        Some(call) => format!(
            "<span class=\"muted\">no run · call</span> <span class=\"mono\">{}</span> \
             <span class=\"muted\">kept as</span> <span class=\"mono\">{}</span>",
            escape(call),
            escape(&r.run_id)
        ),
    };
    let _ = write!(
        page,
        "<header>\n<h1>{title} <span class=\"pill {}\">{}</span></h1>\n<dl class=\"facts-grid\">",
        state_class(r.state),
        escape(r.state.as_str()),
    );
    let mut item = |name: &str, value: String| {
        let _ = write!(page, "<div><dt>{name}</dt><dd>{value}</dd></div>");
    };
    item("started", escape(&timestamp(r.started_at)));
    let took = match (r.duration_ns(), r.state) {
        (Some(d), _) => duration(d),
        (None, RunState::Running) => format!("running, {} so far", duration(t.duration_ns())),
        (None, _) => format!("never ended (last fact at +{})", duration(t.last_offset)),
    };
    item("duration", escape(&took));
    if let Some((status, _)) = t.ended {
        item("ended as", name(&status));
    }
    match &r.identity {
        Some(id) => {
            for (name, v) in [
                ("tenant", &id.tenant),
                ("principal", &id.principal),
                ("conversation", &id.conversation),
            ] {
                if let Some(v) = v {
                    item(name, format!("<span class=\"mono\">{}</span>", escape(v)));
                }
            }
        }
        None => item(
            "identity",
            "<span class=\"muted\">none supplied</span>".into(),
        ),
    }
    if let Some(s) = &r.session_id {
        item(
            "session",
            format!("<span class=\"mono\">{}</span>", escape(s)),
        );
    }
    if let Some(h) = &t.run {
        item(
            "recorded by",
            escape(&format!("{} {}", h.producer.name, h.producer.version)),
        );
    }
    let ended = t.calls.iter().filter(|c| c.ended_seq.is_some()).count();
    item("calls", format!("{} ({} ended)", t.calls.len(), ended));
    let facts = if listed == t.facts {
        t.facts.to_string()
    } else {
        format!("{} ({listed} listed here)", t.facts)
    };
    item("facts", facts);
    item(
        "anomalies",
        if t.anomalies.is_empty() {
            "none".into()
        } else {
            format!("<span class=\"bad\">{}</span>", t.anomalies.len())
        },
    );
    page.push_str("</dl>\n");
    if !r.labels.is_empty() {
        page.push_str("<p class=\"labels\">");
        for (k, v) in &r.labels {
            let _ = write!(
                page,
                "<span class=\"tag mono\">{}={}</span> ",
                escape(k),
                escape(v)
            );
        }
        page.push_str("</p>\n");
    }
    if !t.kinds.is_empty() {
        page.push_str("<p class=\"kinds muted\">");
        let kinds: Vec<String> = t
            .kinds
            .iter()
            .map(|(k, n)| format!("{} {n}", escape(k)))
            .collect();
        page.push_str(&kinds.join(" · "));
        page.push_str("</p>\n");
    }
    page.push_str("</header>\n");
}

/// The call an anomaly marks, when it marks one.
fn anomaly_call<'a>(a: &'a Anomaly, t: &'a Timeline) -> Option<&'a str> {
    match a {
        Anomaly::UnendedCall { call_id, .. }
        | Anomaly::ProgressAfterEnd { call_id, .. }
        | Anomaly::CancelAfterEnd { call_id, .. }
        | Anomaly::Unmatched { call_id, .. } => Some(call_id),
        Anomaly::CredentialFailed { call_id, .. } => call_id.as_deref(),
        Anomaly::TeardownNeverRan { seq, .. } => t
            .teardowns
            .iter()
            .find(|d| d.registered_seq == *seq)
            .and_then(|d| d.call.as_deref()),
        Anomaly::TeardownFailed { seq, .. } => t
            .teardowns
            .iter()
            .find(|d| d.ran_seq == Some(*seq))
            .and_then(|d| d.call.as_deref()),
        Anomaly::UnknownCall { .. } | Anomaly::Gap(_) | Anomaly::UnendedRun => None,
    }
}

/// The anomalies, each linking to its call (`#call=`) where it has one.
pub fn anomalies(page: &mut String, t: &Timeline) {
    if t.anomalies.is_empty() {
        return;
    }
    let _ = write!(
        page,
        "<section id=\"anomalies\" class=\"anomalies\"><h2>Anomalies ({})</h2><ul>",
        t.anomalies.len()
    );
    for a in &t.anomalies {
        let call = anomaly_call(a, t).filter(|c| t.call(c).is_some());
        let text = escape(&a.describe());
        match call {
            Some(c) => {
                let _ = write!(
                    page,
                    "<li>⚠ <a href=\"#call={}\">{text}</a></li>",
                    escape(&fragment(c))
                );
            }
            None => {
                let _ = write!(page, "<li>⚠ {text}</li>");
            }
        }
    }
    page.push_str("</ul></section>\n");
}

/// Calls in tree order: each root, then its children depth first. A call
/// whose parent never started is a root; every call appears once.
fn tree_order(t: &Timeline) -> Vec<&CallNode> {
    let index: HashMap<&str, usize> = t
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| (c.call_id.as_str(), i))
        .collect();
    let mut seen = HashSet::new();
    let mut order = Vec::with_capacity(t.calls.len());
    for (i, c) in t.calls.iter().enumerate() {
        let is_root = c.parent.as_deref().is_none_or(|p| !index.contains_key(p));
        if !is_root || seen.contains(&i) {
            continue;
        }
        let mut stack = vec![i];
        while let Some(j) = stack.pop() {
            if !seen.insert(j) {
                continue;
            }
            order.push(&t.calls[j]);
            for child in t.calls[j].children.iter().rev() {
                if let Some(&k) = index.get(child.as_str()) {
                    stack.push(k);
                }
            }
        }
    }
    // Anything not reached (a repeated call id): in start order.
    for (i, c) in t.calls.iter().enumerate() {
        if !seen.contains(&i) {
            order.push(c);
        }
    }
    order
}

/// The waterfall: one row per call in tree order (class
/// [`ROW_CLASS`], `data-call`, `data-tool`, `data-status`), a bar per call.
pub fn waterfall(page: &mut String, t: &Timeline) {
    let span = t.duration_ns().max(t.last_offset).max(1);
    let pct = |ns: u64| ns.min(span) as f64 * 100.0 / span as f64;
    let mut marks: HashMap<&str, Vec<String>> = HashMap::new();
    for a in &t.anomalies {
        if let Some(c) = anomaly_call(a, t) {
            marks.entry(c).or_default().push(a.describe());
        }
    }
    let _ = write!(
        page,
        "<section id=\"waterfall\" class=\"panel\"><h2>Calls ({})</h2>\
         <div class=\"wf-axis\"><div class=\"wf-label muted\">call · tool · status</div>\
         <div class=\"wf-track\">",
        t.calls.len()
    );
    for q in 0..=4u64 {
        let _ = write!(
            page,
            "<span class=\"tick\" style=\"left:{}%\">{}</span>",
            q * 25,
            escape(&duration(span / 4 * q))
        );
    }
    page.push_str("</div></div>\n");
    if t.calls.is_empty() {
        page.push_str("<p class=\"muted\">This run made no calls.</p>\n");
    }
    for c in tree_order(t) {
        let class = match c.status {
            Some(CallStatus::Ok) => "st-ok",
            Some(CallStatus::Error) => "st-error",
            Some(CallStatus::Aborted) => "st-aborted",
            None => "st-open",
        };
        let status = call_status(c.status);
        let start = pct(c.started_offset);
        let end = match c.ended_offset {
            Some(e) => pct(e.max(c.started_offset)),
            None => 100.0,
        };
        let took = c.duration_ns.map(duration).unwrap_or_else(|| "—".into());
        let mark = marks.get(c.call_id.as_str());
        let call = escape(&c.call_id);
        let _ = write!(
            page,
            "<div class=\"{ROW_CLASS} {class}{}\" data-call=\"{call}\" data-tool=\"{}\" \
             data-status=\"{status}\" data-took=\"{}\" data-depth=\"{}\" role=\"button\" \
             tabindex=\"0\"",
            if mark.is_some() { " flagged" } else { "" },
            escape(&c.tool),
            escape(&took),
            c.depth,
        );
        if let Some(m) = mark {
            let _ = write!(page, " title=\"{}\"", escape(&m.join("\n")));
        }
        let _ = write!(
            page,
            "><div class=\"wf-label\" style=\"padding-left:{}px\">",
            6 + 18 * c.depth.min(20)
        );
        if c.depth > 0 {
            page.push_str("<span class=\"muted\">↳ </span>");
        }
        let _ = write!(
            page,
            "<span class=\"mono\">{call}</span> <b>{}</b> <span class=\"pill {class}\">{status}</span> \
             <span class=\"muted\">{}</span>",
            escape(&c.tool),
            escape(&took),
        );
        if mark.is_some() {
            page.push_str(" <span class=\"warn\" aria-label=\"anomaly\">⚠</span>");
        }
        if let Some(e) = &c.error {
            let _ = write!(page, "<div class=\"sub bad\">{}</div>", escape(e));
        } else if let Some(p) = &c.last_progress {
            let _ = write!(page, "<div class=\"sub muted\">{}</div>", escape(p));
        }
        let _ = write!(
            page,
            "</div><div class=\"wf-track\"><span class=\"bar {class}\" \
             style=\"left:{start:.3}%;width:max(3px,{:.3}%)\"></span>",
            (end - start).max(0.0)
        );
        if c.ended_offset.is_none() {
            page.push_str("<span class=\"open-mark\">never ended →</span>");
        }
        page.push_str("</div></div>\n");
    }
    page.push_str("</section>\n");
}

/// The ledgers: credentials, artifacts, teardown (registered vs ran).
pub fn ledgers(page: &mut String, t: &Timeline) {
    let call = |c: &Option<String>| match c {
        Some(c) => format!(
            "<a class=\"mono\" href=\"#call={}\">{}</a>",
            escape(&fragment(c)),
            escape(c)
        ),
        None => "<span class=\"muted\">run</span>".into(),
    };
    if t.credentials.is_empty() && t.artifacts.is_empty() && t.teardowns.is_empty() {
        return;
    }
    page.push_str("<section class=\"ledgers\">\n");
    if !t.credentials.is_empty() {
        page.push_str(
            "<h2>Credentials</h2><table><tr><th>#</th><th>call</th><th>need</th><th>outcome</th>\
             <th>fingerprint or reason</th></tr>",
        );
        for c in &t.credentials {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td class=\"mono\">{}</td><td class=\"{}\">{}</td><td class=\"mono\">{}</td></tr>",
                c.seq,
                call(&c.call),
                escape(&c.need),
                if c.outcome == "resolved" { "good" } else { "bad" },
                escape(&c.outcome),
                escape(c.fingerprint.as_deref().or(c.reason.as_deref()).unwrap_or("")),
            );
        }
        page.push_str("</table>\n");
    }
    if !t.artifacts.is_empty() {
        page.push_str(
            "<h2>Artifacts</h2><table><tr><th>#</th><th>call</th><th>op</th><th>id</th>\
             <th>size</th></tr>",
        );
        for a in &t.artifacts {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td><td>{}</td></tr>",
                a.seq,
                call(&a.call),
                escape(&a.op),
                escape(a.id.as_deref().unwrap_or("-")),
                a.size.map(|s| format!("{s} B")).unwrap_or_default(),
            );
        }
        page.push_str("</table>\n");
    }
    if !t.teardowns.is_empty() {
        page.push_str(
            "<h2>Teardown (registered vs ran)</h2><table><tr><th>scope</th><th>key</th>\
             <th>call</th><th>registered</th><th>ran</th></tr>",
        );
        for d in &t.teardowns {
            let ran = match (&d.ran_seq, &d.outcome) {
                (Some(s), Some(TeardownOutcome::Ok)) => format!("ok at #{s}"),
                (Some(s), Some(TeardownOutcome::Error { message })) => {
                    format!(
                        "<span class=\"bad\">failed at #{s}: {}</span>",
                        escape(message)
                    )
                }
                (Some(s), Some(TeardownOutcome::TimedOut)) => {
                    format!("<span class=\"bad\">timed out at #{s}</span>")
                }
                _ => "<span class=\"bad\">never ran</span>".into(),
            };
            let _ = write!(
                page,
                "<tr><td>{}</td><td class=\"mono\">{}</td><td>{}</td><td>#{}{}</td><td>{ran}</td></tr>",
                escape(&d.scope.to_string()),
                escape(&d.key_hash),
                call(&d.call),
                d.registered_seq,
                if d.repeats > 0 {
                    format!(" (+{})", crate::render::text::counted(d.repeats, "repeat"))
                } else {
                    String::new()
                },
            );
        }
        page.push_str("</table>\n");
    }
    page.push_str("</section>\n");
}

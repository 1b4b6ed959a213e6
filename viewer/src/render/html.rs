//! The HTML rendering: one self-contained page per run.
//!
//! The page has a header (run id, state, start, duration, identity,
//! counts), the anomalies, a waterfall of calls (one row per call, nested
//! calls indented under their parent, a bar placed and sized by the call's
//! start offset and duration against the run's duration, coloured by
//! status; a call that never ended reaches the end of the run and is
//! marked), the ledgers, and a detail panel: clicking a row (or opening the
//! page with `#call=<id>`, a deep link) lists that call's facts with their
//! kind, seq, offset, the line `reel show` prints, and their data
//! pretty-printed.
//!
//! # Self-contained and safe with untrusted payloads
//!
//! The page has inline CSS and one inline script, and names no address: it
//! loads nothing, and a Content-Security-Policy forbids it to (`default-src
//! 'none'`; the page's own script runs by a per-page nonce, so no inline
//! event handler or injected script could). Every recorded string is
//! escaped where it lands: HTML text and attribute values are escaped, and
//! the facts travel as JSON in a `<script type="application/json">` block
//! with `<`, `>`, `&`, U+2028 and U+2029 written as `\u003c` etc., so a
//! payload holding `</script>` cannot end the block. The script reads that
//! block with `JSON.parse` and shows facts with `textContent` only.
//!
//! # Memory
//!
//! [`HtmlWriter`] streams: each fact is written into the page's data block
//! as it is pushed, and the writer keeps only the
//! [`TimelineBuilder`]'s state (one node per call, the ledgers, the
//! anomalies) and one fact's JSON at a time, never the run's facts. The
//! header, waterfall and ledgers are written by [`HtmlWriter::finish`]
//! after the data block (it is invisible, so the page still reads top to
//! bottom). The page itself holds every fact written to it (about the size
//! of the run's JSON rendering plus one display line per fact), and the
//! browser parses all of it on load: a run of a few hundred thousand facts
//! makes a page of hundreds of megabytes. Use `reel show --call` or
//! `--kind` to list fewer facts; [`HtmlWriter::timeline_only`] folds the
//! other facts into the waterfall without listing them.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};

use reel::fact::{CallStatus, TeardownOutcome};
use reel::gap::Gap;
use reel::{Fact, RunRecord, RunState};

use crate::display::ProgressTemplates;
use crate::names::{call_status, name};
use crate::render::sink::RunSink;
use crate::render::text::{duration, timestamp, TextRenderer};
use crate::timeline::{Anomaly, CallNode, Timeline, TimelineBuilder};

/// The `id` of the `<script type="application/json">` block holding the
/// facts: a JSON array of `{"t": offset text, "line": display line,
/// "fact": the fact as stored}`.
pub const DATA_ID: &str = "reel-facts";

/// The class of every waterfall row (one per call; each row carries
/// `data-call` with the call's id).
pub const ROW_CLASS: &str = "wf-row";

/// Writes a run as one self-contained HTML page, streaming its facts.
///
/// ```
/// use reel_viewer::render::html::HtmlWriter;
/// # use reel::fact::*;
/// # use reel::{Fact, RunRecord};
/// # let facts = vec![Fact { seq: 0, at: 0, offset: 0, call: None, kind: FactKind::RunStarted(RunStarted {
/// #     run_id: "r".into(), session_id: None, identity: None,
/// #     producer: Producer { name: "doc".into(), version: "1".into() },
/// #     labels: Default::default(), teardown_scopes: vec![] }) }];
/// let record = RunRecord::from_first(&facts[0]).unwrap();
/// let mut page = Vec::new();
/// let mut w = HtmlWriter::start(&mut page, &record).unwrap();
/// for fact in &facts {
///     w.fact(fact).unwrap();
/// }
/// let timeline = w.finish().unwrap();
/// assert_eq!(timeline.facts, 1);
/// assert!(String::from_utf8(page).unwrap().starts_with("<!doctype html>"));
/// ```
pub struct HtmlWriter<W: Write> {
    out: W,
    record: RunRecord,
    builder: TimelineBuilder,
    text: TextRenderer,
    nonce: String,
    first: bool,
    listed: u64,
    buf: String,
}

impl<W: Write> HtmlWriter<W> {
    /// Starts the page (head, styles, and the opening of the data block).
    pub fn start(mut out: W, record: &RunRecord) -> io::Result<HtmlWriter<W>> {
        let nonce = nonce();
        let mut head = String::new();
        head.push_str("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        let _ = writeln!(
            head,
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
             style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; base-uri 'none'; \
             form-action 'none'\">"
        );
        head.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        head.push_str("<meta name=\"generator\" content=\"reel\">\n");
        let _ = writeln!(head, "<title>reel: {}</title>", escape(&record.describe()));
        let _ = writeln!(head, "<style>{STYLE}</style>\n</head>");
        // The facts come first in the body: they stream while the header
        // and waterfall need the whole timeline. The block is not displayed.
        let _ = write!(
            head,
            "<body>\n<script type=\"application/json\" id=\"{DATA_ID}\">["
        );
        out.write_all(head.as_bytes())?;
        Ok(HtmlWriter {
            out,
            record: record.clone(),
            builder: TimelineBuilder::default(),
            text: TextRenderer::new(false),
            nonce,
            first: true,
            listed: 0,
            buf: String::new(),
        })
    }

    /// Words progress lines (the listed facts' and the waterfall's) with
    /// `templates`; call it before the first fact.
    pub fn with_templates(mut self, templates: ProgressTemplates) -> HtmlWriter<W> {
        self.builder = std::mem::take(&mut self.builder).with_templates(templates.clone());
        self.text = self.text.with_templates(templates);
        self
    }

    /// Folds one fact into the timeline and lists it in the page (its call's
    /// detail panel, or the run-level facts).
    pub fn fact(&mut self, fact: &Fact) -> io::Result<()> {
        self.builder.push(fact);
        let line = detail_line(&self.text, fact, &self.builder);
        self.buf.clear();
        self.buf.push_str(if self.first { "\n" } else { ",\n" });
        self.first = false;
        self.buf.push_str("{\"t\":");
        self.buf.push_str(&serde_json::to_string(&format!(
            "+{}",
            duration(fact.offset)
        ))?);
        self.buf.push_str(",\"line\":");
        self.buf.push_str(&serde_json::to_string(&line)?);
        self.buf.push_str(",\"fact\":");
        self.buf.push_str(&serde_json::to_string(fact)?);
        self.buf.push('}');
        self.out.write_all(script_json(&self.buf).as_bytes())?;
        self.listed += 1;
        Ok(())
    }

    /// Folds one fact into the timeline (the waterfall, the ledgers, the
    /// anomalies) without listing it: for facts a filter leaves out.
    pub fn timeline_only(&mut self, fact: &Fact) {
        self.builder.push(fact);
    }

    /// Notes facts that could not be read (shown as an anomaly).
    pub fn gap(&mut self, gap: &Gap) {
        self.builder.push_gap(gap);
    }

    /// Ends the page: closes the data block, writes the header, anomalies,
    /// waterfall, detail panel, ledgers and the script; returns the
    /// timeline.
    pub fn finish(mut self) -> io::Result<Timeline> {
        let timeline = self.builder.finish();
        let mut page = String::from("\n]</script>\n");
        header(&mut page, &self.record, &timeline, self.listed);
        anomalies(&mut page, &timeline);
        page.push_str("<main class=\"split\">\n");
        waterfall(&mut page, &timeline);
        page.push_str(
            "<section id=\"detail\" class=\"panel\" aria-live=\"polite\">\
             <p class=\"hint\">Click a call to list its facts, or \
             <a href=\"#run\">show the run-level facts</a>.</p></section>\n",
        );
        page.push_str("</main>\n");
        ledgers(&mut page, &timeline);
        let _ = write!(
            page,
            "<footer>Written by reel {}. This page loads nothing from the network.</footer>\n\
             <script nonce=\"{}\">{SCRIPT}</script>\n</body>\n</html>\n",
            escape(env!("CARGO_PKG_VERSION")),
            self.nonce
        );
        self.out.write_all(page.as_bytes())?;
        self.out.flush()?;
        Ok(timeline)
    }
}

impl<W: Write> RunSink for HtmlWriter<W> {
    fn fact(&mut self, fact: &Fact, listed: bool) -> io::Result<()> {
        if listed {
            HtmlWriter::fact(self, fact)
        } else {
            self.timeline_only(fact);
            Ok(())
        }
    }

    fn gap(&mut self, gap: &Gap) -> io::Result<()> {
        HtmlWriter::gap(self, gap);
        Ok(())
    }

    fn finish(self) -> io::Result<Timeline> {
        HtmlWriter::finish(self)
    }
}

/// A whole run as an HTML page.
pub fn run<'a>(record: &RunRecord, facts: impl IntoIterator<Item = &'a Fact>) -> String {
    let mut buf = Vec::new();
    let mut w = HtmlWriter::start(&mut buf, record).expect("writing to memory");
    for f in facts {
        w.fact(f).expect("writing to memory");
    }
    w.finish().expect("writing to memory");
    String::from_utf8(buf).expect("the page is UTF-8")
}

/// Escapes text for HTML text and (double- or single-quoted) attribute
/// values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Makes JSON text safe inside a `<script>` element: `<`, `>`, `&`, U+2028
/// and U+2029 become `\u` escapes. Those characters only occur inside JSON
/// strings, where the escapes mean the same characters.
pub fn script_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a call id for a `#call=` link, as `encodeURIComponent`
/// would (the page decodes it with `decodeURIComponent`).
pub fn fragment(call_id: &str) -> String {
    let mut out = String::with_capacity(call_id.len());
    for b in call_id.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The detail part of the line `reel show` prints for a fact (what follows
/// the offset, seq, call, tool and kind), so that both renderings say the
/// same thing.
fn detail_line(text: &TextRenderer, fact: &Fact, b: &TimelineBuilder) -> String {
    let tool = fact
        .call
        .as_deref()
        .and_then(|c| b.call_info(c))
        .map_or("", |(t, _)| t);
    text.detail_text(fact, tool)
}

/// 128 bits that no recorded payload can know in advance (std's randomly
/// keyed hasher, fed the clock).
fn nonce() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut out = String::new();
    for i in 0..2u8 {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(now);
        h.write_u8(i);
        let _ = write!(out, "{:016x}", h.finish());
    }
    out
}

fn state_class(state: RunState) -> &'static str {
    match state {
        RunState::Completed => "st-ok",
        RunState::Running => "st-running",
        RunState::Cancelled => "st-aborted",
        _ => "st-error",
    }
}

fn header(page: &mut String, r: &RunRecord, t: &Timeline, listed: u64) {
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
        | Anomaly::CancelAfterEnd { call_id, .. } => Some(call_id),
        Anomaly::CredentialFailed { call_id, .. } => call_id.as_deref(),
        Anomaly::TeardownNeverRan { seq, .. } => t
            .teardowns
            .iter()
            .find(|d| d.registered_seq == *seq)
            .and_then(|d| d.call.as_deref()),
        Anomaly::UnknownCall { .. } | Anomaly::Gap(_) | Anomaly::UnendedRun => None,
    }
}

fn anomalies(page: &mut String, t: &Timeline) {
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

fn waterfall(page: &mut String, t: &Timeline) {
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

fn ledgers(page: &mut String, t: &Timeline) {
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
                    format!(" (+{} repeats)", d.repeats)
                } else {
                    String::new()
                },
            );
        }
        page.push_str("</table>\n");
    }
    page.push_str("</section>\n");
}

const STYLE: &str = r##"
:root { color-scheme: light; --ok: #2e8b57; --error: #c62828; --aborted: #d98a00;
  --open: #8e8e8e; --running: #1e78c8; --line: #e3e5e8; --muted: #6b7075; --sel: #eef4ff; }
* { box-sizing: border-box; }
body { margin: 0; padding: 16px 20px 32px; font: 13px/1.45 system-ui, -apple-system,
  "Segoe UI", Roboto, sans-serif; color: #1d2125; background: #fafbfc; }
h1 { font-size: 18px; margin: 0 0 8px; font-weight: 600; }
h2 { font-size: 14px; margin: 0 0 8px; font-weight: 600; }
a { color: #1a5fb4; }
.mono, pre, code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
  font-size: 12px; }
.muted { color: var(--muted); }
.bad { color: var(--error); }
.good { color: var(--ok); }
header { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px;
  margin-bottom: 12px; }
.facts-grid { display: flex; flex-wrap: wrap; gap: 6px 24px; margin: 0; }
.facts-grid div { min-width: 90px; }
dt { font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
dd { margin: 0; }
.labels, .kinds { margin: 8px 0 0; }
.tag { background: #f0f1f3; border-radius: 3px; padding: 1px 5px; }
.pill { display: inline-block; border-radius: 9px; padding: 0 7px; font-size: 11px;
  font-weight: 600; color: #fff; vertical-align: 1px; }
.pill.st-ok { background: var(--ok); } .pill.st-error { background: var(--error); }
.pill.st-aborted { background: var(--aborted); } .pill.st-open { background: var(--open); }
.pill.st-running { background: var(--running); }
.anomalies { background: #fff5f5; border: 1px solid #f3c2c2; border-radius: 6px;
  padding: 10px 16px; margin-bottom: 12px; }
.anomalies ul { margin: 0; padding-left: 4px; list-style: none; }
.anomalies li { margin: 2px 0; color: #8a1c1c; }
.split { display: flex; gap: 12px; align-items: flex-start; }
.panel { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px; }
#waterfall { flex: 3 1 0; min-width: 0; }
#detail { flex: 2 1 0; min-width: 0; position: sticky; top: 8px; max-height: calc(100vh - 16px);
  overflow: auto; }
.wf-axis, .wf-row { display: grid; grid-template-columns: minmax(260px, 40%) 1fr; }
.wf-axis { border-bottom: 1px solid var(--line); padding-bottom: 4px; font-size: 11px; }
.wf-axis .wf-track { position: relative; height: 16px; }
.tick { position: absolute; transform: translateX(-50%); color: var(--muted); white-space: nowrap; }
.tick:first-child { transform: none; } .tick:last-child { transform: translateX(-100%); }
.wf-row { border-bottom: 1px solid #f0f1f3; cursor: pointer; min-height: 28px; }
.wf-row:hover { background: #f6f8fa; }
.wf-row.selected { background: var(--sel); outline: 1px solid #b9cff5; }
.wf-row:focus-visible { outline: 2px solid #1a5fb4; }
.wf-row.flagged { background: #fffafa; }
.wf-row.flagged.selected { background: var(--sel); }
.wf-label { padding: 4px 8px 4px 6px; overflow: hidden; }
.wf-label .sub { font-size: 11px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.warn { color: var(--error); font-weight: 700; }
.wf-row .wf-track { position: relative; border-left: 1px solid var(--line);
  background: repeating-linear-gradient(90deg, transparent 0 calc(25% - 1px), #f0f1f3 calc(25% - 1px) 25%); }
.bar { position: absolute; top: 7px; height: 14px; border-radius: 3px; }
.bar.st-ok { background: var(--ok); } .bar.st-error { background: var(--error); }
.bar.st-aborted { background: var(--aborted); }
.bar.st-open { background: repeating-linear-gradient(135deg, #b0b0b0 0 6px, #d6d6d6 6px 12px);
  border: 1px dashed var(--error); border-right: 0; border-radius: 3px 0 0 3px; }
.open-mark { position: absolute; right: 4px; top: 6px; font-size: 11px; color: var(--error);
  background: rgba(255,255,255,.85); padding: 0 3px; }
.hint { color: var(--muted); }
#detail h2 { margin-bottom: 2px; }
#detail .meta { color: var(--muted); margin-bottom: 8px; }
ol.facts { list-style: none; margin: 0; padding: 0; }
li.fact { border-top: 1px solid var(--line); padding: 6px 0; }
.fact-head { display: flex; gap: 8px; align-items: baseline; }
.kind { font-weight: 600; }
.fact-line { margin: 2px 0 4px; white-space: pre-wrap; word-break: break-word; }
pre.data { margin: 0; background: #f6f8fa; border-radius: 4px; padding: 6px 8px; max-height: 260px;
  overflow: auto; white-space: pre-wrap; word-break: break-word; }
.ledgers { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px;
  margin-top: 12px; }
table { border-collapse: collapse; margin-bottom: 12px; }
th, td { text-align: left; padding: 2px 12px 2px 0; border-bottom: 1px solid #f0f1f3;
  vertical-align: top; }
th { font-weight: 600; font-size: 11px; color: var(--muted); }
footer { margin-top: 16px; font-size: 11px; color: var(--muted); }
@media (max-width: 900px) { .split { flex-direction: column; } #detail { position: static;
  max-height: none; width: 100%; } #waterfall { width: 100%; } }
"##;

/// The page's one script. It reads recorded data only from the JSON block
/// and from attributes, and writes it only with `textContent`.
const SCRIPT: &str = r##"
(function () {
  "use strict";
  var facts = [];
  try {
    facts = JSON.parse(document.getElementById("reel-facts").textContent);
  } catch (e) {
    facts = [];
  }
  var byCall = new Map();
  var runFacts = [];
  facts.forEach(function (f) {
    var c = f.fact.call;
    if (c === null || c === undefined) { runFacts.push(f); return; }
    if (!byCall.has(c)) byCall.set(c, []);
    byCall.get(c).push(f);
  });
  var rows = new Map();
  document.querySelectorAll(".wf-row").forEach(function (r) { rows.set(r.dataset.call, r); });
  var panel = document.getElementById("detail");

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function show(callId) {
    var row = callId === null ? null : (rows.get(callId) || null);
    rows.forEach(function (r) { r.classList.toggle("selected", r === row); });
    var list = callId === null ? runFacts : (byCall.get(callId) || []);
    var parts = [];
    if (callId === null) {
      parts.push(el("h2", null, "Run-level facts"));
      parts.push(el("div", "meta", "Facts of the run itself, not of a call."));
    } else {
      var h = el("h2");
      h.appendChild(el("span", "mono", callId));
      if (row) h.appendChild(document.createTextNode(" " + row.dataset.tool));
      parts.push(h);
      if (row) {
        parts.push(el("div", "meta", row.dataset.status + " · took " + row.dataset.took +
          (row.title ? " · " + row.title : "")));
      }
    }
    if (list.length === 0) {
      parts.push(el("p", "hint", "No facts of this call are listed in this page."));
    }
    var ol = el("ol", "facts");
    list.forEach(function (f) {
      var li = el("li", "fact");
      li.dataset.seq = String(f.fact.seq);
      var head = el("div", "fact-head");
      head.appendChild(el("span", "mono muted", "#" + f.fact.seq));
      head.appendChild(el("span", "mono muted", f.t));
      head.appendChild(el("span", "kind", f.fact.kind));
      li.appendChild(head);
      li.appendChild(el("div", "fact-line", f.line));
      li.appendChild(el("pre", "data", JSON.stringify(f.fact.data, null, 2)));
      ol.appendChild(li);
    });
    parts.push(ol);
    panel.replaceChildren.apply(panel, parts);
    panel.dataset.call = callId === null ? "" : callId;
    panel.dataset.shown = callId === null ? "run" : "call";
    if (row && row.scrollIntoView && window.innerHeight) {
      var box = row.getBoundingClientRect();
      if (box.top < 0 || box.bottom > window.innerHeight) row.scrollIntoView({ block: "center" });
    }
  }

  function fromHash() {
    var h = location.hash.replace(/^#/, "");
    if (h === "run") { show(null); return; }
    if (h.indexOf("call=") !== 0) return;
    var id;
    try { id = decodeURIComponent(h.slice(5)); } catch (e) { return; }
    if (rows.has(id) || byCall.has(id)) show(id);
  }

  function open(row) {
    var target = "#call=" + encodeURIComponent(row.dataset.call);
    if (location.hash === target) { fromHash(); } else { location.hash = target; }
  }

  var waterfall = document.getElementById("waterfall");
  waterfall.addEventListener("click", function (e) {
    var row = e.target.closest(".wf-row");
    if (row) open(row);
  });
  waterfall.addEventListener("keydown", function (e) {
    var row = e.target.closest(".wf-row");
    if (row && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); open(row); }
  });
  window.addEventListener("hashchange", fromHash);
  fromHash();
  document.body.dataset.ready = "1";
})();
"##;

#[cfg(test)]
mod tests {
    use super::*;
    use reel::fact::*;
    use serde_json::json;

    fn fact(seq: u64, call: Option<&str>, kind: FactKind) -> Fact {
        Fact {
            seq,
            at: 0,
            offset: seq * 1000,
            call: call.map(Into::into),
            kind,
        }
    }

    #[test]
    fn escapes() {
        assert_eq!(
            escape(r#"<a href="x" onclick='y'>&</a>"#),
            "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
        );
        let json =
            serde_json::to_string(&json!({"m": "</script><!-- & \u{2028}\u{2029}"})).unwrap();
        let safe = script_json(&json);
        assert!(!safe.contains('<') && !safe.contains('>') && !safe.contains('&'));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["m"], "</script><!-- & \u{2028}\u{2029}");
        assert_eq!(fragment("c 1/é#"), "c%201%2F%C3%A9%23");
    }

    #[test]
    fn detail_line_is_what_reel_show_prints_after_the_kind() {
        let mut b = TimelineBuilder::default();
        let started = fact(
            0,
            Some("c1 progress"),
            FactKind::CallStarted(CallStarted {
                call_id: "c1 progress".into(),
                tool_name: "walk".into(),
                tool_id: None,
                parent_call: None,
                iteration: 0,
                invocation_id: None,
                mode: CallMode::Async,
                protocol: None,
                platform: None,
                client_info: None,
                args: json!(3),
                wanted: None,
                attached: None,
                spec: None,
                dispatch_tools: None,
                outside_run: None,
            }),
        );
        b.push(&started);
        let text = TextRenderer::new(false);
        assert_eq!(detail_line(&text, &started, &b), "▶ args 3");
        let progress = fact(
            1,
            Some("c1 progress"),
            FactKind::Progress(Progress {
                payload: json!({"message": "  progress <b>1</b>  "}),
                count: 1,
            }),
        );
        b.push(&progress);
        assert_eq!(detail_line(&text, &progress, &b), "progress <b>1</b>");
        let unknown = fact(
            2,
            None,
            FactKind::Unknown {
                kind: "s".into(),
                data: json!({"x": 1}),
            },
        );
        b.push(&unknown);
        assert_eq!(
            detail_line(&text, &unknown, &b),
            "(a kind this reel does not know; from a newer writer) {\"x\":1}"
        );
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
        assert_eq!(nonce().len(), 32);
    }
}

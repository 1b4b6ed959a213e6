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
//! The page has inline CSS and one inline script (kept as files,
//! `render/assets/report.css` and `report.js`, and pulled in with
//! `include_str!`), and names no address: it
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
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};

use reel_core::gap::Gap;
use reel_core::{Fact, RunRecord};

use crate::display::ProgressTemplates;
use crate::render::sink::RunSink;
use crate::render::text::{duration, Color, TextRenderer};
use crate::timeline::{Timeline, TimelineBuilder};

pub mod sections;
use sections::{anomalies, header, ledgers, waterfall};

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
/// # use reel_core::fact::*;
/// # use reel_core::{Fact, RunRecord};
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
        let _ = writeln!(head, "<style>\n{STYLE}</style>\n</head>");
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
            builder: TimelineBuilder::for_record(record),
            text: TextRenderer::new(Color::Plain),
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
             <script nonce=\"{}\">\n{SCRIPT}</script>\n</body>\n</html>\n",
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
/// values. Controls and bidi marks are first shown as the terminal shows
/// them (`\u{1b}`, `\u{202e}`; [`super::terminal::escape_keeping_lines`]):
/// a right-to-left override must not reverse what an operator reads, nor a
/// raw ESC survive a copy into a terminal. Line feeds and tabs stay.
pub fn escape(text: &str) -> String {
    let text = super::terminal::escape_keeping_lines(text);
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

/// The page's styles (`assets/report.css`), inline in its `<style>`; the
/// console (`reel serve`) serves them as part of its stylesheet.
pub const STYLE: &str = include_str!("assets/report.css");

/// The page's one script (`assets/report.js`). It reads recorded data only
/// from the JSON block and from attributes, and writes it only with
/// `textContent`.
const SCRIPT: &str = include_str!("assets/report.js");

#[cfg(test)]
mod tests {
    use super::*;
    use reel_core::fact::*;
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
        // Controls and bidi marks are shown as the terminal shows them;
        // lines and tabs lay the text out.
        assert_eq!(
            escape("a\u{1b}[31m\u{9b}b\u{202e}c\nd\te"),
            "a\\u{1b}[31m\\u{9b}b\\u{202e}c\nd\te"
        );
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
        let text = TextRenderer::new(Color::Plain);
        assert_eq!(detail_line(&text, &started, &b), "▶ args 3");
        let progress = fact(
            1,
            Some("c1 progress"),
            FactKind::Progress(Progress {
                payload: json!({"message": "  progress <b>1</b>  "}),
                count: 1,
                delivered: false,
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
        // A span `reel collect` kept raw is said to be one, not a newer kind.
        let span = fact(
            5,
            None,
            FactKind::Unknown {
                kind: "otel.span".into(),
                data: json!({"name": "http.get"}),
            },
        );
        b.push(&span);
        assert_eq!(
            detail_line(&text, &span, &b),
            "(a span kept as it came) {\"name\":\"http.get\"}"
        );
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
        assert_eq!(nonce().len(), 32);
    }
}

//! The text rendering for terminals: one line per fact, indented by call
//! depth, then a summary (call tree, ledgers, anomalies).
//!
//! Lines stream: [`TextRenderer::fact`] renders a fact as it is pushed into
//! the timeline builder, so a run of any size renders in bounded memory.

use std::fmt::Write as _;
use std::io::{self, Write};

use anstyle::{AnsiColor, Style};
use reel_core::fact::*;
use reel_core::gap::Gap;
use reel_core::{Fact, RunRecord};
use serde_json::Value;

use reel_core::display::cut;

use crate::display::ProgressTemplates;
use crate::names::{call_status, name};
use crate::render::sink::RunSink;
use crate::render::terminal::{escape, width, JsonSafe};
use crate::timeline::{Timeline, TimelineBuilder};

mod detail;

/// Formats unix nanoseconds as RFC 3339 (UTC, milliseconds).
pub fn timestamp(unix_nanos: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(unix_nanos.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// Formats a duration in nanoseconds for people: `850ns`, `12.3µs`,
/// `4.56ms`, `1.23s`, `2m03s`.
pub fn duration(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2}ms", ns as f64 / 1e6),
        1_000_000_000..=59_999_999_999 => format!("{:.2}s", ns as f64 / 1e9),
        _ => format!("{}m{:02}s", ns / 60_000_000_000, (ns / 1_000_000_000) % 60),
    }
}

/// A JSON value on one line, cut to `limit` characters. The characters
/// JSON leaves raw that a terminal would act on are written as JSON's own
/// `\uXXXX` escapes ([`JsonSafe`]), so the line reads as JSON still.
pub fn compact(value: &Value, limit: usize) -> String {
    let mut out = JsonSafe::new(Vec::new());
    // Writing a Value to memory cannot fail.
    let _ = serde_json::to_writer(&mut out, value);
    cut(&String::from_utf8_lossy(&out.into_inner()), limit)
}

/// A tool spec on one line, as `reel show` prints it after a call's args:
/// `spec "Title" [hints] needs a, b wants x` (each part only when the spec
/// has it).
///
/// ```
/// use reel::spec::{Annotations, ToolSpec, ToolSpecExt};
/// use reel_viewer::render::text::spec_summary;
///
/// let spec = ToolSpec::new::<String, ()>("deploy")
///     .title("Deploy a service")
///     .annotations(Annotations { destructive_hint: Some(true), ..Annotations::default() })
///     .needs(["github"]);
/// assert_eq!(spec_summary(&spec), r#"spec "Deploy a service" [destructive] needs github"#);
/// ```
pub fn spec_summary(spec: &reel_core::spec::ToolSpec) -> String {
    let mut d = String::from("spec");
    if let Some(t) = &spec.title {
        let _ = write!(d, " {:?}", cut(t, 80));
    }
    if let Some(id) = &spec.id {
        let _ = write!(d, " id {id}");
    }
    if let Some(a) = &spec.annotations {
        let words = a.words();
        if !words.is_empty() {
            let _ = write!(d, " [{}]", words.join(", "));
        }
    }
    if !spec.needs.is_empty() {
        let _ = write!(d, " needs {}", spec.needs.join(", "));
    }
    if !spec.wants.is_empty() {
        let _ = write!(d, " wants {}", spec.wants.join(", "));
    }
    d
}

/// Whether a [`TextRenderer`] paints with ANSI colours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Color {
    /// Plain text, no escape sequences (files, pipes, the console's pages).
    #[default]
    Plain,
    /// ANSI colours (a terminal that wants them).
    Ansi,
}

/// Renders text, with or without ANSI colours, progress lines in the
/// wording of its templates.
#[derive(Debug, Clone, Default)]
pub struct TextRenderer {
    /// Plain, or ANSI colours.
    pub color: Color,
    /// The wording of progress lines (default: seed 000's).
    pub templates: ProgressTemplates,
    /// The terminal's width, when lines are sized to one: a fact's line
    /// is cut (its payload, last on the line, goes first), the header's
    /// and the summary's lines are wrapped. `None`: whole lines.
    pub width: Option<usize>,
}

/// What a painted word says, in [`TextRenderer::tone`]'s palette.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Went well: completed, ok (green).
    Good,
    /// Went wrong: failed, damaged, different (red).
    Bad,
    /// Worth a look: anomalies, pruned, known losses (yellow).
    Warn,
    /// Still going: running (cyan).
    Live,
    /// Secondary: times, counts (grey).
    Dim,
    /// A heading (bold).
    Strong,
}

const DIM: Style = AnsiColor::BrightBlack.on_default();
const BOLD: Style = Style::new().bold();
const GREEN: Style = AnsiColor::Green.on_default();
const RED: Style = AnsiColor::Red.on_default();
const YELLOW: Style = AnsiColor::Yellow.on_default();
const CYAN: Style = AnsiColor::Cyan.on_default();

impl TextRenderer {
    /// A renderer with the default progress wording.
    pub fn new(color: Color) -> TextRenderer {
        TextRenderer {
            color,
            templates: ProgressTemplates::default(),
            width: None,
        }
    }

    /// The same renderer sizing its lines to `width` columns (`None`:
    /// whole lines).
    pub fn with_width(mut self, width: Option<usize>) -> TextRenderer {
        self.width = width;
        self
    }

    /// `text`'s lines wrapped to the width, each continuation indented two
    /// more than its line.
    fn wrapped(&self, text: &str) -> String {
        let Some(w) = self.width else {
            return text.to_owned();
        };
        let mut out = String::with_capacity(text.len());
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let lead = line.len() - line.trim_start_matches(' ').len();
            out.push_str(&width::wrap(line, w, &" ".repeat(lead + 2)));
        }
        out
    }

    /// The same renderer with these progress templates.
    pub fn with_templates(mut self, templates: ProgressTemplates) -> TextRenderer {
        self.templates = templates;
        self
    }

    /// `text` in the colour of `tone` (unchanged without colours), for the
    /// verbs that print beside the timeline (`runs`, `diff`, `verify`,
    /// `stats`): one palette everywhere.
    pub fn tone(&self, tone: Tone, text: &str) -> String {
        let style = match tone {
            Tone::Good => GREEN,
            Tone::Bad => RED,
            Tone::Warn => YELLOW,
            Tone::Live => CYAN,
            Tone::Dim => DIM,
            Tone::Strong => BOLD,
        };
        self.paint(style, text)
    }

    /// The tone of a run's state: completed green, running cyan, the
    /// others red (as the header paints it).
    pub fn state_tone(state: reel_core::RunState) -> Tone {
        match state {
            reel_core::RunState::Completed => Tone::Good,
            reel_core::RunState::Running => Tone::Live,
            _ => Tone::Bad,
        }
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.color == Color::Ansi {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_owned()
        }
    }

    /// The header of a run: id, state, start, duration, identity, counts.
    pub fn header(&self, record: &RunRecord) -> String {
        let state_tone = TextRenderer::state_tone(record.state);
        // A call outside any run has no run: the header says so, and names
        // the key `reel show` takes.
        let title = match &record.outside_run {
            None => format!(
                "{} {}",
                self.paint(BOLD, "run"),
                self.paint(BOLD, &escape(&record.run_id))
            ),
            Some(call) => format!(
                "{}  call {} (kept as {})",
                self.paint(BOLD, "no run"),
                self.paint(BOLD, &escape(call)),
                escape(&record.run_id)
            ),
        };
        let mut out = format!(
            "{title}  {}  started {}",
            self.tone(state_tone, record.state.as_str()),
            timestamp(record.started_at),
        );
        if let Some(d) = record.duration_ns() {
            let _ = write!(out, "  took {}", duration(d));
        }
        let _ = write!(
            out,
            "  {} {}, {} {}",
            record.facts,
            plural(record.facts, "fact"),
            record.calls,
            plural(record.calls, "call")
        );
        if let Some(id) = &record.identity {
            let _ = write!(out, "\n  identity {}", escape(&identity(id)));
        }
        if let Some(s) = &record.session_id {
            let _ = write!(out, "\n  session {}", escape(s));
        }
        if !record.labels.is_empty() {
            let _ = write!(
                out,
                "\n  labels {}",
                escape(&detail::labels(&record.labels))
            );
        }
        self.wrapped(&out)
    }

    /// One fact, rendered after it was pushed into `b` (which knows the
    /// call's tool and depth).
    pub fn fact(&self, fact: &Fact, b: &TimelineBuilder) -> String {
        let (tool, depth) = fact
            .call
            .as_deref()
            .and_then(|c| b.call_info(c))
            .map(|(t, d)| (t.to_owned(), d + 1))
            .unwrap_or_default();
        let indent = "  ".repeat(depth);
        let who = match &fact.call {
            Some(c) if !tool.is_empty() => format!("{c} {tool} "),
            Some(c) => format!("{c} "),
            None => String::new(),
        };
        let (style, detail) = self.detail(fact, &tool);
        // Recorded strings are untrusted: no control character reaches the
        // terminal (an escape sequence could fake or hide lines). The kind
        // is recorded too (a kind this reel does not know keeps its name).
        let (who, detail) = (escape(&who), escape(&detail));
        let line = format!(
            "{} {} {indent}{}{} {detail}",
            self.paint(
                DIM,
                &format!("{:>10}", format!("+{}", duration(fact.offset)))
            ),
            self.paint(DIM, &format!("#{:<4}", fact.seq)),
            self.paint(CYAN, &who),
            self.paint(style, &escape(fact.kind.name())),
        );
        match self.width {
            Some(w) => width::fit(&line, w),
            None => line,
        }
    }

    /// The readable detail of a fact (what `reel show` prints after its
    /// kind), without colours or control characters. `tool` is the tool of
    /// the fact's call.
    pub fn detail_text(&self, fact: &Fact, tool: &str) -> String {
        escape(&self.detail(fact, tool).1).into_owned()
    }

    /// The summary after the facts: call tree, ledgers, anomalies.
    pub fn summary(&self, t: &Timeline) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.paint(BOLD, "calls"));
        if t.calls.is_empty() {
            out.push_str("  (none)\n");
        }
        for c in &t.calls {
            let colour = match c.status {
                Some(CallStatus::Ok) => GREEN,
                Some(CallStatus::Aborted) => YELLOW,
                Some(CallStatus::Error) | None => RED,
            };
            let status = self.paint(colour, call_status(c.status));
            let _ = write!(
                out,
                "  {}{} {}  {status}  {}  {} {}",
                "  ".repeat(c.depth),
                escape(&c.call_id),
                escape(&c.tool),
                c.duration_ns.map(duration).unwrap_or_else(|| "-".into()),
                c.facts,
                plural(c.facts, "fact")
            );
            if let Some(p) = &c.last_progress {
                let _ = write!(out, "  last progress: {}", escape(p));
            }
            out.push('\n');
        }
        if !t.credentials.is_empty() {
            let _ = writeln!(out, "{}", self.paint(BOLD, "credentials"));
            for c in &t.credentials {
                let _ = writeln!(
                    out,
                    "  #{} {} {} ({}){}",
                    c.seq,
                    escape(&c.need),
                    c.outcome,
                    mode(c.mode),
                    escape(
                        &c.fingerprint
                            .as_ref()
                            .map(|f| format!(" {f}"))
                            .or_else(|| c.reason.as_ref().map(|r| format!(": {r}")))
                            .unwrap_or_default()
                    )
                );
            }
        }
        if !t.artifacts.is_empty() {
            let _ = writeln!(out, "{}", self.paint(BOLD, "artifacts"));
            for a in &t.artifacts {
                let _ = writeln!(
                    out,
                    "  #{} {} {}{}",
                    a.seq,
                    a.op,
                    escape(a.id.as_deref().unwrap_or("-")),
                    a.size.map(|s| format!(" {s} B")).unwrap_or_default()
                );
            }
        }
        if !t.teardowns.is_empty() {
            let _ = writeln!(out, "{}", self.paint(BOLD, "teardown (registered vs ran)"));
            for d in &t.teardowns {
                let ran = match (&d.ran_seq, &d.outcome) {
                    (Some(s), Some(TeardownOutcome::Ok)) => format!("ran ok at #{s}"),
                    (Some(s), Some(TeardownOutcome::Error { message })) => {
                        format!("ran at #{s}, failed: {}", escape(message))
                    }
                    (Some(s), Some(TeardownOutcome::TimedOut)) => format!("ran at #{s}, timed out"),
                    _ => self.paint(RED, "never ran"),
                };
                let _ = writeln!(
                    out,
                    "  {} {} registered at #{}{}  {ran}",
                    d.scope,
                    escape(&d.key_hash),
                    d.registered_seq,
                    if d.repeats > 0 {
                        format!(" (+{} {})", d.repeats, plural(d.repeats, "repeat"))
                    } else {
                        String::new()
                    }
                );
            }
        }
        if t.anomalies.is_empty() {
            let _ = writeln!(out, "{} none", self.paint(BOLD, "anomalies"));
        } else {
            let _ = writeln!(
                out,
                "{}",
                self.paint(RED, &format!("anomalies ({})", t.anomalies.len()))
            );
            for a in &t.anomalies {
                let _ = writeln!(out, "  {}", escape(&a.describe()));
            }
        }
        self.wrapped(&out)
    }

    /// A whole run as text (header, facts, summary).
    pub fn run<'a>(&self, record: &RunRecord, facts: impl IntoIterator<Item = &'a Fact>) -> String {
        let mut buf = Vec::new();
        let mut w = TextWriter::start(&mut buf, self.clone(), record).expect("writing to memory");
        for f in facts {
            w.fact(f, true).expect("writing to memory");
        }
        w.finish().expect("writing to memory");
        String::from_utf8(buf).expect("the text is UTF-8")
    }
}

/// Writes a run as text as its facts stream: the header at once, one line
/// per listed fact (a gap as a line of its own), the summary at the end.
///
/// ```
/// use reel_viewer::render::sink::RunSink;
/// use reel_viewer::render::text::{Color, TextRenderer, TextWriter};
/// # use reel_core::fact::*;
/// # use reel_core::{Fact, RunRecord};
/// # let facts = vec![Fact { seq: 0, at: 0, offset: 0, call: None, kind: FactKind::RunStarted(RunStarted {
/// #     run_id: "r".into(), session_id: None, identity: None,
/// #     producer: Producer { name: "doc".into(), version: "1".into() },
/// #     labels: Default::default(), teardown_scopes: vec![] }) }];
/// let record = RunRecord::from_first(&facts[0]).unwrap();
/// let mut text = Vec::new();
/// let mut w = TextWriter::start(&mut text, TextRenderer::new(Color::Plain), &record).unwrap();
/// w.fact(&facts[0], true).unwrap();
/// w.gap(&reel_core::gap::Gap { first: 1, last: Some(2), detail: "checksum mismatch".into() }).unwrap();
/// let timeline = w.finish().unwrap();
/// // The gap; the record says the run is still running, so its missing
/// // end is not one.
/// assert_eq!(timeline.anomalies.len(), 1);
/// assert!(String::from_utf8(text).unwrap().contains("✗ facts #1 to #2 damaged"));
/// ```
pub struct TextWriter<W: Write> {
    out: W,
    text: TextRenderer,
    builder: TimelineBuilder,
    follow: bool,
}

impl<W: Write> TextWriter<W> {
    /// Writes the run's header and returns the writer; progress lines (the
    /// facts' and the summary's) are worded by `text`'s templates.
    pub fn start(mut out: W, text: TextRenderer, record: &RunRecord) -> io::Result<TextWriter<W>> {
        writeln!(out, "{}", text.header(record))?;
        out.flush()?;
        Ok(TextWriter {
            out,
            builder: TimelineBuilder::for_record(record).with_templates(text.templates.clone()),
            text,
            follow: false,
        })
    }

    /// Flushes after every listed fact (for `reel tail`, whose reader
    /// waits for facts as they land).
    pub fn following(mut self, follow: bool) -> TextWriter<W> {
        self.follow = follow;
        self
    }
}

impl<W: Write> RunSink for TextWriter<W> {
    fn fact(&mut self, fact: &Fact, listed: bool) -> io::Result<()> {
        self.builder.push(fact);
        if listed {
            writeln!(self.out, "{}", self.text.fact(fact, &self.builder))?;
            if self.follow {
                self.out.flush()?;
            }
        }
        Ok(())
    }

    fn gap(&mut self, gap: &Gap) -> io::Result<()> {
        self.builder.push_gap(gap);
        let line = format!(
            "           ✗ {} damaged: could not be read ({})",
            gap.seqs(),
            escape(&gap.detail)
        );
        writeln!(self.out, "{}", self.text.wrapped(&line))
    }

    fn finish(mut self) -> io::Result<Timeline> {
        let timeline = self.builder.finish();
        write!(self.out, "{}", self.text.summary(&timeline))?;
        self.out.flush()?;
        Ok(timeline)
    }
}

fn identity(id: &Identity) -> String {
    let part = |name: &str, v: &Option<String>| v.as_ref().map(|v| format!("{name}={v}"));
    let parts: Vec<_> = [
        part("tenant", &id.tenant),
        part("principal", &id.principal),
        part("conversation", &id.conversation),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "(empty)".into()
    } else {
        parts.join(" ")
    }
}

/// A count and its noun, singular for one: `1 run`, `0 runs`, `2 runs`
/// (nouns that take an `s`).
pub fn counted(n: u64, word: &str) -> String {
    format!("{n} {}", plural(n, word))
}

/// `word` or `words`, for a count.
fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        word.to_owned()
    } else {
        format!("{word}s")
    }
}

fn mode(m: CredentialMode) -> &'static str {
    match m {
        CredentialMode::Declared => "declared",
        CredentialMode::Pulled => "pulled",
    }
}

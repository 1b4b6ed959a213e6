//! `reel show`: one run's timeline as text, JSON or an HTML page. Each is
//! a [`RunSink`](reel_viewer::render::sink::RunSink) fed by one loop
//! ([`stream`]).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use reel_viewer::render::html::HtmlWriter;
use reel_viewer::render::json::JsonWriter;
use reel_viewer::render::terminal::escape;
use reel_viewer::render::text::{TextRenderer, TextWriter};

use crate::failure::{shown, Failure};
use crate::stream::{newest_run, resolve_run, stream, Follow, Newest, ShowFilter, Streamed};
use crate::templates::TemplateArgs;
use reel::RunRecord;
use reel_archive::live::Source;

/// `reel show`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct ShowArgs {
    /// The run to show (or use --last).
    run: Option<String>,
    /// Show the most recent run.
    #[arg(long, conflicts_with = "run")]
    last: bool,
    /// Print as JSON.
    #[arg(long, conflicts_with = "html")]
    json: bool,
    /// Write a self-contained HTML page to this file (`-`: standard output).
    #[arg(long)]
    html: Option<PathBuf>,
    /// Only facts of this call (and run-level facts).
    #[arg(long)]
    call: Option<String>,
    /// Only facts of this kind (repeatable), e.g. progress or call.ended.
    #[arg(long)]
    kind: Vec<String>,
    #[command(flatten)]
    templates: TemplateArgs,
}

/// Shows a run; exits 2 when some of its facts could not be read.
pub fn run(dir: &Path, args: ShowArgs, text: TextRenderer) -> Result<ExitCode, Failure> {
    let text = text.with_templates(args.templates.load()?);
    if args.run.is_none() && !args.last {
        return Err(Failure::usage(
            "which run? name one (`reel show RUN`; `reel runs` lists them), or show the newest with `reel show --last`",
        ));
    }
    let source = crate::source::open(dir)?;
    let run_id = match args.run {
        Some(r) => r,
        None => newest_run(&source, Newest::Any)?,
    };
    let filter = ShowFilter {
        call: args.call,
        kinds: args.kind,
    };
    let record = resolve_run(&source, &run_id)?;
    filter.check(&source, &run_id)?;
    if let Some(path) = &args.html {
        // `-` is standard output, as for `export -o -`.
        let (out, to): (Box<dyn Write>, String) = if path == Path::new("-") {
            (Box::new(io::stdout().lock()), "standard output".into())
        } else {
            let file = File::create(path)
                .map_err(|e| Failure::msg(format!("cannot write {}: {e}", path.display())))?;
            (Box::new(file), shown(path))
        };
        let page = HtmlWriter::start(BufWriter::new(out), &record)?.with_templates(text.templates);
        let streamed = stream(&source, &run_id, &filter, Follow::No, page)?;
        let t = &streamed.timeline;
        eprintln!(
            "wrote the HTML report of run {} to {to} (calls: {}, facts: {}, anomalies: {})",
            escape(&run_id),
            t.calls.len(),
            t.facts,
            t.anomalies.len()
        );
        return Ok(code(&streamed));
    }
    let out = BufWriter::new(io::stdout().lock());
    if args.json {
        let streamed = stream(
            &source,
            &run_id,
            &filter,
            Follow::No,
            JsonWriter::start(out, &record)?,
        )?;
        return Ok(code(&streamed));
    }
    let code = self::text(&source, &run_id, &filter, Follow::No, text, out)?;
    let late = late_runs(&source, &record);
    if !late.is_empty() {
        let named: Vec<String> = late.iter().map(|id| escape(id).to_string()).collect();
        let mut out = io::stdout().lock();
        writeln!(
            out,
            "late spans of its trace (they came after this run was written, which is never \
             rewritten): {}",
            named.join(", ")
        )?;
    }
    Ok(code)
}

/// The runs of the late spans of a run taken in over OpenTelemetry:
/// `reel collect` writes the spans of a trace that come after its run was
/// written as `RUN-late-1`, `RUN-late-2`, ... (labelled `reel.late_of`).
fn late_runs(source: &Source, record: &RunRecord) -> Vec<String> {
    let ingested = record.labels.get("reel.source").map(String::as_str) == Some("otlp");
    if !ingested || record.labels.contains_key("reel.late_of") {
        return Vec::new();
    }
    (1..)
        .map(|n| format!("{}-late-{n}", record.run_id))
        .take_while(|id| source.run(id).is_ok())
        .collect()
}

/// Streams a run as text to `out` (following it as facts land when
/// `follow` says). A damaged block is shown as a gap; the exit code is
/// then 2.
pub fn text(
    source: &Source,
    run_id: &str,
    filter: &ShowFilter,
    follow: Follow,
    text: TextRenderer,
    out: impl Write,
) -> Result<ExitCode, Failure> {
    let record = resolve_run(source, run_id)?;
    let sink = TextWriter::start(out, text, &record)?.following(follow == Follow::AsFactsLand);
    Ok(code(&stream(source, run_id, filter, follow, sink)?))
}

fn code(streamed: &Streamed) -> ExitCode {
    if streamed.damaged {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

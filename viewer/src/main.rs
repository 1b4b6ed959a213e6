//! `reel`: the command line for reel archives.
//!
//! Nothing recorded reaches the terminal raw: every string taken from an
//! archive, a tape, a file name or an argument is printed through
//! [`escape`] (errors too, where [`main`] prints them), and every JSON
//! document through [`JsonSafe`]. Only the colours reel paints are escape
//! sequences.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand, ValueEnum};

mod diff;
mod source;

use reel::tape::Tape;
use reel::{Fact, RunRecord, RunState};
use reel_archive::TapeExt;
use reel_archive::{Archive, ArchiveConfig, RunFilter};
use reel_recorder::{Recorder, RecorderConfig};
use reel_viewer::display::ProgressTemplates;
use reel_viewer::render::json::JsonWriter;
use reel_viewer::render::terminal::{escape, JsonSafe};
use reel_viewer::render::text::{duration, timestamp, TextRenderer};
use reel_viewer::timeline::TimelineBuilder;
use source::{Item, Source};

/// reel: a flight recorder for agent tool calls.
///
/// Reads and writes a reel archive: list runs, show a run's timeline,
/// export and import tapes, verify the archive, record the demo.
#[derive(Parser, Debug)]
#[command(name = "reel", version, propagate_version = true)]
struct Cli {
    /// The archive directory.
    #[arg(
        long,
        global = true,
        env = "REEL_ARCHIVE",
        default_value = "reel-archive"
    )]
    archive: PathBuf,
    /// When to use colours: auto (only on a terminal), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Record the demo runs into the archive and show the first one.
    ///
    /// With --live-hops N it then records a slow run (one hop every 100 ms)
    /// while serving live inspection: watch it with `reel tail` elsewhere.
    /// Example: reel demo --archive ./reel-archive --live-hops 100
    Demo {
        /// Afterwards, record a slow live run of this many hops.
        #[arg(long)]
        live_hops: Option<u32>,
        /// Pause between live hops, in milliseconds.
        #[arg(long, default_value_t = 100)]
        live_pause_ms: u64,
        #[command(flatten)]
        templates: TemplateArgs,
    },
    /// List runs, newest first.
    ///
    /// Example: reel runs --tenant acme --status failed --since 2h --limit 20
    Runs(RunsArgs),
    /// Show one run's timeline.
    ///
    /// Example: reel show demo-deploy --kind progress --kind call.ended
    Show(ShowArgs),
    /// Follow a run's facts as they land, until it ends (or Ctrl-C).
    ///
    /// Without RUN, follows the newest running run (or the newest run).
    /// Example: reel tail --archive ./reel-archive
    Tail {
        /// The run to follow.
        run: Option<String>,
        #[command(flatten)]
        templates: TemplateArgs,
    },
    /// Two runs side by side, the first difference marked.
    ///
    /// Times, durations, run ids and clock reads are not compared (nor a
    /// clock read the tool passed on, e.g. into an effect). Exits 1 when
    /// the runs differ.
    /// Example: reel diff demo-deploy demo-deploy-2
    Diff {
        /// The first run.
        run_a: String,
        /// The second run.
        run_b: String,
        /// Width of the side-by-side view.
        #[arg(long, default_value_t = 160)]
        width: usize,
    },
    /// Serve the language server for tape files (*.tape.jsonl) on stdin and
    /// stdout, for editors.
    ///
    /// Example: reel lsp   (configured as the editor's language server command)
    Lsp,
    /// Export a run as a tape (JSON Lines).
    ///
    /// Example: reel export demo-deploy -o deploy.tape.jsonl
    Export {
        /// The run to export.
        run: String,
        /// The tape file to write ("-" for standard output).
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Import a tape into the archive.
    ///
    /// Example: reel import deploy.tape.jsonl
    Import {
        /// The tape file to read.
        file: PathBuf,
    },
    /// Check every block, hash chain, seq and index of the archive.
    ///
    /// Example: reel verify --archive ./reel-archive
    Verify {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Figures about the archive: runs, facts, bytes on disk.
    ///
    /// Example: reel stats --json
    Stats {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
struct RunsArgs {
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

#[derive(Args, Debug)]
struct ShowArgs {
    /// The run to show (or use --last).
    #[arg(required_unless_present = "last")]
    run: Option<String>,
    /// Show the most recent run.
    #[arg(long, conflicts_with = "run")]
    last: bool,
    /// Print as JSON.
    #[arg(long, conflicts_with = "html")]
    json: bool,
    /// Write a self-contained HTML page to this file.
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

/// The wording of progress lines (seed 000's template keys).
#[derive(Args, Debug, Default)]
struct TemplateArgs {
    /// Word progress lines with a template (repeatable; after --templates,
    /// so it wins). KEY is tool.progress (a report with a message),
    /// tool.progress.generic (one without), or either followed by
    /// .TOOL for one tool; TEXT may use {tool}, {count} and {message}
    /// (not in generic lines), {{ and }} for braces.
    /// Example: --template 'tool.progress={tool}: {message}'
    #[arg(long = "template", value_name = "KEY=TEXT")]
    template: Vec<String>,
    /// Read templates from a JSON object of KEY to TEXT, e.g.
    /// {"tool.progress.generic": "{tool} is working ({count})"}.
    #[arg(long = "templates", value_name = "FILE")]
    templates: Option<PathBuf>,
}

impl TemplateArgs {
    /// The templates asked for: the file's, then each --template in order.
    /// Bad input is refused before anything is read or shown.
    fn load(&self) -> Result<ProgressTemplates, Failure> {
        let mut t = ProgressTemplates::default();
        if let Some(path) = &self.templates {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure(format!(
                    "--templates {}: cannot read it: {e}; give a JSON file of template key to text",
                    path.display()
                ))
            })?;
            t.set_json(&text)
                .map_err(|e| Failure(format!("--templates {}: {e}", path.display())))?;
        }
        for arg in &self.template {
            let Some((key, text)) = arg.split_once('=') else {
                return Err(Failure(format!(
                    "--template {arg:?}: expected KEY=TEXT, e.g. --template 'tool.progress={{tool}}: {{message}}'"
                )));
            };
            t.set(key, text)
                .map_err(|e| Failure(format!("--template {arg:?}: {e}")))?;
        }
        Ok(t)
    }
}

/// A failure for the person at the terminal. The message is escaped where
/// it is printed: build it from raw strings.
#[derive(Debug)]
struct Failure(String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure(e.to_string())
    }
}

fn parse_time(s: &str) -> Result<i64, String> {
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

/// A path as it may be printed.
fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let color = match cli.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let text = TextRenderer::new(color);
    let result = match cli.command {
        Command::Demo {
            live_hops,
            live_pause_ms,
            templates,
        } => templates.load().and_then(|t| {
            demo(
                &cli.archive,
                live_hops,
                live_pause_ms,
                text.with_templates(t),
            )
        }),
        Command::Runs(args) => runs(&cli.archive, args),
        Command::Show(args) => args
            .templates
            .load()
            .and_then(|t| show(&cli.archive, args, text.with_templates(t))),
        Command::Tail { run, templates } => templates
            .load()
            .and_then(|t| tail(&cli.archive, run, text.with_templates(t))),
        Command::Diff {
            run_a,
            run_b,
            width,
        } => diff_runs(&cli.archive, &run_a, &run_b, width),
        Command::Lsp => runtime().map(|rt| {
            rt.block_on(reel_viewer::lsp::serve_stdio());
            ExitCode::SUCCESS
        }),
        Command::Export { run, output } => export(&cli.archive, &run, &output),
        Command::Import { file } => import(&cli.archive, &file),
        Command::Verify { json } => verify(&cli.archive, json),
        Command::Stats { json } => stats(&cli.archive, json),
    };
    match result {
        Ok(code) => code,
        Err(Failure(message)) => {
            eprintln!("reel: {}", escape(&message));
            ExitCode::FAILURE
        }
    }
}

/// Prints clap's usage error (or help, or version) and exits with its
/// code. clap quotes arguments as given, so the command line is parsed
/// again with every argument escaped, and that error is the one printed.
fn usage_error(e: clap::Error) -> ExitCode {
    let shown = std::env::args_os().map(|a| escape(&a.to_string_lossy()).into_owned());
    match Cli::try_parse_from(shown) {
        Err(shown) => shown.exit(),
        // Not seen: escaping arguments does not mend a command line. Say it
        // anyway, all of it escaped.
        Ok(_) => {
            eprintln!("{}", escape(&e.render().to_string()));
            ExitCode::from(2)
        }
    }
}

/// Opens an archive that must already exist, for verbs that need the
/// archive itself (not a running recorder's socket).
fn open_existing(dir: &Path, verb: &str) -> Result<Archive, Failure> {
    Source::open(dir)?.local(verb)
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn demo(
    dir: &Path,
    live_hops: Option<u32>,
    pause_ms: u64,
    text: TextRenderer,
) -> Result<ExitCode, Failure> {
    let rt = runtime()?;
    let (archive, ids) = rt.block_on(async {
        let recorder = Recorder::open(dir, RecorderConfig::default()).await?;
        let ids = reel_recorder::demo::record(&recorder).await?;
        if let Some(hops) = live_hops {
            eprintln!(
                "recording a live run of {hops} hops; watch it with: reel tail --archive {}",
                shown(dir)
            );
            let id = reel_recorder::demo::record_live(&recorder, hops, pause_ms).await?;
            eprintln!("recorded live run {}", escape(&id));
        }
        let archive = recorder.archive().clone();
        recorder.shutdown().await?;
        Ok::<_, Failure>((archive, ids))
    })?;
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "recorded {} demo runs into {}: {}",
        ids.len(),
        shown(dir),
        escape(&ids.join(", "))
    )?;
    writeln!(out)?;
    show_run(
        &Source::Local(archive),
        &ids[0],
        &ShowFilter::default(),
        false,
        text,
        &mut out,
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "next: reel runs --archive {dir}   |   reel show {} --archive {dir}   |   reel show {} --html run.html --archive {dir}",
        escape(&ids[2]),
        escape(&ids[1]),
        dir = shown(dir)
    )?;
    Ok(ExitCode::SUCCESS)
}

fn runs(dir: &Path, args: RunsArgs) -> Result<ExitCode, Failure> {
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

#[derive(Default)]
struct ShowFilter {
    call: Option<String>,
    kinds: Vec<String>,
}

impl ShowFilter {
    fn keeps(&self, f: &Fact) -> bool {
        let call_ok = match (&self.call, &f.call) {
            (None, _) | (Some(_), None) => true,
            (Some(want), Some(c)) => want == c,
        };
        call_ok && (self.kinds.is_empty() || self.kinds.iter().any(|k| k == f.kind.name()))
    }
}

/// Resolves a run id, suggesting near matches for an unknown one.
fn resolve_run(source: &Source, run: &str) -> Result<RunRecord, Failure> {
    if let Some(r) = source.run(run)? {
        return Ok(r);
    }
    let mut near: Vec<(f64, String)> = source
        .run_ids()?
        .into_iter()
        .map(|id| (strsim::jaro_winkler(run, &id), id))
        .filter(|(score, _)| *score > 0.75)
        .collect();
    near.sort_by(|a, b| b.0.total_cmp(&a.0));
    let hint = if near.is_empty() {
        "list runs with `reel runs`".to_owned()
    } else {
        format!(
            "did you mean {}?",
            near.iter()
                .take(3)
                .map(|(_, id)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Err(Failure(format!(
        "no run \"{run}\" in {}: {hint}",
        source.dir().display()
    )))
}

/// The newest run, preferring one still running.
fn newest_run(source: &Source, running_first: bool) -> Result<String, Failure> {
    let newest = |status| {
        source.list_runs(&RunFilter {
            status,
            limit: Some(1),
            ..RunFilter::default()
        })
    };
    let mut page = if running_first {
        newest(Some(RunState::Running))?
    } else {
        newest(None)?
    };
    if page.runs.is_empty() && running_first {
        page = newest(None)?;
    }
    page.runs
        .into_iter()
        .next()
        .map(|r| r.run_id)
        .ok_or_else(|| {
            Failure(format!(
                "the archive {} has no runs yet",
                source.dir().display()
            ))
        })
}

fn show(dir: &Path, args: ShowArgs, text: TextRenderer) -> Result<ExitCode, Failure> {
    let source = Source::open(dir)?;
    let run_id = match args.run {
        Some(r) => r,
        None => newest_run(&source, false)?,
    };
    let filter = ShowFilter {
        call: args.call,
        kinds: args.kind,
    };
    if let Some(path) = &args.html {
        // Streams the facts into the page like show_run does: facts the
        // filters leave out still shape the waterfall but are not listed.
        let record = resolve_run(&source, &run_id)?;
        let file = File::create(path)
            .map_err(|e| Failure(format!("cannot write {}: {e}", path.display())))?;
        let mut w = reel_viewer::render::html::HtmlWriter::start(BufWriter::new(file), &record)?
            .with_templates(text.templates.clone());
        let mut damaged = false;
        for item in source.facts(&run_id, 0, false)? {
            match item? {
                Item::Fact(fact) if filter.keeps(&fact) => w.fact(&fact)?,
                Item::Fact(fact) => w.timeline_only(&fact),
                Item::Gap {
                    first,
                    last,
                    detail,
                } => {
                    damaged = true;
                    w.gap(first, last, &detail);
                }
            }
        }
        let timeline = w.finish()?;
        eprintln!(
            "wrote the HTML report of run {} to {} (calls: {}, facts: {}, anomalies: {})",
            escape(&run_id),
            shown(path),
            timeline.calls.len(),
            timeline.facts,
            timeline.anomalies.len()
        );
        return Ok(if damaged {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        });
    }
    let mut out = BufWriter::new(io::stdout().lock());
    let code = if args.json {
        show_json(&source, &run_id, &filter, &mut out)?
    } else {
        show_run(&source, &run_id, &filter, false, text, &mut out)?
    };
    out.flush()?;
    Ok(code)
}

/// Streams a run as text (following it as facts land when `follow`). A
/// damaged block is shown as a gap; the exit code is then 2.
fn show_run(
    source: &Source,
    run_id: &str,
    filter: &ShowFilter,
    follow: bool,
    text: TextRenderer,
    out: &mut impl Write,
) -> Result<ExitCode, Failure> {
    let record = resolve_run(source, run_id)?;
    writeln!(out, "{}", text.header(&record))?;
    out.flush()?;
    let mut b = TimelineBuilder::default().with_templates(text.templates.clone());
    let mut damaged = false;
    for item in source.facts(run_id, 0, follow)? {
        match item? {
            Item::Fact(fact) => {
                b.push(&fact);
                if filter.keeps(&fact) {
                    writeln!(out, "{}", text.fact(&fact, &b))?;
                    if follow {
                        out.flush()?;
                    }
                }
            }
            Item::Gap {
                first,
                last,
                detail,
            } => {
                damaged = true;
                b.push_gap(first, last, &detail);
                writeln!(
                    out,
                    "           ✗ {} damaged: could not be read ({})",
                    reel_viewer::timeline::seq_range(first, last),
                    escape(&detail)
                )?;
            }
        }
    }
    write!(out, "{}", text.summary(&b.finish()))?;
    Ok(if damaged {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

fn show_json(
    source: &Source,
    run_id: &str,
    filter: &ShowFilter,
    out: &mut impl Write,
) -> Result<ExitCode, Failure> {
    let record = resolve_run(source, run_id)?;
    let mut w = JsonWriter::start(out, &record)?;
    let mut damaged = false;
    for item in source.facts(run_id, 0, false)? {
        match item? {
            Item::Fact(fact) if filter.keeps(&fact) => w.fact(&fact)?,
            Item::Fact(_) => {}
            Item::Gap {
                first,
                last,
                detail,
            } => {
                damaged = true;
                w.gap(first, last, &detail);
            }
        }
    }
    w.finish()?;
    Ok(if damaged {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

fn tail(dir: &Path, run: Option<String>, text: TextRenderer) -> Result<ExitCode, Failure> {
    let source = Source::open(dir)?;
    let run_id = match run {
        Some(r) => r,
        None => newest_run(&source, true)?,
    };
    // Only a live recorder can add facts: a closed archive shows what it has.
    let follow = matches!(source, Source::Live { .. });
    let mut out = io::stdout().lock();
    show_run(
        &source,
        &run_id,
        &ShowFilter::default(),
        follow,
        text,
        &mut out,
    )
}

fn collect_facts(source: &Source, run_id: &str) -> Result<Vec<Fact>, Failure> {
    resolve_run(source, run_id)?;
    let mut facts = Vec::new();
    for item in source.facts(run_id, 0, false)? {
        match item? {
            Item::Fact(f) => facts.push(f),
            Item::Gap { first, last, detail } => {
                return Err(Failure(format!(
                    "run {run_id}: facts #{first}..{} are damaged ({detail}): cannot diff a run with a gap",
                    last.map(|l| format!("={l}")).unwrap_or_default()
                )))
            }
        }
    }
    Ok(facts)
}

fn diff_runs(dir: &Path, a: &str, b: &str, width: usize) -> Result<ExitCode, Failure> {
    let source = Source::open(dir)?;
    let fa = collect_facts(&source, a)?;
    let fb = collect_facts(&source, b)?;
    let (text, first) = diff::render(a, &fa, b, &fb, width.max(40));
    io::stdout().lock().write_all(text.as_bytes())?;
    Ok(if first.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn export(dir: &Path, run: &str, output: &Path) -> Result<ExitCode, Failure> {
    let source = Source::open(dir)?;
    resolve_run(&source, run)?;
    let archive = source.local("export")?;
    let tape = Tape::export(&archive, run)?;
    if output == Path::new("-") {
        tape.write(JsonSafe::new(io::stdout().lock()))?;
    } else {
        let file = File::create(output)
            .map_err(|e| Failure(format!("cannot write {}: {e}", output.display())))?;
        tape.write(BufWriter::new(file))?;
        eprintln!(
            "exported run {} ({} facts, {} artifacts) to {}",
            escape(run),
            tape.facts.len(),
            tape.artifacts.len(),
            shown(output)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn import(dir: &Path, file: &Path) -> Result<ExitCode, Failure> {
    let f =
        File::open(file).map_err(|e| Failure(format!("cannot read {}: {e}", file.display())))?;
    let (tape, lines) = Tape::read_with_lines(BufReader::new(f))
        .map_err(|e| Failure(format!("{}: {e}", file.display())))?;
    if !tape.digest_matches() {
        eprintln!(
            "reel: warning: {}: the facts differ from what was recorded (facts_sha256 does not match): the tape was edited",
            shown(file)
        );
    }
    let archive = Archive::open(dir, ArchiveConfig::default())?;
    let record = tape
        .import_with_lines(&archive, &lines)
        .map_err(|e| Failure(format!("{}: {e}", file.display())))?;
    archive.flush()?;
    println!(
        "imported {} ({} facts, {}) into {}",
        escape(&record.describe()),
        record.facts,
        record.state,
        shown(dir)
    );
    Ok(ExitCode::SUCCESS)
}

fn verify(dir: &Path, json: bool) -> Result<ExitCode, Failure> {
    let archive = open_existing(dir, "verify")?;
    let report = archive.verify()?;
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(JsonSafe::new(&mut out), &report)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "checked {} runs, {} blocks, {} facts, {} artifacts",
            report.runs, report.blocks, report.facts, report.artifacts
        )?;
        if report.is_ok() {
            writeln!(out, "ok: no problem found")?;
        } else {
            let n = report.problems.len();
            writeln!(out, "{n} {}:", if n == 1 { "problem" } else { "problems" })?;
            for p in &report.problems {
                writeln!(out, "  {}", escape(&p.to_string()))?;
            }
        }
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn stats(dir: &Path, json: bool) -> Result<ExitCode, Failure> {
    let s = Source::open(dir)?.stats()?;
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(JsonSafe::new(&mut out), &s)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "archive      {}", shown(dir))?;
    writeln!(out, "runs         {}", s.runs)?;
    writeln!(out, "facts        {}", s.facts)?;
    writeln!(out, "artifacts    {}", s.artifacts)?;
    writeln!(out, "bytes        {}", s.bytes_on_disk)?;
    if s.facts > 0 {
        writeln!(
            out,
            "bytes/fact   {:.1}",
            s.bytes_on_disk as f64 / s.facts as f64
        )?;
    }
    if let Some((id, at)) = &s.oldest {
        writeln!(out, "oldest run   {} ({})", escape(id), timestamp(*at))?;
    }
    if let Some((id, at)) = &s.newest {
        writeln!(out, "newest run   {} ({})", escape(id), timestamp(*at))?;
    }
    Ok(ExitCode::SUCCESS)
}

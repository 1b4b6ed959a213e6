//! `reel`: the command line for reel archives.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand, ValueEnum};
use reel::archive::{Archive, ArchiveConfig, ArchiveError, RunFilter};
use reel::tape::Tape;
use reel::{Fact, RunRecord, RunState};
use reel_recorder::{Recorder, RecorderConfig};
use reel_viewer::render::json::JsonWriter;
use reel_viewer::render::text::{duration, timestamp, TextRenderer};
use reel_viewer::timeline::TimelineBuilder;

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
    /// Example: reel demo --archive ./reel-archive
    Demo,
    /// List runs, newest first.
    ///
    /// Example: reel runs --tenant acme --status failed --since 2h --limit 20
    Runs(RunsArgs),
    /// Show one run's timeline.
    ///
    /// Example: reel show demo-deploy --kind progress --kind call.ended
    Show(ShowArgs),
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
}

/// A failure for the person at the terminal.
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
            "{s:?} is neither a time (2026-11-30T08:00:00Z) nor an age (2h, 30min, 3days)"
        )),
    }
}

fn nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let color = match cli.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let text = TextRenderer { color };
    let result = match cli.command {
        Command::Demo => demo(&cli.archive, text),
        Command::Runs(args) => runs(&cli.archive, args),
        Command::Show(args) => show(&cli.archive, args, text),
        Command::Export { run, output } => export(&cli.archive, &run, &output),
        Command::Import { file } => import(&cli.archive, &file),
        Command::Verify { json } => verify(&cli.archive, json),
        Command::Stats { json } => stats(&cli.archive, json),
    };
    match result {
        Ok(code) => code,
        Err(Failure(message)) => {
            eprintln!("reel: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Opens an archive that must already exist.
fn open_existing(dir: &Path) -> Result<Archive, Failure> {
    if !dir.join("db").exists() {
        return Err(Failure(format!(
            "no archive at {}: record one with `reel demo --archive {}`, or pass --archive DIR (or set REEL_ARCHIVE)",
            dir.display(),
            dir.display()
        )));
    }
    Ok(Archive::open(dir, ArchiveConfig::default())?)
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn demo(dir: &Path, text: TextRenderer) -> Result<ExitCode, Failure> {
    let rt = runtime()?;
    let (archive, ids) = rt.block_on(async {
        let recorder = Recorder::open(dir, RecorderConfig::default()).await?;
        let ids = reel_recorder::demo::record(&recorder).await?;
        let archive = recorder.archive().clone();
        recorder.shutdown().await?;
        Ok::<_, Failure>((archive, ids))
    })?;
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "recorded {} demo runs into {}: {}",
        ids.len(),
        dir.display(),
        ids.join(", ")
    )?;
    writeln!(out)?;
    show_run(&archive, &ids[0], &ShowFilter::default(), text, &mut out)?;
    writeln!(out)?;
    writeln!(
        out,
        "next: reel runs --archive {dir}   |   reel show {} --archive {dir}   |   reel show {} --html run.html --archive {dir}",
        ids[2],
        ids[1],
        dir = dir.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

fn runs(dir: &Path, args: RunsArgs) -> Result<ExitCode, Failure> {
    let archive = open_existing(dir)?;
    let page = archive.list_runs(&RunFilter {
        tenant: args.tenant,
        tool: args.tool,
        status: args.status,
        since: args.since,
        until: args.until,
        limit: Some(args.limit),
        cursor: args.cursor.map(reel::archive::Cursor),
    })?;
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &page)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 8]> = page
        .runs
        .iter()
        .map(|r| {
            [
                r.run_id.clone(),
                timestamp(r.started_at),
                r.duration_ns().map(duration).unwrap_or_else(|| "-".into()),
                r.state.to_string(),
                r.tenant().unwrap_or("-").to_owned(),
                r.tools.iter().cloned().collect::<Vec<_>>().join(","),
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
        writeln!(out, "more: --cursor {}", next.0)?;
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
fn resolve_run(archive: &Archive, run: &str) -> Result<RunRecord, Failure> {
    match archive.run(run) {
        Ok(r) => Ok(r),
        Err(ArchiveError::UnknownRun { .. }) => {
            let mut near: Vec<(f64, String)> = archive
                .run_ids()
                .filter_map(Result::ok)
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
                "no run {run:?} in {}: {hint}",
                archive.dir().display()
            )))
        }
        Err(e) => Err(e.into()),
    }
}

fn show(dir: &Path, args: ShowArgs, text: TextRenderer) -> Result<ExitCode, Failure> {
    let archive = open_existing(dir)?;
    let run_id = match (args.run, args.last) {
        (Some(r), _) => r,
        (None, _) => archive
            .list_runs(&RunFilter {
                limit: Some(1),
                ..RunFilter::default()
            })?
            .runs
            .into_iter()
            .next()
            .map(|r| r.run_id)
            .ok_or_else(|| Failure(format!("the archive {} has no runs yet", dir.display())))?,
    };
    let filter = ShowFilter {
        call: args.call,
        kinds: args.kind,
    };
    if let Some(path) = &args.html {
        return Err(Failure(format!(
            "--html {}: the HTML report is not part of this build yet",
            path.display()
        )));
    }
    let mut out = BufWriter::new(io::stdout().lock());
    let code = if args.json {
        show_json(&archive, &run_id, &filter, &mut out)?
    } else {
        show_run(&archive, &run_id, &filter, text, &mut out)?
    };
    out.flush()?;
    Ok(code)
}

/// Streams a run as text. A damaged block is shown as a gap; the exit code
/// is then non-zero.
fn show_run(
    archive: &Archive,
    run_id: &str,
    filter: &ShowFilter,
    text: TextRenderer,
    out: &mut impl Write,
) -> Result<ExitCode, Failure> {
    let record = resolve_run(archive, run_id)?;
    writeln!(out, "{}", text.header(&record))?;
    let mut b = TimelineBuilder::default();
    let mut damaged = false;
    for item in archive.facts(run_id, ..)? {
        match item {
            Ok(fact) => {
                b.push(&fact);
                if filter.keeps(&fact) {
                    writeln!(out, "{}", text.fact(&fact, &b))?;
                }
            }
            Err(ArchiveError::Corrupt {
                first_seq,
                last_seq,
                detail,
                ..
            }) => {
                damaged = true;
                b.push_gap(first_seq, last_seq, &detail);
                writeln!(
                    out,
                    "           ✗ facts #{first_seq}..{} are damaged and could not be read: {detail}",
                    last_seq.map(|l| format!("={l}")).unwrap_or_default()
                )?;
            }
            Err(e) => return Err(e.into()),
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
    archive: &Archive,
    run_id: &str,
    filter: &ShowFilter,
    out: &mut impl Write,
) -> Result<ExitCode, Failure> {
    let record = resolve_run(archive, run_id)?;
    let mut w = JsonWriter::start(out, &record)?;
    let mut damaged = false;
    for item in archive.facts(run_id, ..)? {
        match item {
            Ok(fact) if filter.keeps(&fact) => w.fact(&fact)?,
            Ok(_) => {}
            Err(ArchiveError::Corrupt {
                first_seq,
                last_seq,
                detail,
                ..
            }) => {
                damaged = true;
                w.gap(first_seq, last_seq, &detail);
            }
            Err(e) => return Err(e.into()),
        }
    }
    w.finish()?;
    Ok(if damaged {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

fn export(dir: &Path, run: &str, output: &Path) -> Result<ExitCode, Failure> {
    let archive = open_existing(dir)?;
    resolve_run(&archive, run)?;
    let tape = Tape::export(&archive, run)?;
    if output == Path::new("-") {
        tape.write(io::stdout().lock())?;
    } else {
        let file = File::create(output)
            .map_err(|e| Failure(format!("cannot write {}: {e}", output.display())))?;
        tape.write(BufWriter::new(file))?;
        eprintln!(
            "exported run {run} ({} facts, {} artifacts) to {}",
            tape.facts.len(),
            tape.artifacts.len(),
            output.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn import(dir: &Path, file: &Path) -> Result<ExitCode, Failure> {
    let f =
        File::open(file).map_err(|e| Failure(format!("cannot read {}: {e}", file.display())))?;
    let tape =
        Tape::read(BufReader::new(f)).map_err(|e| Failure(format!("{}: {e}", file.display())))?;
    if !tape.digest_matches() {
        eprintln!(
            "reel: warning: {}: the facts differ from what was recorded (facts_sha256 does not match): the tape was edited",
            file.display()
        );
    }
    let archive = Archive::open(dir, ArchiveConfig::default())?;
    let record = tape
        .import(&archive)
        .map_err(|e| Failure(format!("{}: {e}", file.display())))?;
    archive.flush()?;
    println!(
        "imported run {} ({} facts, {}) into {}",
        record.run_id,
        record.facts,
        record.state,
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn verify(dir: &Path, json: bool) -> Result<ExitCode, Failure> {
    let archive = open_existing(dir)?;
    let report = archive.verify()?;
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
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
            writeln!(out, "{} problems:", report.problems.len())?;
            for p in &report.problems {
                writeln!(out, "  {p}")?;
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
    let archive = open_existing(dir)?;
    let s = archive.stats()?;
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &s)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "archive      {}", dir.display())?;
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
        writeln!(out, "oldest run   {id} ({})", timestamp(*at))?;
    }
    if let Some((id, at)) = &s.newest {
        writeln!(out, "newest run   {id} ({})", timestamp(*at))?;
    }
    Ok(ExitCode::SUCCESS)
}

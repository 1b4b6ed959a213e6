//! `reel`: the command line for reel archives.
//!
//! Nothing recorded reaches the terminal raw: every string taken from an
//! archive, a tape, a file name or an argument is printed through
//! [`escape`] (errors too, where [`main`] prints them), and every JSON
//! document through `JsonSafe`. Only the colours reel paints are escape
//! sequences.
//!
//! The package is the top of the house: the only one that reaches the
//! archive (`reel-archive`, directly or through a running recorder's
//! socket: `source.rs`), the recorder (`reel demo`), the replayer's matcher
//! (`reel diff`) and the viewer together. One module per verb (`cmd/`);
//! every verb that shows a run drives one loop (`stream.rs`) into one of
//! the viewer's `RunSink`s (text, JSON, HTML).

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use reel_viewer::render::terminal::escape;
use reel_viewer::render::text::{Color, TextRenderer};

mod cmd;
mod failure;
mod source;
mod stream;
mod templates;

use failure::{exit, Failure};

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
    Demo(cmd::demo::DemoArgs),
    /// List runs, newest first.
    ///
    /// Example: reel runs --tenant acme --status failed --since 2h --limit 20
    Runs(cmd::runs::RunsArgs),
    /// Show one run's timeline.
    ///
    /// Example: reel show demo-deploy --kind progress --kind call.ended
    Show(cmd::show::ShowArgs),
    /// Follow a run's facts as they land, until it ends (or Ctrl-C).
    ///
    /// Without RUN, follows the newest running run (or the newest run).
    /// Example: reel tail --archive ./reel-archive
    Tail(cmd::tail::TailArgs),
    /// Two runs side by side, the first difference marked.
    ///
    /// Times, durations, run ids and clock reads are not compared (nor a
    /// clock read the tool passed on, e.g. into an effect). Exits 1 when
    /// the runs differ.
    /// Example: reel diff demo-deploy demo-deploy-2
    Diff(cmd::diff::DiffArgs),
    /// Serve the language server for tape files (*.tape.jsonl) on stdin and
    /// stdout, for editors.
    ///
    /// Example: reel lsp   (configured as the editor's language server command)
    Lsp,
    /// Export a run as a tape (JSON Lines).
    ///
    /// Example: reel export demo-deploy -o deploy.tape.jsonl
    Export(cmd::export::ExportArgs),
    /// Import a tape into the archive.
    ///
    /// Example: reel import deploy.tape.jsonl
    Import(cmd::import::ImportArgs),
    /// Check every block, hash chain, seq and index of the archive.
    ///
    /// With --nats URLS, also check the archive (a projection made by
    /// `reel sync`) against the cluster's stream.
    /// Example: reel verify --archive ./reel-archive
    Verify(cmd::verify::VerifyArgs),
    /// Recover every intact block and artifact of a damaged archive into a
    /// fresh one, even when the store no longer opens.
    ///
    /// Reports what was recovered and what was lost; exits 2 when something
    /// was lost, 0 when nothing was.
    /// Example: reel salvage ./reel-archive --into ./reel-archive-salvaged
    Salvage(cmd::salvage::SalvageArgs),
    /// Delete old runs, with their blocks, records, index entries and the
    /// artifacts no remaining run refers to.
    ///
    /// Example: reel prune --older-than 30d --tenant acme --dry-run
    Prune(cmd::prune::PruneArgs),
    /// Project a NATS JetStream cluster's runs into the archive
    /// (incremental: a later sync resumes where this one stopped; each
    /// run's hash chain is checked as it lands).
    ///
    /// Example: reel sync --nats nats://10.0.0.1:4222,nats://10.0.0.2:4222 --archive ./fleet
    Sync(cmd::sync::SyncArgs),
    /// The operator's console in the browser: runs, a run's waterfall and
    /// facts, tapes to download; read-only, live as runs are written.
    ///
    /// Loopback only unless --token-file is given.
    /// Example: reel serve --archive ./reel-archive --listen 127.0.0.1:7777
    Serve(cmd::serve::ServeArgs),
    /// Take any agent framework's runs in over OpenTelemetry: an OTLP
    /// receiver (HTTP, protobuf or JSON on /v1/traces, and gRPC) that writes each trace's
    /// GenAI spans as a run (tool calls, model calls), redacted.
    ///
    /// Loopback only unless --token-file is given.
    /// Example: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 with reel collect --archive ./reel-archive
    Collect(cmd::collect::CollectArgs),
    /// Figures about the archive: runs, facts, bytes on disk.
    ///
    /// Example: reel stats --json
    Stats(cmd::stats::StatsArgs),
    /// MCP sessions: record one through a proxy in front of any server,
    /// serve a recorded one back, or verify a live server against one.
    ///
    /// Example: reel mcp record --archive ./reel-archive -- python3 server.py
    #[command(subcommand)]
    Mcp(cmd::mcp::McpCommand),
}

/// Prints the libraries' `tracing` warnings on standard error in reel's
/// voice ([`Voice`]); `REEL_LOG` (an `EnvFilter`, e.g. `debug`) says more.
/// mimalloc: the recorder's writer thread frees what tools allocated on
/// theirs, which glibc's malloc serves from its slow path (the
/// book's Performance page: the allocator's figures).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("REEL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .event_format(Voice)
        .try_init();
}

/// What the libraries' `tracing` events say, in reel's own voice on
/// standard error: `reel: MESSAGE` for a warning, `reel: error: ...`,
/// `reel: debug: ...`; escaped, since a message may quote what a peer sent
/// (a server's line, a client's header).
struct Voice;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Voice
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        if is_answered_error(event) {
            // rmcp's note of an error it answered a request with, as a
            // raw `ErrorData { .. }`: the peer got the error's message,
            // and reel says what it means where it matters (a mock miss).
            return Ok(());
        }
        let mut said = String::new();
        ctx.field_format().format_fields(
            tracing_subscriber::fmt::format::Writer::new(&mut said),
            event,
        )?;
        let level = *event.metadata().level();
        let prefix = if level == tracing::Level::WARN {
            String::new()
        } else {
            format!("{}: ", level.as_str().to_ascii_lowercase())
        };
        writeln!(writer, "reel: {prefix}{}", escape(&said))
    }
}

/// True for rmcp's `response error` event: an error a server answered a
/// request with, already sent to the peer.
fn is_answered_error(event: &tracing::Event<'_>) -> bool {
    struct Message(bool);
    impl tracing::field::Visit for Message {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.0 = format!("{value:?}") == "response error";
            }
        }
    }
    if !event.metadata().target().starts_with("rmcp") {
        return false;
    }
    let mut message = Message(false);
    event.record(&mut message);
    message.0
}

fn main() -> ExitCode {
    init_logging();
    // `REEL_ARCHIVE=` (empty) is unset, not an empty `--archive` value.
    // Nothing else runs yet: no other thread reads the environment.
    if std::env::var_os("REEL_ARCHIVE").is_some_and(|v| v.is_empty()) {
        std::env::remove_var("REEL_ARCHIVE");
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let color = match cli.color {
        ColorChoice::Always => Color::Ansi,
        ColorChoice::Never => Color::Plain,
        ColorChoice::Auto => {
            if io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
                Color::Ansi
            } else {
                Color::Plain
            }
        }
    };
    let width = terminal_width();
    let text = TextRenderer::new(color).with_width(width);
    let dir = &cli.archive;
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(dir, args, text),
        Command::Runs(args) => read(|| cmd::runs::run(dir, args.clone(), text.clone())),
        Command::Show(args) => read(|| cmd::show::run(dir, args.clone(), text.clone())),
        Command::Tail(args) => cmd::tail::run(dir, args, text),
        Command::Diff(args) => read(|| cmd::diff::run(dir, args.clone(), text.clone())),
        Command::Lsp => cmd::lsp::run(),
        Command::Export(args) => read(|| cmd::export::run(dir, args.clone())),
        Command::Import(args) => cmd::import::run(dir, args),
        Command::Verify(args) => cmd::verify::run(dir, args, text),
        Command::Stats(args) => read(|| cmd::stats::run(dir, args.clone(), text.clone())),
        Command::Serve(args) => cmd::serve::run(dir, args),
        Command::Collect(args) => cmd::collect::run(dir, args),
        Command::Salvage(args) => cmd::salvage::run(args),
        Command::Prune(args) => cmd::prune::run(dir, args),
        Command::Sync(args) => cmd::sync::run(dir, args),
        Command::Mcp(command) => cmd::mcp::run(dir, command),
    };
    match result {
        Ok(code) => code,
        // The reader of standard output stopped (`reel runs | head -1`):
        // what it did not read is not a failure.
        Err(Failure {
            closed_output: true,
            ..
        }) => ExitCode::SUCCESS,
        Err(Failure { message, code, .. }) => {
            eprintln!("reel: {}", escape(&message));
            ExitCode::from(code)
        }
    }
}

/// Runs a read verb, and once more when the recorder it read through
/// stopped before it was asked ([`Failure::read_again`]): the second time
/// the archive is read directly. A verb that streams as it reads (`tail`)
/// is not run again.
fn read(verb: impl Fn() -> Result<ExitCode, Failure>) -> Result<ExitCode, Failure> {
    match verb() {
        Err(Failure {
            read_again: true, ..
        }) => verb(),
        done => done,
    }
}

/// The width `runs`, `show` and `diff` size their lines to: `COLUMNS`
/// when it is a number, else the terminal's when standard output is one;
/// `None` (whole lines) into a pipe or a file. Never under 40.
fn terminal_width() -> Option<usize> {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0);
    let width = columns.or_else(|| {
        io::stdout()
            .is_terminal()
            .then(|| console::Term::stdout().size_checked())
            .flatten()
            .map(|(_rows, cols)| usize::from(cols))
    })?;
    Some(width.max(40))
}

/// Prints clap's usage error (or help, or version) and exits: 0 for help
/// and version, [`exit::USAGE`] for a usage error (clap's own code, 2, is
/// the one the book's exit codes give damage). clap quotes arguments as given, so the
/// command line is parsed again with every argument escaped, and that error
/// is the one printed.
fn usage_error(e: clap::Error) -> ExitCode {
    let shown = std::env::args_os().map(|a| escape(&a.to_string_lossy()).into_owned());
    let e = match Cli::try_parse_from(shown) {
        Err(shown) => shown,
        // Not seen: escaping arguments does not mend a command line. Say it
        // anyway, all of it escaped.
        Ok(_) => {
            eprintln!("{}", escape(&e.render().to_string()));
            return ExitCode::from(exit::USAGE);
        }
    };
    // Help and version go to standard output; a closed one is not an error.
    let _ = e.print();
    if e.use_stderr() {
        ExitCode::from(exit::USAGE)
    } else {
        ExitCode::SUCCESS
    }
}

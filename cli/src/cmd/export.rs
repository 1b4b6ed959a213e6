//! `reel export`: one run as a tape (JSON Lines), or runs as OpenTelemetry
//! spans to an OTLP collector (`--otlp`).

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use reel::tripwire::Tripwire;
use reel::RunState;
use reel_archive::RunFilter;
use reel_otlp::{Options, Protocol};
use reel_viewer::render::terminal::{escape, JsonSafe};

use crate::cmd::runs::parse_time;
use crate::failure::{shown, Failure};
use crate::stream::resolve_run;
use reel_archive::live::Source;
use reel_viewer::render::text::counted;

/// `reel export`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct ExportArgs {
    /// The run to export as a tape; with `--otlp`, the runs (or keys of
    /// calls outside any run) to export, else every run the filters match.
    runs: Vec<String>,
    /// The tape file to write ("-" for standard output).
    #[arg(short, long, conflicts_with = "otlp")]
    output: Option<PathBuf>,
    /// Send the runs as OpenTelemetry GenAI spans to this OTLP endpoint
    /// (protobuf over HTTP to ENDPOINT/v1/traces; gRPC with --grpc), e.g.
    /// http://localhost:4318, or https:// (TLS). Headers (a backend's API
    /// key) come from $OTEL_EXPORTER_OTLP_TRACES_HEADERS or
    /// $OTEL_EXPORTER_OTLP_HEADERS (key=value,key2=value2).
    #[arg(long, value_name = "ENDPOINT")]
    otlp: Option<String>,
    /// With --otlp: a CA certificate file (PEM) trusted beside the
    /// system's roots (a collector with a private CA). Default:
    /// $OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE or
    /// $OTEL_EXPORTER_OTLP_CERTIFICATE.
    #[arg(long, value_name = "FILE", requires = "otlp")]
    otlp_ca: Option<PathBuf>,
    /// With --otlp: only runs started at or after this time (RFC 3339 or an age: 2h).
    #[arg(long, value_parser = parse_time, requires = "otlp")]
    since: Option<i64>,
    /// With --otlp: only runs of this tenant.
    #[arg(long, requires = "otlp")]
    tenant: Option<String>,
    /// With --otlp: only runs in this state.
    #[arg(long, requires = "otlp")]
    status: Option<RunState>,
    /// With --otlp: export content too (arguments, results, payloads; as
    /// recorded, redacted). Off by default.
    #[arg(long, requires = "otlp")]
    content: bool,
    /// With --otlp: OTLP/gRPC instead of protobuf over HTTP.
    #[arg(long, requires = "otlp")]
    grpc: bool,
    /// An environment variable whose value is secret (repeatable): the
    /// tape or the spans are searched for it, raw and encoded (JSON,
    /// Debug, percent, base64), and each hit is scrubbed and named by a
    /// `redaction.tripped` fact (a span event with --otlp).
    #[arg(long = "secret-env", value_name = "NAME")]
    secret_env: Vec<String>,
}

/// The tripwire over the values of the `--secret-env` variables.
fn tripwire(names: &[String]) -> Tripwire {
    let mut wire = Tripwire::new();
    for name in names {
        match std::env::var(name) {
            Ok(value) if value.len() < reel::tripwire::MIN_LEN => eprintln!(
                "reel: --secret-env {}: the value is shorter than {} bytes: not searched for",
                escape(name),
                reel::tripwire::MIN_LEN
            ),
            Ok(value) => wire.add(&value),
            Err(_) => eprintln!(
                "reel: --secret-env {}: the variable is not set (nothing to scrub)",
                escape(name)
            ),
        }
    }
    wire
}

/// Writes the tape, or sends the spans (either needs the archive itself,
/// not a live socket).
pub fn run(dir: &Path, args: ExportArgs) -> Result<ExitCode, Failure> {
    if let Some(endpoint) = args.otlp.clone() {
        return otlp(dir, &endpoint, args);
    }
    let [run] = &args.runs[..] else {
        return Err(Failure::usage(
            "name one run to export as a tape (several runs go to an OTLP collector: --otlp ENDPOINT)",
        ));
    };
    let Some(output) = &args.output else {
        return Err(Failure::usage(
            "say where the tape goes (-o FILE, or -o - for standard output), or send spans with --otlp ENDPOINT",
        ));
    };
    let source = crate::source::open(dir)?;
    let record = resolve_run(&source, run)?;
    if matches!(source, Source::Live { .. }) && record.state == RunState::Running {
        eprintln!(
            "reel: run {} is still being recorded: the tape holds its facts so far (imported, it reads as incomplete)",
            escape(run)
        );
    }
    // Through a recorder's socket too (artifacts from their files).
    let mut tape = crate::source::tape(&source, run)?;
    let tripped = tripwire(&args.secret_env).guard_tape(&mut tape, "tape", "declared-at-export");
    if tripped > 0 {
        eprintln!(
            "reel: a --secret-env value was in the run: scrubbed from the tape ({tripped} redaction.tripped facts)"
        );
    }
    if output == Path::new("-") {
        tape.write(JsonSafe::new(io::stdout().lock()))?;
    } else {
        let file = File::create(output)
            .map_err(|e| Failure::msg(format!("cannot write {}: {e}", output.display())))?;
        tape.write(BufWriter::new(file))?;
        eprintln!(
            "exported run {} ({}, {}) to {}",
            escape(run),
            counted(tape.facts.len() as u64, "fact"),
            counted(tape.artifacts.len() as u64, "artifact"),
            shown(output)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// How many runs one OTLP request carries.
const RUNS_PER_REQUEST: usize = 64;

/// The first of the OpenTelemetry variables `names` that is set.
fn otel_env(names: &[&str]) -> Option<(String, String)> {
    names
        .iter()
        .find_map(|n| std::env::var(n).ok().map(|v| (n.to_string(), v)))
}

/// The collector `--otlp` names, with the headers and CA of the
/// OpenTelemetry variables (or `--otlp-ca`). Header values join the
/// tripwire: a value that was recorded somewhere is scrubbed from the
/// spans too.
fn collector(
    endpoint: &str,
    protocol: Protocol,
    ca: Option<&Path>,
    wire: &mut Tripwire,
) -> Result<reel_otlp::Collector, Failure> {
    let bad = |e: reel_otlp::ExportError| Failure::msg(e.to_string());
    let mut collector = reel_otlp::Collector::new(endpoint, protocol).map_err(bad)?;
    if let Some((name, list)) = otel_env(&[
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ]) {
        collector = collector
            .headers_list(&list)
            .map_err(|e| Failure::msg(format!("${name}: {e}")))?;
        for value in collector.header_values() {
            if value.len() >= reel::tripwire::MIN_LEN {
                wire.add(value);
            }
        }
    }
    let ca = match ca {
        Some(path) => Some((format!("--otlp-ca {}", shown(path)), path.to_owned())),
        None => otel_env(&[
            "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
        ])
        .map(|(name, path)| (format!("${name} ({})", escape(&path)), PathBuf::from(path))),
    };
    if let Some((what, path)) = ca {
        let pem = std::fs::read(&path).map_err(|e| {
            Failure::msg(format!("{what}: cannot read the CA certificate file: {e}"))
        })?;
        collector = collector.ca_pem(&pem, &what).map_err(bad)?;
    }
    Ok(collector)
}

/// `reel export --otlp`: the named runs, or every run the filters match
/// (oldest first), [`RUNS_PER_REQUEST`] runs a request.
fn otlp(dir: &Path, endpoint: &str, args: ExportArgs) -> Result<ExitCode, Failure> {
    let protocol = if args.grpc {
        Protocol::Grpc
    } else {
        Protocol::Http
    };
    let mut wire = tripwire(&args.secret_env);
    let collector = collector(endpoint, protocol, args.otlp_ca.as_deref(), &mut wire)?;
    let source = crate::source::open(dir)?;
    let mut ids = Vec::new();
    if args.runs.is_empty() {
        let mut filter = RunFilter {
            tenant: args.tenant.clone(),
            status: args.status,
            since: args.since,
            limit: Some(1000),
            ..RunFilter::default()
        };
        loop {
            let page = source.list_runs(&filter)?;
            ids.extend(page.runs.into_iter().map(|r| r.run_id));
            match page.next {
                Some(next) => filter.cursor = Some(next),
                None => break,
            }
        }
        ids.reverse();
    } else {
        for run in &args.runs {
            let record = resolve_run(&source, run)?;
            let keep = args
                .tenant
                .as_deref()
                .is_none_or(|t| record.tenant() == Some(t))
                && args.status.is_none_or(|s| record.state == s)
                && args.since.is_none_or(|t| record.started_at >= t);
            if keep {
                ids.push(record.run_id);
            }
        }
    }
    if ids.is_empty() {
        eprintln!("no runs match: nothing sent to {}", escape(endpoint));
        return Ok(ExitCode::SUCCESS);
    }
    let archive = crate::source::local(source, "export --otlp")?;
    let options = Options {
        content: args.content,
    };
    // One request per batch of runs, so a large export stays under
    // collectors' message limits (gRPC's default is 4 MiB).
    let mut spans = 0;
    for (i, batch) in ids.chunks(RUNS_PER_REQUEST).enumerate() {
        let mut request = reel_otlp::archive_request(&archive, batch, &options)?;
        let tripped = reel_otlp::guard_request(&mut request, &wire, "declared-at-export");
        if tripped > 0 {
            eprintln!(
                "reel: a --secret-env value was in the spans: scrubbed ({tripped} fields, each named by a redaction.tripped event)"
            );
        }
        let n: usize = request
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        collector.send(&request).map_err(|e| {
            if i == 0 {
                Failure::msg(e.to_string())
            } else {
                Failure::msg(format!(
                    "{e} (the first {} runs, {spans} spans, were sent; exporting again sends the same ids)",
                    i * RUNS_PER_REQUEST
                ))
            }
        })?;
        spans += n;
    }
    eprintln!(
        "exported {} ({}) to {}",
        counted(ids.len() as u64, "run"),
        counted(spans as u64, "span"),
        escape(endpoint)
    );
    Ok(ExitCode::SUCCESS)
}

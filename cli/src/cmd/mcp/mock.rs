//! `reel mcp mock TAPE|RUN`: a recorded MCP session served back as an MCP
//! server, on stdio or, with `--listen ADDR`, over streamable HTTP (see
//! `reel_mcp::cassette`).

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_mcp::cassette::{Cassette, Session};
use reel_viewer::render::terminal::escape;

use crate::failure::Failure;

/// `reel mcp mock`'s arguments.
#[derive(Args, Debug)]
pub struct MockArgs {
    /// A tape file, or the id of a run in the archive.
    session: String,
    /// A field not compared when matching, as a JSON pointer into a fact's
    /// data, optionally `KIND:` first (arguments are `/args/...` of
    /// `call.started`). Repeatable.
    #[arg(long = "ignore", value_name = "POINTER")]
    ignore: Vec<String>,
    /// Serve over MCP streamable HTTP at this address instead of stdio
    /// (e.g. 127.0.0.1:8766; port 0 picks one): the endpoint is
    /// http://ADDR/mcp.
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// With `--listen`: a host name (or address) clients may name in
    /// `Host` and `Origin`, besides localhost, 127.0.0.1 and [::1], on any
    /// port (repeatable); any other is refused (403).
    #[arg(long = "allow-host", value_name = "NAME", requires = "listen")]
    allow_host: Vec<String>,
    /// With `--listen`: a file of the mock's own tokens, one per line, each
    /// at least 16 characters; every request must then send one as
    /// `Reel-Token: TOKEN`. Required to listen off loopback.
    #[arg(long = "token-file", value_name = "FILE", requires = "listen")]
    token_file: Option<std::path::PathBuf>,
    /// With `--listen`: the largest request body (bytes) read; over it,
    /// 413.
    #[arg(long, value_name = "BYTES", default_value_t = reel_mcp::proxy::DEFAULT_MAX_BODY)]
    max_body: usize,
    /// When the mock stops, write what it did to this file: the tools the
    /// record offers, those covered and uncovered, the calls served,
    /// missed and refused (on stdio the client hides standard error).
    /// Written whether or not a call missed.
    #[arg(long, value_name = "FILE")]
    report: Option<std::path::PathBuf>,
    /// With `--report`: write it as JSON.
    #[arg(long, requires = "report")]
    json: bool,
}

/// Serves the session until the client closes standard input, or with
/// `--listen` until interrupted (Ctrl-C, SIGTERM).
pub fn run(dir: &Path, args: MockArgs) -> Result<ExitCode, Failure> {
    let ignore = match super::ignore_rules(&args.ignore) {
        Ok(rules) => rules,
        Err(e) => return Ok(super::bad_input(&e)),
    };
    let session = match Session::load(&args.session, dir) {
        Ok(s) => s,
        Err(e) => return Ok(super::bad_input(&e.to_string())),
    };
    say_redacted(&session);
    let cassette = Cassette::new(session, &ignore);
    let kept = cassette.clone();
    let code = match args.listen {
        Some(listen) => run_http(cassette, listen, &args)?,
        None => {
            super::super::runtime()?.block_on(cassette.serve_stdio())?;
            ExitCode::SUCCESS
        }
    };
    if let Some(file) = &args.report {
        let report = kept.report();
        let text = if args.json {
            serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
        } else {
            report.text()
        };
        std::fs::write(file, text).map_err(|e| {
            Failure::msg(format!(
                "--report {}: cannot write it: {e}",
                crate::failure::shown(file)
            ))
        })?;
    }
    // Misses are loud: each was a JSON-RPC error to the client, and the
    // mock's exit says a client asked for what the record does not hold.
    let report = kept.report();
    let missed = report.missed();
    if missed > 0 && code == ExitCode::SUCCESS {
        let what = match (report.calls_missed, report.reads_missed) {
            (calls, 0) => format!("{calls} tools/call{}", if calls == 1 { "" } else { "s" }),
            (0, reads) => format!("{reads} resources/read or prompts/get"),
            (calls, reads) => {
                format!("{calls} tools/call and {reads} resources/read or prompts/get")
            }
        };
        eprintln!(
            "reel: mock: {what} matched no recorded call (each answered with a JSON-RPC \
             error): exit code {MISSED}"
        );
        return Ok(ExitCode::from(MISSED));
    }
    Ok(code)
}

/// The exit code of a mock that answered a `tools/call` with a miss: 1,
/// a difference found, as `mcp verify`'s divergence.
const MISSED: u8 = crate::failure::exit::FAILURE;

/// Tells the operator which recorded calls hold redacted values: they are
/// served redacted, and a client sending the real argument misses them.
fn say_redacted(session: &Session) {
    let redacted = session.redacted_calls();
    if redacted.is_empty() {
        return;
    }
    let mut named: Vec<String> = redacted
        .iter()
        .take(5)
        .map(|c| format!("{} `{}`", c.call_id, c.tool))
        .collect();
    if redacted.len() > 5 {
        named.push(format!("and {} more", redacted.len() - 5));
    }
    eprintln!(
        "reel: mock: {} recorded call{} hold{} redacted values ({}), served as recorded, redacted: {}; \
         a client sending the real argument misses it (--ignore call.started:/args/FIELD matches any)",
        redacted.len(),
        if redacted.len() == 1 { "" } else { "s" },
        if redacted.len() == 1 { "s" } else { "" },
        reel::marker::MARKER,
        escape(&named.join(", "))
    );
}

/// `--listen ADDR`: serves over streamable HTTP until interrupted.
fn run_http(
    cassette: Cassette,
    listen: std::net::SocketAddr,
    args: &MockArgs,
) -> Result<ExitCode, Failure> {
    let sessionless = cassette.session().sessionless();
    let mut mock = cassette.http().max_body(args.max_body);
    for name in &args.allow_host {
        mock = match mock.allow_host(name) {
            Ok(m) => m,
            Err(e) => return Ok(super::bad_input(&e)),
        };
    }
    if let Some(file) = &args.token_file {
        match super::record::listener_tokens(file) {
            Ok(tokens) => {
                for token in tokens {
                    mock = mock.token(token);
                }
            }
            Err(e) => return Ok(super::bad_input(&e)),
        }
    }
    if let Err(e) = mock.check_listen(listen) {
        return Ok(super::bad_input(&e));
    }
    let rt = super::super::runtime()?;
    rt.block_on(async {
        let bound = mock
            .bind(listen)
            .await
            .map_err(|e| Failure::msg(format!("cannot listen at {listen}: {e}")))?;
        let stop = super::record::interrupted();
        eprintln!(
            "reel: serving the recorded MCP session {} at {} ({}Ctrl-C or SIGTERM stops)",
            escape(&args.session),
            bound.url(),
            if sessionless {
                "sessionless, as recorded on 2026-07-28; "
            } else {
                ""
            }
        );
        bound
            .run(stop)
            .await
            .map_err(|e| Failure::msg(format!("the MCP mock failed: {e}")))
    })?;
    rt.shutdown_background();
    Ok(ExitCode::SUCCESS)
}

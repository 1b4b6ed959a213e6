//! `reel-bench`: runs the performance budget's rows and prints one summary
//! table.
//!
//! ```text
//! cargo run --release -p reel-bench                 # the full suite
//! cargo run --release -p reel-bench -- --smoke      # tiny sizes
//! cargo run --release -p reel-bench -- --row record # one row (repeatable), e.g. to profile
//! ```
//!
//! The MCP rows spawn this binary as their MCP servers (`--mcp-server
//! plain|reel [--archive DIR]`) and, when no `reel` binary is found, as
//! the recording proxy (`--mcp-record ARCHIVE -- CMD...`), and the
//! `mcp-http` row as its streamable HTTP server (`--mcp-http-server`), and
//! the `open-after-crash` row as the writer it kills (`--crash-writer DIR
//! RUNS PROGRESS`); those modes are not for people.

use std::path::PathBuf;
use std::process::ExitCode;

use reel_bench::{mcp, run, summary_table, Options, Sizes, ROWS};

/// The allocator the `reel` binary ships with (cli/src/main.rs), so the
/// rows measure what it runs; `--features system-alloc` builds with glibc's.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: reel-bench [--smoke] [--row NAME]... [--rounds N] [--dir DIR] [--keep]
  --smoke      tiny sizes (seconds; what the smoke test runs)
  --row NAME   run only this row (repeatable): record, record-fair, record-limit, tripwire, agent,
               latency, progress, tracing, timeline, bytes, list, open, open-after-crash,
               runs-after-crash, overview, replay, nats, memory, viewer, console,
               mcp-record, mcp-serve, mcp-http, collect
  --nats URLS  the JetStream cluster of the nats row (comma-separated client URLs; without it the row is not run)
  --reel PATH  the `reel` binary whose `reel mcp record` the mcp-record row measures (default: $REEL_BIN,
               else `reel` beside this binary: `cargo build --release -p reel-cli`; else the same library
               entry point inside reel-bench)
  --rounds N   rounds per row (default 9; at least 5 for figures worth quoting)
  --dir DIR    where the temporary archives and files go (default: the system's temp dir)
  --keep       keep those archives and files (their paths are printed)";

/// The `reel` binary: `--reel`, else `$REEL_BIN`, else `reel` beside this
/// executable (cargo puts both in target/release).
fn find_reel(given: Option<PathBuf>) -> Option<PathBuf> {
    if let Some(p) = given.or_else(|| std::env::var_os("REEL_BIN").map(PathBuf::from)) {
        return Some(p);
    }
    let me = std::env::current_exe().ok()?;
    let reel = me.with_file_name(format!("reel{}", std::env::consts::EXE_SUFFIX));
    reel.is_file().then_some(reel)
}

/// The child modes: the MCP rows' (`--mcp-server`, `--mcp-record`,
/// `--mcp-relay`) and the open-after-crash row's writer (`--crash-writer`).
fn child_mode(args: &[String]) -> Option<ExitCode> {
    let done = |r: std::io::Result<()>, what: &str| match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reel-bench {what}: {e}");
            ExitCode::FAILURE
        }
    };
    match args {
        [mode] if mode == "--mcp-http-server" => Some(done(
            reel_bench::mcp_http::server_main(),
            "--mcp-http-server",
        )),
        [mode, upstream] if mode == "--mcp-http-relay" => Some(done(
            reel_bench::mcp_http::relay_main(upstream),
            "--mcp-http-relay",
        )),
        [mode, dir, runs, progress] if mode == "--crash-writer" => {
            let (Ok(runs), Ok(progress)) = (runs.parse(), progress.parse()) else {
                eprintln!(
                    "reel-bench --crash-writer DIR RUNS PROGRESS: RUNS and PROGRESS are counts"
                );
                return Some(ExitCode::from(2));
            };
            Some(done(
                reel_bench::list::crash_writer_main(std::path::Path::new(dir), runs, progress),
                "--crash-writer",
            ))
        }
        [mode, kind] if mode == "--mcp-server" => {
            Some(done(mcp::server_main(kind, None), "--mcp-server"))
        }
        [mode, kind, flag, dir] if mode == "--mcp-server" && flag == "--archive" => Some(done(
            mcp::server_main(kind, Some(std::path::Path::new(dir))),
            "--mcp-server",
        )),
        [mode, dashes, command @ ..] if mode == "--mcp-relay" && dashes == "--" => Some(done(
            mcp::relay_main(command.iter().map(Into::into).collect()),
            "--mcp-relay",
        )),
        [mode, dir, dashes, command @ ..] if mode == "--mcp-record" && dashes == "--" => {
            Some(done(
                mcp::proxy_main(
                    std::path::Path::new(dir),
                    command.iter().map(Into::into).collect(),
                ),
                "--mcp-record",
            ))
        }
        _ => None,
    }
}

fn main() -> ExitCode {
    // The memory row runs this binary again as its child.
    if reel_bench::memory::child_main() {
        return ExitCode::SUCCESS;
    }
    let all: Vec<String> = std::env::args().skip(1).collect();
    if let Some(code) = child_mode(&all) {
        return code;
    }
    let mut reel = None;
    let mut opts = Options::new(Sizes::full());
    let mut smoke = false;
    let mut rounds = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--smoke" => smoke = true,
            "--keep" => opts.keep = true,
            "--reel" => match args.next() {
                Some(p) => reel = Some(PathBuf::from(p)),
                None => {
                    eprintln!("--reel takes the path of the reel binary\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--nats" => match args.next() {
                Some(urls) => opts.nats = Some(urls),
                None => {
                    eprintln!("--nats takes the cluster's client URLs, comma-separated\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--row" => match args.next() {
                Some(r) if ROWS.contains(&r.as_str()) => opts.rows.push(r),
                other => {
                    eprintln!(
                        "unknown row {:?}: use one of {}\n{USAGE}",
                        other.unwrap_or_default(),
                        ROWS.join(", ")
                    );
                    return ExitCode::from(2);
                }
            },
            "--rounds" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => rounds = Some(n),
                _ => {
                    eprintln!("--rounds takes a positive number\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--dir" => match args.next() {
                Some(d) => opts.dir = Some(PathBuf::from(d)),
                None => {
                    eprintln!("--dir takes a directory\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    if smoke {
        opts.sizes = Sizes::smoke();
    }
    opts.reel_exe = find_reel(reel);
    if let Some(n) = rounds {
        opts.sizes.rounds = n;
    }
    let started = std::time::Instant::now();
    let rows = match run(&opts, &mut std::io::stdout()) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("reel-bench failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "\nSummary ({} rounds per row, medians; ratio = median of per-round reel/baseline; {} cores; suite took {:.0} s):\n",
        opts.sizes.rounds,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        started.elapsed().as_secs_f64()
    );
    print!("{}", summary_table(&rows));
    ExitCode::SUCCESS
}

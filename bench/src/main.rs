//! `reel-bench`: runs the performance budget's rows and prints one summary
//! table.
//!
//! ```text
//! cargo run --release -p reel-bench                 # the full suite
//! cargo run --release -p reel-bench -- --smoke      # tiny sizes
//! cargo run --release -p reel-bench -- --row record # one row (repeatable), e.g. to profile
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use reel_bench::{run, summary_table, Options, Sizes, ROWS};

const USAGE: &str = "usage: reel-bench [--smoke] [--row NAME]... [--rounds N] [--dir DIR] [--keep]
  --smoke      tiny sizes (seconds; what the smoke test runs)
  --row NAME   run only this row (repeatable): record, record-fair, record-limit, tripwire, agent,
               latency, progress, tracing, timeline, bytes, list, replay, nats, memory, viewer
  --nats URLS  the JetStream cluster of the nats row (comma-separated client URLs; without it the row is not run)
  --rounds N   rounds per row (default 9; at least 5 for figures worth quoting)
  --dir DIR    where the temporary archives and files go (default: the system's temp dir)
  --keep       keep those archives and files (their paths are printed)";

fn main() -> ExitCode {
    // The memory row runs this binary again as its child.
    if reel_bench::memory::child_main() {
        return ExitCode::SUCCESS;
    }
    let mut opts = Options::new(Sizes::full());
    let mut smoke = false;
    let mut rounds = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--smoke" => smoke = true,
            "--keep" => opts.keep = true,
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

//! `reel export`: one run as a tape (JSON Lines).

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use reel::tape::Tape;
use reel_archive::TapeExt;
use reel_viewer::render::terminal::{escape, JsonSafe};

use crate::failure::{shown, Failure};
use crate::source::Source;
use crate::stream::resolve_run;

/// `reel export`'s arguments.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The run to export.
    run: String,
    /// The tape file to write ("-" for standard output).
    #[arg(short, long)]
    output: PathBuf,
}

/// Writes the tape (it needs the archive itself, not a live socket).
pub fn run(dir: &Path, args: ExportArgs) -> Result<ExitCode, Failure> {
    let (run, output) = (&args.run, &args.output);
    let source = Source::open(dir)?;
    resolve_run(&source, run)?;
    let archive = source.local("export")?;
    let tape = Tape::export(&archive, run)?;
    if output == Path::new("-") {
        tape.write(JsonSafe::new(io::stdout().lock()))?;
    } else {
        let file = File::create(output)
            .map_err(|e| Failure::msg(format!("cannot write {}: {e}", output.display())))?;
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

//! `reel import`: a tape into the archive, all of it or none.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use reel::tape::Tape;
use reel_archive::{Archive, ArchiveConfig, TapeExt};
use reel_viewer::render::terminal::escape;

use crate::failure::{shown, Failure};

/// `reel import`'s arguments.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The tape file to read.
    file: PathBuf,
}

/// Imports the tape; a refusal names the tape's line.
pub fn run(dir: &Path, args: ImportArgs) -> Result<ExitCode, Failure> {
    let file = &args.file;
    let f = File::open(file)
        .map_err(|e| Failure::msg(format!("cannot read {}: {e}", file.display())))?;
    let (tape, lines) = Tape::read_with_lines(BufReader::new(f))
        .map_err(|e| Failure::msg(format!("{}: {e}", file.display())))?;
    if !tape.digest_matches() {
        eprintln!(
            "reel: warning: {}: the facts differ from what was recorded (facts_sha256 does not match): the tape was edited",
            shown(file)
        );
    }
    let archive = Archive::open(dir, ArchiveConfig::default())?;
    let record = tape
        .import_with_lines(&archive, &lines)
        .map_err(|e| Failure::msg(format!("{}: {e}", file.display())))?;
    archive.flush()?;
    writeln!(
        io::stdout(),
        "imported {} ({}, {}) into {}",
        escape(&record.describe()),
        reel_viewer::render::text::counted(record.facts, "fact"),
        record.state,
        shown(dir)
    )?;
    Ok(ExitCode::SUCCESS)
}

//! `reel import`: a tape into the archive, all of it or none.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use reel::tape::{Tape, TapeError};
use reel_archive::{Archive, ArchiveConfig, TapeExt};
use reel_viewer::render::terminal::escape;

use crate::failure::{shown, Failure};

/// `reel import`'s arguments.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The tape file to read.
    file: PathBuf,
    /// Import the run under this id instead of the tape's (a second copy,
    /// or beside the run it was exported from).
    #[arg(long = "as", value_name = "RUN")]
    as_id: Option<String>,
}

/// Why `file`, which failed to read as a tape with `error`, is no tape at
/// all (not text, empty, or a first line that is no JSON object), rather
/// than a tape with a bad line; `None` for a tape with a bad line.
fn not_a_tape(file: &Path, error: &TapeError) -> Option<String> {
    match error {
        TapeError::Io(e) if e.kind() == io::ErrorKind::InvalidData => Some("it is not text".into()),
        TapeError::Line { line: 1, .. } => {
            let text = std::fs::read(file).ok()?;
            let first = text.split(|b| *b == b'\n').next().unwrap_or_default();
            if text.iter().all(u8::is_ascii_whitespace) {
                Some("it is empty".into())
            } else if serde_json::from_slice::<serde_json::Value>(first)
                .is_ok_and(|v| v.is_object())
            {
                None
            } else {
                Some(format!("its first line is no JSON object: {error}"))
            }
        }
        _ => None,
    }
}

/// Imports the tape; a refusal names the tape's line.
pub fn run(dir: &Path, args: ImportArgs) -> Result<ExitCode, Failure> {
    let file = &args.file;
    let f = File::open(file)
        .map_err(|e| Failure::msg(format!("cannot read {}: {e}", file.display())))?;
    let (tape, lines) = Tape::read_with_lines(BufReader::new(f)).map_err(|e| {
        Failure::msg(match not_a_tape(file, &e) {
            Some(why) => format!(
                "{} is not a reel tape ({why}): import a tape `reel export` wrote (RUN.tape.jsonl)",
                file.display()
            ),
            None => format!("{}: {e}", file.display()),
        })
    })?;
    if !tape.digest_matches() {
        eprintln!(
            "reel: warning: {}: the facts differ from what was recorded (facts_sha256 does not match): the tape was edited",
            shown(file)
        );
    }
    let tape = match &args.as_id {
        Some(id) => tape
            .renamed(id)
            .map_err(|e| Failure::msg(format!("--as {id}: {}: {e}", file.display())))?,
        None => tape,
    };
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

//! How the `reel` binary opens an archive to read, and words what goes
//! wrong: the reader itself is the archive's one reader,
//! [`reel_archive::live::Source`] (the archive, or, when a running
//! recorder holds it, that recorder's live socket), which gives a run's
//! facts as one stream of items, damage as a [`Gap`](reel::gap::Gap). Its
//! errors become a [`Failure`] with `?` (`failure.rs`).

use std::path::Path;

use reel::tape::Tape;
use reel_archive::live::{Asked, Source, TapeAsked, SOCKET_NAME};
use reel_archive::{Archive, ArchiveConfig, ArchiveError};

use crate::failure::Failure;

/// Opens `dir` for reading: directly, or through the live socket when a
/// recorder holds it. Reading never writes the store: a store its last
/// closer did not seal whole is read from a checked scratch copy
/// ([`ArchiveConfig::read_only`]).
pub fn open(dir: &Path) -> Result<Source, Failure> {
    open_with(dir, true)
}

/// Opens `dir` for a verb that writes to it (prune).
pub fn open_to_write(dir: &Path) -> Result<Source, Failure> {
    open_with(dir, false)
}

fn open_with(dir: &Path, read_only: bool) -> Result<Source, Failure> {
    if !dir.join("db").exists() {
        return Err(Failure::msg(no_archive(dir)));
    }
    let config = ArchiveConfig {
        read_only,
        ..ArchiveConfig::default()
    };
    match Source::open(dir, config) {
        Ok(source) => {
            if let Source::Archive(a) = &source {
                say_torn_tail(a);
            }
            Ok(source)
        }
        Err(ArchiveError::Locked { .. }) => Err(Failure::msg(format!(
            "archive {} is held open by another process that serves no live socket ({}): \
             stop that process, or record with `RecorderConfig::serve_live` on to inspect it while it runs",
            dir.display(),
            dir.join(SOCKET_NAME).display()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// After a crash, says once on stderr how far the journal's written tail
/// reached and where it was cut. Not damage (it was never acknowledged),
/// so no alarm and no change to the exit code, but not silent either: a
/// flight recorder's last moments are the most wanted part of its record.
fn say_torn_tail(archive: &Archive) {
    if let Some(tail) = archive.torn_tail() {
        eprintln!(
            "reel: {}; not damage: they were read as far as they are intact",
            reel_viewer::render::terminal::escape(tail)
        );
    }
}

/// The local archive, for verbs that need one (verify, import, export).
pub fn local(source: Source, verb: &str) -> Result<Archive, Failure> {
    match source {
        Source::Archive(a) => Ok(a),
        Source::Live { dir, .. } => Err(Failure::msg(format!(
            "`reel {verb}` needs the archive itself, but a running recorder holds {}: stop the recorder first (runs, show and tail work while it runs)",
            dir.display()
        ))),
    }
}

/// The run as a tape, as `reel export` writes it. While a recorder holds
/// the archive, the record and the facts come through its socket and the
/// artifacts from their files (written once, never changed); an artifact
/// an older reel kept inside the store cannot be read then, and is said
/// so. A run with a gap is damage, as for `export` of a closed archive.
pub fn tape(source: &Source, run_id: &str) -> Result<Tape, Failure> {
    source.tape(run_id).map_err(|e| match e {
        TapeAsked::Asked(e) => asked(e),
        TapeAsked::Archive(e) => e.into(),
        e @ TapeAsked::Gap { .. } => Failure::damaged(e.to_string()),
        e @ TapeAsked::InStore { .. } => Failure::msg(e.to_string()),
    })
}

/// What the live client's error says, with what to do when the recorder
/// stopped mid-stream.
pub fn asked(e: Asked) -> Failure {
    match e {
        e @ Asked::Interrupted { .. } => Failure::msg(format!(
            "{e}: run the command again (the archive is then read directly)"
        )),
        e @ Asked::Gone(_) => Failure {
            read_again: true,
            ..Failure::msg(format!(
                "{e}: run the command again (the archive is then read directly)"
            ))
        },
        e => Failure::msg(e.to_string()),
    }
}
/// What to say of `dir`, which holds no archive, with advice that works:
/// `reel demo` records into a directory that is new or empty, never into
/// a file or a directory of other files, so for those it names another.
fn no_archive(dir: &Path) -> String {
    let usable = |d: &Path| {
        !d.exists()
            || d.join("db").exists()
            || d.read_dir()
                .is_ok_and(|mut entries| entries.next().is_none())
    };
    if usable(dir) {
        return format!(
            "no archive at {}: record one with `reel demo --archive {}`, or pass --archive DIR (or set REEL_ARCHIVE)",
            dir.display(),
            dir.display()
        );
    }
    let what = if dir.is_dir() {
        "a directory of other files"
    } else {
        "a file"
    };
    // A new directory beside it (or the default's name, when free).
    let parent = dir.parent().unwrap_or(Path::new(""));
    let fresh = std::iter::once("reel-archive".to_owned())
        .chain((2..100).map(|n| format!("reel-archive-{n}")))
        .map(|name| parent.join(name))
        .find(|d| d.as_path() != dir && usable(d))
        .unwrap_or_else(|| parent.join("reel-archive"));
    format!(
        "{} is not a reel archive ({what}): pass an archive's directory with --archive DIR (or set REEL_ARCHIVE), or record one into a new directory with `reel demo --archive {}`",
        dir.display(),
        fresh.display()
    )
}

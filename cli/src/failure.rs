//! What a verb returns when it cannot do its job: one message for the
//! person at the terminal, and the exit codes (the book's "Exit codes",
//! docs/src/exit-codes.md).

use std::path::Path;

use reel_viewer::render::terminal::escape;

/// The exit codes, as the book's "Exit codes" table lists them. 0 is done.
pub mod exit {
    /// A failure that is not damage (a locked archive, an unknown run, a
    /// newer reel's archive), or a difference found (`diff`, `mcp verify`).
    pub const FAILURE: u8 = 1;
    /// Damage to what is stored. Nothing else exits 2.
    pub const DAMAGE: u8 = 2;
    /// The command line is wrong (sysexits' `EX_USAGE`): clap's usage
    /// errors, a value reel cannot use (`--kind bogus`, an `mcp` session
    /// that is no tape or run).
    pub const USAGE: u8 = 64;
}

/// A failure for the person at the terminal. The message is escaped where
/// it is printed (`main`): build it from raw strings.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong, and what to do.
    pub message: String,
    /// The exit code: one of [`exit`]'s.
    pub code: u8,
    /// Standard output was closed by its reader (`reel runs | head -1`):
    /// nothing is said and the exit code is 0, as `ls | head` ends.
    pub closed_output: bool,
    /// The recorder a read went through stopped before it was asked
    /// ([`reel_archive::live::Asked::Gone`]): a read verb runs once more,
    /// reading the archive directly.
    pub read_again: bool,
}

impl Failure {
    /// A failure that is not damage (exit code 1).
    pub fn msg(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: exit::FAILURE,
            closed_output: false,
            read_again: false,
        }
    }

    /// Damage to what is stored (exit code 2).
    pub fn damaged(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: exit::DAMAGE,
            closed_output: false,
            read_again: false,
        }
    }

    /// A command line reel cannot use (exit code 64).
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: exit::USAGE,
            closed_output: false,
            read_again: false,
        }
    }
}

impl<E: std::fmt::Display + 'static> From<E> for Failure {
    fn from(e: E) -> Failure {
        let any = &e as &dyn std::any::Any;
        // A read through the archive's one reader: the archive's error as
        // itself, the live client's with what to do.
        match any.downcast_ref::<reel_archive::live::SourceError>() {
            Some(reel_archive::live::SourceError::Archive(e)) => {
                return Failure {
                    message: e.to_string(),
                    code: if e.is_damage() {
                        exit::DAMAGE
                    } else {
                        exit::FAILURE
                    },
                    closed_output: false,
                    read_again: false,
                }
            }
            Some(reel_archive::live::SourceError::Live(e)) => {
                return crate::source::asked(e.clone())
            }
            None => {}
        }
        // Damage on disk exits 2, whatever verb met it.
        let damage = any
            .downcast_ref::<reel_archive::ArchiveError>()
            .is_some_and(reel_archive::ArchiveError::is_damage);
        // A reader that stopped reading (`| head`) is not a failure.
        let kind = any
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                any.downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            })
            .or_else(|| match any.downcast_ref::<reel::tape::TapeError>() {
                Some(reel::tape::TapeError::Io(e)) => Some(e.kind()),
                _ => None,
            });
        Failure {
            message: e.to_string(),
            code: if damage { exit::DAMAGE } else { exit::FAILURE },
            closed_output: kind == Some(std::io::ErrorKind::BrokenPipe),
            read_again: false,
        }
    }
}

/// A path as it may be printed.
pub fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

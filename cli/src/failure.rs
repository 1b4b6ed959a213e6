//! What a verb returns when it cannot do its job: one message for the
//! person at the terminal, and the exit codes (README, "Exit codes").

use std::path::Path;

use reel_viewer::render::terminal::escape;

/// The exit codes, as README's "Exit codes" table lists them. 0 is done.
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
}

impl Failure {
    /// A failure that is not damage (exit code 1).
    pub fn msg(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: exit::FAILURE,
        }
    }

    /// Damage to what is stored (exit code 2).
    pub fn damaged(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: exit::DAMAGE,
        }
    }

    /// A command line reel cannot use (exit code 64).
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: exit::USAGE,
        }
    }
}

impl<E: std::fmt::Display + 'static> From<E> for Failure {
    fn from(e: E) -> Failure {
        // Damage on disk exits 2, whatever verb met it.
        let damage = (&e as &dyn std::any::Any)
            .downcast_ref::<reel_archive::ArchiveError>()
            .is_some_and(reel_archive::ArchiveError::is_damage);
        Failure {
            message: e.to_string(),
            code: if damage { exit::DAMAGE } else { exit::FAILURE },
        }
    }
}

/// A path as it may be printed.
pub fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

//! What a verb returns when it cannot do its job: one message for the
//! person at the terminal.

use std::path::Path;

use reel_viewer::render::terminal::escape;

/// A failure for the person at the terminal. The message is escaped where
/// it is printed (`main`): build it from raw strings.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong, and what to do.
    pub message: String,
    /// The exit code: 2 for damage to what is stored (as `verify` exits
    /// when it finds some), 1 for anything else.
    pub code: u8,
}

impl Failure {
    /// A failure that is not damage (exit code 1).
    pub fn msg(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 1,
        }
    }

    /// Damage to what is stored (exit code 2).
    pub fn damaged(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 2,
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
            code: if damage { 2 } else { 1 },
        }
    }
}

/// A path as it may be printed.
pub fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

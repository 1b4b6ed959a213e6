//! What a verb returns when it cannot do its job: one message for the
//! person at the terminal.

use std::path::Path;

use reel_viewer::render::terminal::escape;

/// A failure for the person at the terminal. The message is escaped where
/// it is printed (`main`): build it from raw strings.
#[derive(Debug)]
pub struct Failure(pub String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure(e.to_string())
    }
}

/// A path as it may be printed.
pub fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

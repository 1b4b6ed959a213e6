//! `reel lsp`: the tape language server on standard input and output. The
//! server is `reel-lsp`'s; the binary gives it a runtime.

use std::process::ExitCode;

use crate::failure::Failure;

/// Serves until the editor closes the connection.
pub fn run() -> Result<ExitCode, Failure> {
    let rt = super::runtime()?;
    rt.block_on(reel_lsp::serve_stdio());
    Ok(ExitCode::SUCCESS)
}

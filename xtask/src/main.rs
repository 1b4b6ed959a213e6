//! `cargo xtask`: the project's chores, in Rust, so that a fresh machine
//! needs only a Rust toolchain (`.cargo/config.toml` aliases `cargo xtask`
//! to `cargo run --package xtask --`; this package is outside the
//! workspace's `default-members`).
//!
//! - `cargo xtask test [-- CARGO TEST ARGS]`: installs the tests' missing
//!   peers (`provision`), checks the links of the book and builds it
//!   (`book`), then runs `cargo test --workspace` with the arguments
//!   (`-p`/`--package` replaces `--workspace`). The book goes first: it
//!   takes seconds, and the tests' summary is then the last thing printed.
//!   The test command of README.md and of `.ci/run`.
//! - `cargo xtask provision`: only the installs.
//! - `cargo xtask book`: only the link check and `mdbook build docs`.
//!
//! Each install step prints one line, `present` or `install`; what cannot
//! be installed here says what to run. A failure exits 1 with one line
//! saying what failed; a failing `cargo test` exits with its own code.

mod book;
mod links;
mod provision;

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask TASK
  test [-- ARGS]   install the tests' missing peers, check and build the book,
                   then `cargo test --workspace ARGS` (e.g. -- -p reel-archive)
  provision        install the tests' missing peers only
  book             check the book's links and build it (docs/book/)";

/// A task that could not be done, in one line that says what to do.
#[derive(Debug)]
pub struct Failure(pub String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a task ended, when it did not fail.
enum Done {
    Ok,
    /// A child (`cargo test`) exited with this code.
    Exit(u8),
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = root();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&root, &args[1..]),
        Some("provision") => {
            provision::all(&root, &mut provision::Host::detect()).map(|_| Done::Ok)
        }
        Some("book") => book::task(&root).map(|()| Done::Ok),
        Some("help" | "--help" | "-h") => {
            println!("{USAGE}");
            Ok(Done::Ok)
        }
        Some(other) => {
            eprintln!("xtask: no task `{other}`\n{USAGE}");
            return ExitCode::from(64);
        }
        None => {
            eprintln!("{USAGE}");
            return ExitCode::from(64);
        }
    };
    match result {
        Ok(Done::Ok) => ExitCode::SUCCESS,
        Ok(Done::Exit(code)) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("xtask: {failure}");
            ExitCode::FAILURE
        }
    }
}

/// Provisions, checks and builds the book, then runs the tests.
/// The arguments of the `cargo` that runs the tests: `test`, then
/// `--workspace` unless a package is named, then the caller's arguments.
fn test_line(args: &[String]) -> Vec<&str> {
    let packages = args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a.starts_with("-p") || a.starts_with("--package"));
    let mut line = vec!["test"];
    if !packages {
        line.push("--workspace");
    }
    line.extend(args.iter().map(String::as_str));
    line
}

fn test(root: &Path, args: &[String]) -> Result<Done, Failure> {
    let args = match args.first().map(String::as_str) {
        Some("--") => &args[1..],
        _ => args,
    };
    let mdbook = provision::all(root, &mut provision::Host::detect())?;
    book::check_and_build(root, &mdbook)?;

    let mut cargo = Command::new(provision::cargo());
    cargo.current_dir(root);
    // What `cargo run` told this package about itself is not the tests'.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_BIN_NAME",
            ]
            .contains(&name.as_ref())
        {
            cargo.env_remove(name.as_ref());
        }
    }
    // The conformance test finds the suite here, where provisioning put it.
    cargo.env("REEL_CONFORMANCE_DIR", provision::conformance_dir());
    // The console's accessibility test finds axe-core here.
    cargo.env("REEL_AXE", provision::axe_path());
    let line = test_line(args);
    cargo.args(&line);
    println!("xtask: cargo {}", line.join(" "));
    let status = cargo
        .status()
        .map_err(|e| Failure(format!("cannot start cargo: {e}")))?;
    Ok(match status.code() {
        Some(0) => Done::Ok,
        Some(code) => Done::Exit(u8::try_from(code).unwrap_or(1)),
        None => Done::Exit(1),
    })
}

/// Runs `command` with its output on the terminal; fails unless it exits 0.
pub fn run(command: &mut Command) -> Result<(), Failure> {
    let status = command
        .status()
        .map_err(|e| Failure(format!("cannot start {command:?}: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure(format!("{command:?} failed ({status})")))
    }
}

/// The repository root: this package's parent directory.
fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::test_line;

    fn line(args: &[&str]) -> Vec<String> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        test_line(&args).into_iter().map(String::from).collect()
    }

    /// `cargo test` once: a second `test` would be a test-name filter
    /// that silently skips every test whose name lacks "test".
    #[test]
    fn the_whole_workspace_runs_unfiltered() {
        assert_eq!(line(&[]), ["test", "--workspace"]);
        assert_eq!(
            line(&["--no-fail-fast"]),
            ["test", "--workspace", "--no-fail-fast"]
        );
    }

    #[test]
    fn a_named_package_replaces_the_workspace() {
        assert_eq!(
            line(&["-p", "reel-archive"]),
            ["test", "-p", "reel-archive"]
        );
        assert_eq!(
            line(&["--", "--package"]),
            ["test", "--workspace", "--", "--package"]
        );
    }
}

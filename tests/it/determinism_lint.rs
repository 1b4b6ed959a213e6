//! The determinism lint for tool crates (`determinism/clippy.toml`), shown
//! firing: clippy, with that file as its configuration, refuses a tool
//! crate that reads the wall clock, the monotonic clock or the environment
//! directly, and each error says what to use instead. The fixture crate
//! (`determinism/fixture`) depends on nothing, so this costs a clippy run
//! over one small file.

use std::path::Path;
use std::process::Command;

#[test]
fn clippy_refuses_a_tool_that_reads_the_clock_or_the_environment_itself() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), Into::into)
        .join("determinism-fixture");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["clippy", "--quiet", "--manifest-path"])
        .arg(root.join("determinism/fixture/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .args(["--", "-D", "clippy::disallowed_methods"])
        .env("CLIPPY_CONF_DIR", root.join("determinism"))
        .output()
        .expect("cargo clippy runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "clippy passed the fixture:\n{stderr}"
    );
    for (call, instead) in [
        (
            "std::time::SystemTime::now",
            "read the time with `ctx.now()`",
        ),
        ("std::time::Instant::now", "read the time with `ctx.now()`"),
        ("std::env::var", "pass configuration in"),
    ] {
        assert!(
            stderr.contains(&format!("use of a disallowed method `{call}`")),
            "{call} not flagged:\n{stderr}"
        );
        assert!(stderr.contains(instead), "{instead:?} not said:\n{stderr}");
    }
}

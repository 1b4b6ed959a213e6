//! `reel salvage` and `reel prune` through the real binary, on a real
//! archive recorded by `reel demo`.

use std::path::Path;
use std::process::{Command, Output};

fn reel(config: &Path, args: &[&str]) -> Output {
    reel_env(config, args, &[])
}

fn reel_env(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["--color", "never"])
        .args(args)
        .env_remove("REEL_ARCHIVE")
        .env_remove("REEL_FINGERPRINT_KEY")
        .env("REEL_CONFIG_DIR", config)
        .envs(env.iter().copied())
        .output()
        .expect("the reel binary runs")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn demo(config: &Path, archive: &Path) {
    let made = reel(config, &["demo", "--archive", archive.to_str().unwrap()]);
    assert!(made.status.success(), "{}", text(&made.stderr));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn salvage_recovers_an_archive_sled_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let archive = tmp.path().join("archive");
    demo(&config, &archive);
    // sled refuses a store whose conf is overwritten (as in damage.rs):
    // every verb says damage.
    let damaged = tmp.path().join("damaged");
    copy_dir(&archive, &damaged);
    let mut conf = std::fs::read(damaged.join("conf")).unwrap();
    for b in conf.iter_mut().skip(4).take(8) {
        *b ^= 0xff;
    }
    std::fs::write(damaged.join("conf"), conf).unwrap();
    let out = reel(&config, &["--archive", damaged.to_str().unwrap(), "runs"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));

    let into = tmp.path().join("salvaged");
    let out = reel(
        &config,
        &[
            "salvage",
            damaged.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout).replace(into.to_str().unwrap(), "[NEW]");
    insta::assert_snapshot!("salvage_conf_overwritten", shown);

    let out = reel(&config, &["--archive", into.to_str().unwrap(), "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    // The salvaged runs read as the original's do.
    for run in ["demo-deploy", "demo-search", "demo-walk-cancelled"] {
        let a = reel(
            &config,
            &[
                "--archive",
                archive.to_str().unwrap(),
                "export",
                run,
                "-o",
                "-",
            ],
        );
        let b = reel(
            &config,
            &[
                "--archive",
                into.to_str().unwrap(),
                "export",
                run,
                "-o",
                "-",
            ],
        );
        assert!(
            a.status.success() && b.status.success(),
            "{}",
            text(&b.stderr)
        );
        assert_eq!(text(&a.stdout), text(&b.stdout), "run {run}");
    }

    // JSON, and a second salvage refuses to write into an archive.
    let out = reel(
        &config,
        &[
            "salvage",
            damaged.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("pass a new or empty directory"),
        "{}",
        text(&out.stderr)
    );
    let into2 = tmp.path().join("salvaged-2");
    let out = reel(
        &config,
        &[
            "salvage",
            damaged.to_str().unwrap(),
            "--into",
            into2.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["runs_recovered"], 5);
    assert_eq!(report["facts_lost"], 0);
    assert!(report["sled_refused"].is_string());

    // Damage salvage cannot mend is reported as lost, with exit code 2.
    let cut = tmp.path().join("cut");
    copy_dir(&archive, &cut);
    let db = std::fs::read(cut.join("db")).unwrap();
    let used = db.iter().rposition(|&b| b != 0).unwrap();
    std::fs::write(cut.join("db"), &db[..used / 2]).unwrap();
    let into3 = tmp.path().join("salvaged-3");
    let out = reel(
        &config,
        &[
            "salvage",
            cut.to_str().unwrap(),
            "--into",
            into3.to_str().unwrap(),
        ],
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("lost:"), "{stdout}");
    let out = reel(&config, &["--archive", into3.to_str().unwrap(), "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

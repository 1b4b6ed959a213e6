//! `reel salvage` and `reel prune` through the real binary, on a real
//! archive recorded by `reel demo`.

use crate::support::{copy_dir, reel};

use std::path::Path;
use std::process::Command;

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn demo(config: &Path, archive: &Path) {
    let made = reel(config, &["demo", "--archive", archive.to_str().unwrap()]);
    assert!(made.status.success(), "{}", text(&made.stderr));
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
    // How many blocks the demo's facts took depends on the recorder's
    // drains; the facts do not.
    let shown = text(&out.stdout).replace(into.to_str().unwrap(), "[NEW]");
    let shown = regex::Regex::new(r"\d+ blocks,")
        .unwrap()
        .replace(&shown, "[N] blocks,")
        .into_owned();
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

fn runs_json(config: &Path, archive: &Path) -> Vec<String> {
    let out = reel(
        config,
        &["--archive", archive.to_str().unwrap(), "runs", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut ids: Vec<String> = page["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["run_id"].as_str().expect("id").to_owned())
        .collect();
    ids.sort();
    ids
}

/// The archive opens, verifies (exit 0), and every run it lists shows
/// and exports with its artifacts.
fn consistent(config: &Path, archive: &Path) -> Vec<String> {
    let dir = archive.to_str().unwrap();
    let out = reel(config, &["--archive", dir, "verify"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let ids = runs_json(config, archive);
    for id in &ids {
        let out = reel(config, &["--archive", dir, "show", id]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "show {id}: {}",
            text(&out.stderr)
        );
    }
    ids
}

#[test]
fn prune_deletes_old_runs_by_tenant_and_status_and_dry_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let archive = tmp.path().join("archive");
    demo(&config, &archive);
    let dir = archive.to_str().unwrap();
    let all = runs_json(&config, &archive);
    assert_eq!(all.len(), 5);

    // Nothing is older than 30 days.
    let out = reel(&config, &["--archive", dir, "prune", "--older-than", "30d"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("deleted 0 runs"),
        "{}",
        text(&out.stdout)
    );

    // A dry run deletes nothing; not on a terminal, no progress bar.
    let out = reel(
        &config,
        &[
            "--archive",
            dir,
            "prune",
            "--older-than",
            "0s",
            "--tenant",
            "acme",
            "--dry-run",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("would delete 4 runs"), "{stdout}");
    assert!(
        !stdout.contains("pruning") && !stdout.contains('\r'),
        "{stdout}"
    );
    assert_eq!(runs_json(&config, &archive), all);

    let out = reel(
        &config,
        &[
            "--archive",
            dir,
            "prune",
            "--older-than",
            "0s",
            "--status",
            "failed",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["runs"], serde_json::json!(["demo-deploy-failed"]));
    let left = consistent(&config, &archive);
    assert_eq!(left.len(), 4);
    assert!(!left.contains(&"demo-deploy-failed".to_owned()));
    let out = reel(&config, &["--archive", dir, "verify"]);
    assert!(
        text(&out.stdout).contains("1 run was pruned"),
        "{}",
        text(&out.stdout)
    );

    let out = reel(
        &config,
        &[
            "--archive",
            dir,
            "prune",
            "--older-than",
            "0s",
            "--tenant",
            "acme",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(consistent(&config, &archive), ["demo-audit-degraded"]);
    // Artifacts only the pruned runs referred to went with them.
    let out = reel(&config, &["--archive", dir, "verify", "--json"]);
    let verified: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(verified["pruned"], 4);
    assert_eq!(verified["artifacts"], 0, "{verified}");

    // Salvage does not bring pruned runs back from copies left in sled's
    // files.
    let into = tmp.path().join("salvaged");
    let out = reel(&config, &["salvage", dir, "--into", into.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert_eq!(consistent(&config, &into), ["demo-audit-degraded"]);

    let out = reel(
        &config,
        &[
            "--archive",
            dir,
            "prune",
            "--older-than",
            "0s",
            "--status",
            "running",
        ],
    );
    assert_eq!(out.status.code(), Some(64), "a usage error");
}

/// SIGKILL right after each of many steps of a prune: the archive opens,
/// verifies and lists consistently, the run being deleted is gone or
/// whole, and a prune run again finishes the job.
#[test]
fn a_prune_killed_midway_leaves_a_consistent_archive() {
    use std::io::{BufRead, BufReader};
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let archive = tmp.path().join("archive");
    demo(&config, &archive);
    let all = runs_json(&config, &archive);
    let mut mid = 0;
    for kill_after in [1, 2, 4, 7, 11, 16, 23, 31] {
        let copy = tmp.path().join(format!("kill-{kill_after}"));
        copy_dir(&archive, &copy);
        let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
            .args(["--color", "never", "--archive", copy.to_str().unwrap()])
            .args(["prune", "--older-than", "0s"])
            .env_remove("REEL_ARCHIVE")
            .env("REEL_CONFIG_DIR", &config)
            .env("REEL_PRUNE_PAUSE_MS", "20")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut seen = 0;
        for line in stderr.lines() {
            if line.expect("line").starts_with("prune step") {
                seen += 1;
                if seen == kill_after {
                    // SIGKILL on Unix.
                    let _ = child.kill();
                    break;
                }
            }
        }
        let status = child.wait().expect("wait");
        let left = consistent(&config, &copy);
        assert!(left.iter().all(|r| all.contains(r)));
        if !status.success() && !left.is_empty() && left.len() < all.len() {
            mid += 1;
        }
        let out = reel(
            &config,
            &[
                "--archive",
                copy.to_str().unwrap(),
                "prune",
                "--older-than",
                "0s",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(consistent(&config, &copy).is_empty());
        let _ = std::fs::remove_dir_all(&copy);
    }
    assert!(mid > 0, "some kill landed between two runs' deletions");
}

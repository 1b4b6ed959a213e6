//! Damage on disk is reported as damage: exit code 2 and a message that
//! says the archive is damaged and what to do, from every verb that meets
//! it; never "not an archive this version can read" (a version problem),
//! and never a panic. The archive is a real one, recorded by `reel demo`.

use std::path::Path;
use std::process::{Command, Output};

fn reel(config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["--color", "never"])
        .args(args)
        .env_remove("REEL_ARCHIVE")
        .env_remove("REEL_FINGERPRINT_KEY")
        .env("REEL_CONFIG_DIR", config)
        .output()
        .expect("the reel binary runs")
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

/// One way of damaging sled's `conf`, named.
type Damage = (&'static str, fn(&Path));

#[test]
fn a_damaged_store_is_damage_with_exit_code_2() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let archive = tmp.path().join("archive");
    let made = reel(&config, &["demo", "--archive", archive.to_str().unwrap()]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );

    // sled's `conf` damaged in three ways: bytes overwritten, cut short,
    // emptied. sled refuses to open each; reel must call it damage.
    let damages: [Damage; 3] = [
        ("overwritten", |conf| {
            let mut bytes = std::fs::read(conf).unwrap();
            for b in bytes.iter_mut().skip(4).take(8) {
                *b ^= 0xff;
            }
            std::fs::write(conf, bytes).unwrap();
        }),
        ("cut short", |conf| {
            let bytes = std::fs::read(conf).unwrap();
            std::fs::write(conf, &bytes[..bytes.len() / 2]).unwrap();
        }),
        ("emptied", |conf| std::fs::write(conf, b"").unwrap()),
    ];
    for (how, damage) in damages {
        let copy = tmp
            .path()
            .join(format!("damaged-{}", how.replace(' ', "-")));
        copy_dir(&archive, &copy);
        damage(&copy.join("conf"));
        let dir = copy.to_str().unwrap();
        for verb in [
            vec!["verify"],
            vec!["runs"],
            vec!["show", "demo-deploy"],
            vec!["stats"],
        ] {
            let mut args = vec!["--archive", dir];
            args.extend(&verb);
            let out = reel(&config, &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if out.status.success() {
                // sled may still open it (the damage missed what it reads):
                // then the data must read as recorded.
                continue;
            }
            assert_eq!(
                out.status.code(),
                Some(2),
                "conf {how}, reel {verb:?}: {stderr}"
            );
            assert!(
                stderr.contains("is damaged on disk") && stderr.contains("reel salvage"),
                "conf {how}, reel {verb:?}: {stderr}"
            );
            assert!(
                !stderr.contains("this version can read") && !stderr.contains("panicked"),
                "conf {how}, reel {verb:?}: {stderr}"
            );
        }
    }
    // At least the overwritten conf is refused by sled: the test has
    // something to check.
    let copy = tmp.path().join("damaged-overwritten");
    let out = reel(&config, &["--archive", copy.to_str().unwrap(), "runs"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

//! Where the `reel` binary keeps the fingerprint key: never in the archive;
//! `REEL_FINGERPRINT_KEY` when set, else `fingerprint.key` in the user's
//! configuration directory (`REEL_CONFIG_DIR` here), made owner-only on
//! first use. Recorded with `reel demo`, whose deploy resolves the vault's
//! `ghp_demoSecretValue123`.

use std::path::Path;
use std::process::Output;

use reel_archive::{Archive, ArchiveConfig, FingerprintKey};

use crate::support::{files_under, reel_command};

const DEMO_SECRET: &[u8] = b"ghp_demoSecretValue123";

fn reel(config: &Path, key: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = reel_command(config);
    cmd.args(args);
    if let Some(k) = key {
        cmd.env("REEL_FINGERPRINT_KEY", k);
    }
    cmd.output().expect("the reel binary runs")
}

/// Records the demo into `archive` and returns the deploy's fingerprint.
fn demo_fingerprint(config: &Path, key: Option<&str>, archive: &Path) -> String {
    let dir = archive.to_str().unwrap();
    let out = reel(config, key, &["demo", "--archive", dir]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = reel(
        config,
        key,
        &["show", "demo-deploy", "--json", "--archive", dir],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // The `fingerprint` fields: teardown key hashes are keyed under the
    // same key (`hmac-sha256:` too), but are not fingerprints.
    let mut found = Vec::new();
    fingerprints(&serde_json::from_str(&text).unwrap(), &mut found);
    found.sort();
    found.dedup();
    assert_eq!(found.len(), 1, "one credential fingerprint in {text}");
    found[0].clone()
}

/// Every string under a `fingerprint` key of `v`.
fn fingerprints(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("fingerprint", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => fingerprints(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| fingerprints(v, out)),
        _ => {}
    }
}

/// The fingerprint of the demo's secret under `key`.
fn expected(key: [u8; 32]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let archive = Archive::open(
        dir.path(),
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key(key),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    archive.fingerprint(DEMO_SECRET).0
}

fn holds(dir: &Path, key: &[u8; 32]) -> bool {
    let hex = hex_of(key);
    files_under(dir).into_iter().any(|p| {
        let bytes = std::fs::read(p).unwrap().to_ascii_lowercase();
        bytes.windows(32).any(|w| w == key) || bytes.windows(64).any(|w| w == hex.as_bytes())
    })
}

fn hex_of(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

fn key_of(file: &Path) -> [u8; 32] {
    let text = std::fs::read_to_string(file).unwrap();
    let text = text.trim();
    assert_eq!(text.len(), 64, "{text:?}");
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap();
    }
    key
}

#[test]
fn the_user_key_file_is_made_owner_only_outside_the_archive_and_reused() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config/reel");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let fa = demo_fingerprint(&config, None, &a);
    let file = config.join(reel_archive::KEY_FILE);
    let key = key_of(&file);
    assert_eq!(fa, expected(key), "the key file's key made the fingerprint");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the key file is owner-only");
        let mode = std::fs::metadata(&config).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "its directory too");
    }
    assert!(!holds(&a, &key), "the archive holds the key");
    // A second archive on the same host compares: same key, same fingerprint.
    assert_eq!(demo_fingerprint(&config, None, &b), fa);
    assert_eq!(key_of(&file), key, "the key file is read, not replaced");
}

#[test]
fn the_environment_key_wins_and_a_malformed_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let key = [0x42u8; 32];
    let hex = hex_of(&key);
    let archive = tmp.path().join("a");
    assert_eq!(
        demo_fingerprint(&config, Some(&hex), &archive),
        expected(key)
    );
    assert!(
        !config.join(reel_archive::KEY_FILE).exists(),
        "no key file made"
    );
    assert!(!holds(&archive, &key));

    let out = reel(
        &config,
        Some("not-a-key"),
        &["runs", "--archive", archive.to_str().unwrap()],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("REEL_FINGERPRINT_KEY") && err.contains("64 hex digits"),
        "{err}"
    );
}

//! The fingerprint key lives outside the archive: a copy of an archive is
//! no oracle for guessed credentials.
//!
//! A real recorder resolves a 6-digit PIN. Then, as an attacker holding a
//! copy of the archive directory would: every 32-byte window of every file
//! in it (and every 64-hex-digit run, decoded) is tried as the HMAC key
//! against the recorded fingerprint with the true PIN, which stands in for
//! the whole million-guess search (the search succeeds only if some key in
//! the archive reproduces the fingerprint for the right PIN). None does;
//! the same scan finds the key an older reel kept in the archive, and opening
//! such an archive removes it.

use crate::support::{copy_dir, files_under};

use std::path::Path;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use reel::context::{ToolContext, ToolError};
use reel::fact::{FactKind, RunStatus};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use reel_recorder::{MemoryVault, Recorder, RecorderConfig, RunStart};
use sha2::Sha256;

const PIN: &str = "482913";

/// The fingerprint `key` gives `secret`, as `Archive::fingerprint` makes it.
fn fingerprint_under(key: &[u8], secret: &str) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap();
    mac.update(secret.as_bytes());
    format!(
        "hmac-sha256:{}",
        hex::encode(&mac.finalize().into_bytes()[..16])
    )
}

/// The key (if any) found in `dir` that reproduces `fingerprint` for the
/// PIN. The candidates are what an attacker would try: every 32-byte
/// window of every file, and every run of 64 hex digits, decoded.
fn key_in(dir: &Path, fingerprint: &str) -> Option<Vec<u8>> {
    let fits = |k: &[u8]| fingerprint_under(k, PIN) == fingerprint;
    for path in files_under(dir) {
        let bytes = std::fs::read(&path).unwrap();
        if let Some(k) = bytes.windows(32).find(|k| fits(k)) {
            return Some(k.to_vec());
        }
        let mut run = 0;
        for (i, b) in bytes.iter().enumerate() {
            run = if b.is_ascii_hexdigit() { run + 1 } else { 0 };
            if run >= 64 {
                let k = hex::decode(&bytes[i + 1 - 64..=i]).unwrap();
                if fits(&k) {
                    return Some(k);
                }
            }
        }
    }
    None
}

/// Records one run that resolves the PIN, and returns its fingerprint.
async fn record_pin(archive_dir: &Path, key: FingerprintKey) -> String {
    let config = RecorderConfig {
        fingerprint_key: key,
        serve_live: false,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(archive_dir, config).await.unwrap();
    let run = recorder.start_run(RunStart::new("pin-run")).await.unwrap();
    let vault = Arc::new(MemoryVault::new().with("door", PIN));
    run.call("open_door", serde_json::json!({}))
        .needs("door")
        .credentials(vault)
        .invoke(|ctx: ToolContext, _: serde_json::Value| async move {
            let c = ctx.declared_credential().expect("declared");
            Ok::<_, ToolError>(c.fingerprint.0.clone())
        })
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let resolved: Vec<String> = archive
        .facts("pin-run", ..)
        .unwrap()
        .filter_map(|f| match f.unwrap().kind {
            FactKind::CredentialResolved(r) => Some(r.fingerprint.0),
            _ => None,
        })
        .collect();
    assert_eq!(resolved.len(), 1);
    resolved.into_iter().next().unwrap()
}

fn open(dir: &Path, key: FingerprintKey) -> Archive {
    Archive::open(
        dir,
        ArchiveConfig {
            fingerprint_key: key,
            ..ArchiveConfig::default()
        },
    )
    .unwrap()
}

#[tokio::test]
async fn a_copy_of_the_archive_cannot_test_a_guessed_pin() {
    let host_a = tempfile::tempdir().unwrap();
    let key_file = host_a.path().join("config/reel/fingerprint.key");
    let archive_dir = host_a.path().join("archive");
    let recorded = record_pin(&archive_dir, FingerprintKey::File(key_file.clone())).await;

    // The key is outside the archive, in an owner-only file...
    let key = hex::decode(std::fs::read_to_string(&key_file).unwrap().trim()).unwrap();
    assert_eq!(
        fingerprint_under(&key, PIN),
        recorded,
        "the host's key made it"
    );
    // ...and no byte of it is in the archive, raw or as hex.
    let hex_key = hex::encode(&key);
    for path in files_under(&archive_dir) {
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !bytes.windows(32).any(|w| w == key.as_slice()),
            "{} holds the key",
            path.display()
        );
        let lower = bytes.to_ascii_lowercase();
        assert!(
            !lower.windows(64).any(|w| w == hex_key.as_bytes()),
            "{} holds the key as hex",
            path.display()
        );
    }
    // No key found in the archive reproduces the fingerprint.
    assert_eq!(key_in(&archive_dir, &recorded), None);

    // On another host, without the key file, the copy is no oracle: its
    // archive makes other fingerprints of the same PIN.
    let host_b = tempfile::tempdir().unwrap();
    let copy = host_b.path().join("archive");
    copy_dir(&archive_dir, &copy);
    let other = open(
        &copy,
        FingerprintKey::File(host_b.path().join("fingerprint.key")),
    );
    assert_ne!(other.fingerprint(PIN.as_bytes()).0, recorded);
    drop(other);
    // With the first host's key file, the copy compares: the key travels
    // only if someone carries it.
    let same = open(&copy, FingerprintKey::File(key_file));
    assert_eq!(same.fingerprint(PIN.as_bytes()).0, recorded);
}

/// A host-provided key gives the same fingerprints in every archive (so
/// hosts that share it can compare), and is not written anywhere.
#[tokio::test]
async fn a_host_key_gives_comparable_fingerprints_across_archives() {
    let key = [7u8; 32];
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let fa = record_pin(a.path(), FingerprintKey::Key(key)).await;
    let fb = record_pin(b.path(), FingerprintKey::Key(key)).await;
    assert_eq!(fa, fb);
    assert_eq!(fa, fingerprint_under(&key, PIN));
    assert_eq!(key_in(a.path(), &fa), None, "the host's key is not stored");
    assert_eq!(
        FingerprintKey::from_hex(&hex::encode(key)).map(|k| format!("{k:?}")),
        Ok("Key(***)".to_owned()),
        "Debug never prints a key"
    );
}

/// An archive written by an older reel holds its key in the `meta` tree:
/// the scan finds it (so the scan can find a stored key), and opening the
/// archive removes it and stops using it.
#[test]
fn an_older_archive_loses_its_stored_key_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let key_file = outside.path().join("fingerprint.key");
    drop(open(dir.path(), FingerprintKey::File(key_file.clone())));
    // What an older reel stored.
    let old_key = [0x5au8; 32];
    {
        let db = sled::open(dir.path()).unwrap();
        db.open_tree("meta")
            .unwrap()
            .insert("key", &old_key[..])
            .unwrap();
        db.flush().unwrap();
    }
    let old_fingerprint = fingerprint_under(&old_key, PIN);
    assert_eq!(
        key_in(dir.path(), &old_fingerprint),
        Some(old_key.to_vec()),
        "the scan finds a key kept in the archive"
    );

    let archive = open(dir.path(), FingerprintKey::File(key_file));
    assert_ne!(
        archive.fingerprint(PIN.as_bytes()).0,
        old_fingerprint,
        "the stored key is not used"
    );
    drop(archive);
    let db = sled::open(dir.path()).unwrap();
    let meta = db.open_tree("meta").unwrap();
    assert_eq!(meta.get("key").unwrap(), None, "the stored key is removed");
    assert!(meta.get("format").unwrap().is_some());
}

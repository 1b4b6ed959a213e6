//! The secret canary: no planted secret is ever persisted.
//!
//! Each case plants credentials (overlapping, resolved in a random order,
//! one short), values under secret-named keys (long, short, numeric, with
//! quotes and markup) and run labels under secret-named keys, and runs a
//! careless tool and host that put all of them through every string-typed
//! argument of the public API (see `canary/mod.rs` for the list, and for
//! what is deliberately not planted). Then it shuts the recorder down,
//! exports every run as a tape, and scans every byte of every file under
//! the archive directory, the archive read back (every fact, run record,
//! the run list, every referenced artifact), every tape and the tapes'
//! artifacts: no planted value may appear, raw or escaped (long values: no
//! 12-character window of one; short and numeric ones: not as a whole
//! token). The CLI's output is scanned by `cli/tests/it/secret_canary_cli.rs`.
//!
//! The scan is proven able to find things: a control value planted under
//! non-secret keys must be found by every scan, and
//! `the_scanner_finds_planted_values_in_every_form` checks the scanner on
//! known bytes.

use crate::canary;

use canary::{decoded_archive, files_under, plan, record, Plan, Scanner};
use proptest::prelude::*;
use reel::tape::Tape;

fn check(plan: Plan) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let archive_dir = tmp.path().join("archive");
    let tape_dir = tmp.path().join("tapes");
    std::fs::create_dir_all(&tape_dir).unwrap();
    let key_file = tmp.path().join("config/fingerprint.key");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_, tapes) = runtime.block_on(record(plan.clone(), &archive_dir, &tape_dir, &key_file));
    drop(runtime);
    let scanner = Scanner::new(&plan);

    // The archive directory, byte by byte.
    let mut archive_bytes = 0;
    let mut control_in_archive = false;
    for path in files_under(&archive_dir) {
        let bytes = std::fs::read(&path).unwrap();
        archive_bytes += bytes.len();
        control_in_archive |= scanner.has_control(&bytes);
        let found = scanner.binary_leaks(&bytes);
        prop_assert!(
            found.is_empty(),
            "planted value(s) persisted in {}: {:?}",
            path.display(),
            &found[..found.len().min(5)]
        );
    }
    prop_assert!(archive_bytes > 0, "the archive is empty");
    prop_assert!(
        control_in_archive,
        "the control value is not found in the archive files"
    );

    // The archive read back, and the tapes: text, where short and numeric
    // values are looked for too.
    let mut texts = decoded_archive(&archive_dir, &key_file);
    for path in &tapes {
        let bytes = std::fs::read(path).unwrap();
        let tape = Tape::read(&bytes[..]).unwrap();
        for (digest, data) in tape.artifacts {
            texts.push((format!("{} artifact {digest}", path.display()), data));
        }
        texts.push((path.display().to_string(), bytes));
    }
    for (what, bytes) in &texts {
        let found = scanner.text_leaks(bytes);
        prop_assert!(
            found.is_empty(),
            "planted value(s) persisted in {what}: {:?}",
            &found[..found.len().min(5)]
        );
        if what.starts_with("facts") || what.ends_with(".tape.jsonl") {
            prop_assert!(
                scanner.has_control(bytes),
                "the control value is not found in {what}"
            );
            prop_assert!(
                canary::contains(bytes, b"[REDACTED"),
                "nothing was redacted in {what}: the tool never ran?"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_planted_secret_reaches_the_archive_or_the_tape(plan in plan()) {
        check(plan)?;
    }
}

#[test]
fn the_scanner_finds_planted_values_in_every_form() {
    canary::check_scanner();
}

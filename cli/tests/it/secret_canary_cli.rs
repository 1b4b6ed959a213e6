//! The secret canary, through the `reel` binary: no planted secret reaches
//! what `reel show` (text, `--json`, `--html FILE`) and `reel runs` (table,
//! `--json`) print or write.
//!
//! The plans, the careless tool and host, and the scanner are the
//! recorder's canary (`recorder/tests/it/canary/mod.rs`); this file records
//! with them, runs the real binary over the archive, and scans every byte
//! it printed (standard output and error) or wrote, for every planted
//! value, raw, JSON-, HTML- and script-escaped, short and numeric ones as
//! whole tokens. The control value must be found in every output.

#[path = "../../../recorder/tests/it/canary/mod.rs"]
mod canary;

use std::path::Path;

use canary::{plan, record, Plan, Scanner};
use proptest::prelude::*;

use crate::support::reel_command;

/// Runs `reel --archive <archive> --color never <args>`; returns what it
/// printed (stdout, then stderr).
fn reel(archive: &Path, config: &Path, args: &[&str]) -> (Vec<u8>, Vec<u8>) {
    // Reading needs no key; were one needed, it would come from `config`,
    // not from the user's configuration directory.
    let out = reel_command(config)
        .arg("--archive")
        .arg(archive)
        .args(args)
        .output()
        .expect("the reel binary runs");
    assert!(
        out.status.success(),
        "reel {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.stdout, out.stderr)
}

fn check(plan: Plan) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("archive");
    let tapes = tmp.path().join("tapes");
    let config = tmp.path().join("config");
    std::fs::create_dir_all(&tapes).unwrap();
    let key_file = config.join("recorder.key");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (ids, _) = runtime.block_on(record(plan.clone(), &archive, &tapes, &key_file));
    drop(runtime);
    let scanner = Scanner::new(&plan);

    let mut outputs = vec![
        ("runs".to_owned(), reel(&archive, &config, &["runs"])),
        (
            "runs --json".to_owned(),
            reel(&archive, &config, &["runs", "--json"]),
        ),
    ];
    for id in &ids {
        outputs.push((format!("show {id}"), reel(&archive, &config, &["show", id])));
        outputs.push((
            format!("show {id} --json"),
            reel(&archive, &config, &["show", id, "--json"]),
        ));
        let page = tmp.path().join(format!("{id}.html"));
        let (stdout, stderr) = reel(
            &archive,
            &config,
            &["show", id, "--html", page.to_str().unwrap()],
        );
        let html = std::fs::read(&page).unwrap();
        prop_assert!(!stdout.is_empty() || !html.is_empty());
        outputs.push((format!("show {id} --html (page)"), (html, stderr)));
    }
    for (what, (stdout, stderr)) in &outputs {
        for (stream, bytes) in [("output", stdout), ("standard error", stderr)] {
            let found = scanner.text_leaks(bytes);
            prop_assert!(
                found.is_empty(),
                "planted value(s) in the {stream} of reel {what}: {:?}",
                &found[..found.len().min(5)]
            );
        }
        prop_assert!(
            scanner.has_control(stdout),
            "the control value is not in the output of reel {what}: the scan proves nothing"
        );
    }
    // Reading the archive made no key anywhere.
    prop_assert!(
        !config.join(reel_archive::KEY_FILE).exists(),
        "reading an archive created a fingerprint key"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 6,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_planted_secret_reaches_the_cli_output(plan in plan()) {
        check(plan)?;
    }
}

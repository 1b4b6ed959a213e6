//! A server that goes away before its client: the recording proxy ends the
//! session `failed` and returns (it used to panic, awaiting the server's
//! pump a second time), and the run it recorded is ended.

use std::time::Duration;

use reel::fact::{FactKind, RunStatus};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use reel_mcp::proxy::StdioProxy;
use reel_recorder::{Recorder, RecorderConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_first_ends_the_session_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = dir.path().join("archive");
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([7; 32]),
        serve_live: false,
        ..reel_mcp::proxy::recorder_config()
    };
    let recorder = Recorder::open(&archive, config).await.expect("open");
    // The client's side stays open: only the server can end the session.
    let (client, proxy_side) = tokio::io::duplex(4096);
    let (client_in, client_out) = tokio::io::split(proxy_side);
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        StdioProxy::new("sh", ["-c", "exit 3"])
            .exit_grace(Duration::from_secs(5))
            .run(
                Some(&recorder),
                client_in,
                client_out,
                std::future::pending(),
            ),
    )
    .await
    .expect("the proxy returns once the server is gone")
    .expect("the server started");
    drop(client);
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.exit.and_then(|e| e.code()), Some(3));
    assert!(!outcome.killed);
    let run_id = outcome.run_id.expect("the session was recorded");
    recorder.shutdown().await.expect("shutdown");

    let archive = Archive::open(
        &archive,
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([7; 32]),
            ..ArchiveConfig::default()
        },
    )
    .expect("reopen");
    let facts: Vec<_> = archive
        .facts(&run_id, ..)
        .expect("the run's facts")
        .collect::<Result<_, _>>()
        .expect("readable");
    let last = facts.last().expect("facts");
    assert!(
        matches!(&last.kind, FactKind::RunEnded(e) if e.status == RunStatus::Failed),
        "the run ends failed: {last:?}"
    );
}

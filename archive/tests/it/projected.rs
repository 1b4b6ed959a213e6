//! `append_projected`: the projection of another store (`reel sync`) takes
//! up a run it left incomplete where it stands, seqs and hash chain, and
//! refuses what `append` refuses.

use reel::fact::{Fact, FactKind, Producer, Progress, RunEnded, RunStarted, RunStatus};
use reel::run::RunState;
use reel_archive::{Archive, ArchiveConfig, ArchiveError, FingerprintKey};
use serde_json::json;

fn open(dir: &std::path::Path) -> Archive {
    Archive::open(
        dir,
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([7; 32]),
            ..ArchiveConfig::default()
        },
    )
    .unwrap()
}

fn fact(seq: u64, kind: FactKind) -> Fact {
    Fact {
        seq,
        at: seq as i64 + 1,
        offset: seq,
        call: None,
        kind,
    }
}

fn started() -> Fact {
    fact(
        0,
        FactKind::RunStarted(RunStarted {
            run_id: "r".into(),
            session_id: None,
            identity: None,
            producer: Producer {
                name: "t".into(),
                version: "1".into(),
            },
            labels: Default::default(),
            teardown_scopes: vec![],
        }),
    )
}

fn progress(seq: u64) -> Fact {
    fact(
        seq,
        FactKind::Progress(Progress {
            payload: json!({ "seq": seq }),
            count: seq,
            delivered: false,
        }),
    )
}

#[test]
fn an_incomplete_projected_run_is_taken_up_where_it_stands() {
    let dir = tempfile::tempdir().unwrap();
    let archive = open(dir.path());
    archive
        .append_projected("r", vec![started(), progress(1)])
        .unwrap();
    archive.flush().unwrap();
    drop(archive);

    // Reopened: the run is incomplete, as recovery marks it.
    let archive = open(dir.path());
    assert_eq!(archive.run("r").unwrap().state, RunState::Incomplete);
    // `append` keeps refusing it; the projection takes it up.
    assert!(matches!(
        archive.append_numbered("r", vec![progress(2)]),
        Err(ArchiveError::RunClosed { .. })
    ));
    // A seq that does not follow is refused, and stores nothing.
    assert!(archive.append_projected("r", vec![progress(5)]).is_err());
    assert_eq!(
        archive.append_projected("r", vec![progress(2)]).unwrap(),
        2..3
    );
    let end = fact(
        3,
        FactKind::RunEnded(RunEnded {
            status: RunStatus::Completed,
        }),
    );
    archive.append_projected("r", vec![end]).unwrap();
    assert_eq!(archive.run("r").unwrap().state, RunState::Completed);
    let seqs: Vec<u64> = archive
        .facts("r", ..)
        .unwrap()
        .map(|f| f.unwrap().seq)
        .collect();
    assert_eq!(seqs, vec![0, 1, 2, 3]);
    // The chain runs on across the reopening.
    let report = archive.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
    // An ended run is not reopened.
    assert!(matches!(
        archive.append_projected("r", vec![progress(4)]),
        Err(ArchiveError::RunClosed { .. })
    ));
}

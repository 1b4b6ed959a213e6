//! New runs' ordinals (see `Archive::new_ordinal`).

use reel_core::fact::{FactKind, NewFact, Producer, RunStarted};

use crate::{keys, Archive, ArchiveConfig};

fn started(run: &str) -> Vec<NewFact> {
    vec![NewFact {
        at: 1,
        offset: 1,
        call: None,
        kind: FactKind::RunStarted(RunStarted {
            run_id: run.into(),
            session_id: None,
            identity: None,
            producer: Producer {
                name: "ordinals".into(),
                version: "0".into(),
            },
            labels: Default::default(),
            teardown_scopes: vec![],
        }),
    }]
}

/// A run the store holds at an ordinal sled's id generator has not
/// reached (as after a crash, when the journal's replay puts back runs
/// whose ids sled's generator never persisted) is never taken by a new
/// run: new ordinals start above every one the store holds.
#[test]
fn a_new_run_never_takes_an_ordinal_the_store_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let held = 5_000_000u64;
    {
        let archive = Archive::open(dir.path(), ArchiveConfig::default()).expect("open");
        archive.append("a", started("a")).expect("append");
        let record = archive
            .trees()
            .runs
            .get(keys::run_key(archive.ordinal("a").expect("ordinal")));
        let record = record.expect("read").expect("a record");
        archive
            .trees()
            .runs
            .insert(keys::run_key(held), record)
            .expect("insert");
        archive.checkpoint().expect("checkpoint");
    }
    let archive = Archive::open(dir.path(), ArchiveConfig::default()).expect("reopen");
    archive.append("b", started("b")).expect("append");
    archive.append("c", started("c")).expect("append");
    let (b, c) = (
        archive.ordinal("b").expect("b"),
        archive.ordinal("c").expect("c"),
    );
    assert!(b > held && c > b, "b {b}, c {c}, held {held}");
}

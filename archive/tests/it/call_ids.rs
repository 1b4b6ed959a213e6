//! A call id is unique within its stream (seed 000: `toolCallId` is the
//! "unique id of THIS tool invocation"): a second `call.started` with an id
//! the stream has started already is refused by `append` (in one batch and
//! across batches), by an import (of facts, and of a tape read from bytes),
//! and the tape check reports it on its line. (`verify` of a stored
//! duplicate is shown in `archive/src/verify.rs`'s tests, which forge the
//! block no append would write.)

use reel::fact::{
    CallEnded, CallMode, CallOutcome, CallStarted, Fact, FactKind, NewFact, Producer, RunEnded,
    RunStarted, RunStatus,
};
use reel::run::RunRecord;
use reel::tape::{parse_line, Seen, Tape, TapeCheck};
use reel_archive::{Archive, ArchiveConfig, ArchiveError, TapeExt};
use serde_json::json;

fn open(dir: &std::path::Path) -> Archive {
    Archive::open(dir, ArchiveConfig::default()).expect("archive opens")
}

fn started(run_id: &str) -> FactKind {
    FactKind::RunStarted(RunStarted {
        run_id: run_id.into(),
        session_id: None,
        identity: None,
        producer: Producer {
            name: "call-ids".into(),
            version: "0".into(),
        },
        labels: Default::default(),
        teardown_scopes: vec![],
    })
}

fn call(call_id: &str, tool: &str) -> FactKind {
    FactKind::CallStarted(CallStarted {
        call_id: call_id.into(),
        tool_name: tool.into(),
        tool_id: None,
        parent_call: None,
        iteration: 0,
        invocation_id: None,
        mode: CallMode::Async,
        protocol: None,
        platform: None,
        client_info: None,
        args: json!({}),
        wanted: None,
        attached: None,
        spec: None,
        dispatch_tools: None,
        outside_run: None,
    })
}

fn ended() -> FactKind {
    FactKind::CallEnded(CallEnded {
        outcome: CallOutcome::Ok { result: json!(1) },
        duration_ns: 1,
        invocation_id: None,
    })
}

fn new(call: Option<&str>, kind: FactKind) -> NewFact {
    NewFact {
        at: 1,
        offset: 1,
        call: call.map(str::to_owned),
        kind,
    }
}

/// run.started, c1 started and ended, then `second` started (and ended),
/// then run.ended: numbered from 0.
fn stream(run_id: &str, second: &str) -> Vec<Fact> {
    [
        new(None, started(run_id)),
        new(Some("c1"), call("c1", "search")),
        new(Some("c1"), ended()),
        new(Some(second), call(second, "fetch")),
        new(Some(second), ended()),
        new(
            None,
            FactKind::RunEnded(RunEnded {
                status: RunStatus::Completed,
            }),
        ),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, f)| f.with_seq(i as u64))
    .collect()
}

const RULE: &str = "call.started at seq 3: a second call.started for call id \"c1\" (first started at seq 1): a call id is unique within its run";

#[test]
fn append_refuses_a_second_call_started_with_a_taken_id_in_one_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = open(dir.path());
    let batch: Vec<NewFact> = stream("r", "c1").into_iter().map(Fact::into_new).collect();
    match archive.append("r", batch) {
        Err(ArchiveError::InvalidFacts { detail, .. }) => {
            assert!(detail.contains(RULE), "{detail}")
        }
        other => panic!("append should be refused, got {other:?}"),
    }
    assert!(matches!(
        archive.run("r"),
        Err(ArchiveError::UnknownRun { .. })
    ));
    // A distinct id is taken as it is.
    let batch: Vec<NewFact> = stream("r", "c2").into_iter().map(Fact::into_new).collect();
    assert_eq!(archive.append("r", batch).expect("append"), 0..6);
    assert!(archive.verify().expect("verify").is_ok());
}

#[test]
fn append_refuses_a_taken_id_in_a_later_batch_and_stores_nothing_of_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = open(dir.path());
    let facts = stream("r", "c1");
    let batches: Vec<Vec<NewFact>> = vec![
        facts[..3].iter().cloned().map(Fact::into_new).collect(),
        facts[3..5].iter().cloned().map(Fact::into_new).collect(),
    ];
    archive
        .append("r", batches[0].clone())
        .expect("first batch");
    match archive.append("r", batches[1].clone()) {
        Err(ArchiveError::InvalidFacts { detail, .. }) => {
            assert!(detail.contains(RULE), "{detail}");
            assert!(
                detail.contains("nothing of the batch was stored"),
                "{detail}"
            );
        }
        other => panic!("append should be refused, got {other:?}"),
    }
    assert_eq!(archive.run("r").expect("record").facts, 3);
    // The refused batch left the run where it stood: the next batch, with
    // a fresh id, follows on at seq 3, and a later duplicate of a call
    // started in an accepted batch is still refused.
    let fresh = vec![
        new(Some("c2"), call("c2", "fetch")),
        new(Some("c2"), ended()),
    ];
    assert_eq!(archive.append("r", fresh).expect("append"), 3..5);
    let again = vec![new(Some("c2"), call("c2", "fetch"))];
    match archive.append("r", again) {
        Err(ArchiveError::InvalidFacts { detail, .. }) => assert!(
            detail.contains("a second call.started for call id \"c2\" (first started at seq 3)"),
            "{detail}"
        ),
        other => panic!("append should be refused, got {other:?}"),
    }
    assert!(archive.verify().expect("verify").is_ok());
}

#[test]
fn import_refuses_a_duplicate_call_id_from_facts_and_from_a_tape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = open(dir.path());
    match archive.import_run(stream("r", "c1")) {
        Err(ArchiveError::ImportBreaksRule {
            index, violation, ..
        }) => {
            assert_eq!(index, 3);
            assert!(violation.to_string().contains(RULE), "{violation}");
        }
        other => panic!("import should be refused, got {other:?}"),
    }
    // The same stream as a tape's bytes: refused naming its line (the
    // header is line 1, so seq 3 is line 5).
    let facts = stream("r", "c1");
    let mut record = RunRecord::from_first(&facts[0]).expect("a record");
    for f in &facts {
        record.observe(f);
    }
    let mut bytes = Vec::new();
    Tape::new(record, facts, vec![])
        .write(&mut bytes)
        .expect("write");
    let (tape, lines) = Tape::read_with_lines(&bytes[..]).expect("the tape reads");
    let err = tape
        .import_with_lines(&archive, &lines)
        .expect_err("import refuses the tape");
    let message = err.to_string();
    assert!(message.starts_with("line 5: "), "{message}");
    assert!(message.contains(RULE), "{message}");
    // The tape check (the language server's, line by line) finds it on
    // the same line.
    let mut check = TapeCheck::default();
    let mut faults = Vec::new();
    for (i, text) in String::from_utf8(bytes).expect("utf-8").lines().enumerate() {
        let line = parse_line(i + 1, text).expect("each line parses");
        check.line(i + 1, Seen::of(&line), &mut faults);
    }
    check.finish(&mut faults);
    let faults: Vec<String> = faults
        .iter()
        .map(|f| format!("line {}: {}", f.line, f.kind))
        .collect();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(faults[0].starts_with("line 5: "), "{faults:?}");
    assert!(faults[0].contains(RULE), "{faults:?}");
    let report = archive.verify().expect("verify");
    assert!(report.is_ok() && report.runs == 0, "{report:?}");
}

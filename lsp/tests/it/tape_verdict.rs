//! The editor and `reel import`/`verify` agree on what is damage, on every
//! tape: valid tapes, and tapes mutated as hands and disks mutate them
//! (lines dropped, duplicated, swapped; a seq changed; the header moved or
//! removed; a fact after the end; a byte changed in a line; a blank line;
//! the last newline there or not).
//!
//! The verdict of the core: [`Tape::read_with_lines`], then
//! [`Tape::check_whole`], then the [`StreamRules`] of the stream the first
//! fact names over every fact (what `Archive::import_run` applies), the
//! first refusal naming its line. The verdict of the language server: the
//! error diagnostics of the document. They must agree on whether the tape
//! is damaged, and the line the core names must carry an error in the
//! editor (the editor goes on past the first problem and shows more).

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm};
use reel_core::fact::{FactKind, Log, RunEnded, RunStatus};
use reel_core::rules::{head_names, StreamRules};
use reel_core::run::RunRecord;
use reel_core::tape::{Tape, TapeError};
use reel_core::Fact;
use reel_lsp::analysis::{diagnostics, ReportInput};
use reel_lsp::document::Document;
use reel_lsp::position::Encoding;
use serde_json::Value;
use tower_lsp_server::ls_types::DiagnosticSeverity;

/// `hello`, an artifact a tape may carry.
const HELLO: (&str, &[u8]) = (
    "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
    b"hello",
);

/// The line (1-based) of the first thing `reel import` refuses the tape
/// for, `None` for a tape it takes.
fn core_verdict(text: &str) -> Option<usize> {
    let line_of = |e: TapeError| match e {
        TapeError::Line { line, .. } => line,
        other => panic!("a tape in memory fails by its lines only: {other}"),
    };
    let (tape, lines) = match Tape::read_with_lines(text.as_bytes()) {
        Ok(read) => read,
        Err(e) => return Some(line_of(e)),
    };
    if let Err(e) = tape.check_whole(&lines) {
        return Some(line_of(e));
    }
    let first = tape.facts.first().map(|f| &f.kind);
    let mut rules = StreamRules::new(first.and_then(head_names).unwrap_or_default());
    tape.facts
        .iter()
        .position(|f| rules.check(f).is_err())
        .map(|i| lines.facts[i])
}

/// The lines (1-based) the language server marks as errors.
fn editor_errors(text: &str) -> Vec<usize> {
    let mut doc = Document::new(text);
    let mut lines: Vec<usize> = diagnostics(doc.view(), Encoding::Utf16, ReportInput::None)
        .into_iter()
        .filter(|d| d.severity == Some(DiagnosticSeverity::ERROR))
        .map(|d| d.range.start.line as usize + 1)
        .collect();
    lines.dedup();
    lines
}

fn check(text: &str) -> Result<(), TestCaseError> {
    let core = core_verdict(text);
    let editor = editor_errors(text);
    match core {
        None => prop_assert!(
            editor.is_empty(),
            "import takes the tape, the editor marks lines {editor:?} as errors:\n{text}"
        ),
        Some(line) => prop_assert!(
            editor.contains(&line),
            "import refuses the tape at line {line}, the editor marks {editor:?}:\n{text}"
        ),
    }
    Ok(())
}

/// A run's facts that keep the stream rules: the strategy's facts without
/// a second head, an end or a second `call.started` of one call id (the
/// strategy's ids may repeat), numbered from 0, ended or not.
fn valid_facts() -> impl Strategy<Value = Vec<Fact>> {
    (reel_core::strategy::facts_of_run("run-p"), any::<bool>()).prop_map(|(facts, ended)| {
        let mut started = std::collections::HashSet::new();
        let mut facts: Vec<Fact> = facts
            .into_iter()
            .enumerate()
            .filter(|(i, f)| {
                *i == 0 || !(f.kind.begins_stream() || matches!(f.kind, FactKind::RunEnded(_)))
            })
            .filter(|(_, f)| match &f.kind {
                FactKind::CallStarted(c) => started.insert(c.call_id.clone()),
                _ => true,
            })
            .map(|(_, f)| f)
            .collect();
        if ended {
            facts.push(Fact {
                seq: 0,
                at: 0,
                offset: 0,
                call: None,
                kind: FactKind::RunEnded(RunEnded {
                    status: RunStatus::Completed,
                }),
            });
        }
        for (i, f) in facts.iter_mut().enumerate() {
            f.seq = i as u64;
        }
        facts
    })
}

/// The lines of a tape of `facts` as `reel export` writes it.
fn written(facts: Vec<Fact>, artifact: bool) -> Vec<String> {
    let mut run = RunRecord::from_first(&facts[0]).expect("a run.started first");
    for f in &facts {
        run.observe(f);
    }
    let artifacts = match artifact {
        true => vec![(HELLO.0.to_owned(), HELLO.1.to_vec())],
        false => vec![],
    };
    let mut bytes = Vec::new();
    Tape::new(run, facts, artifacts)
        .write(&mut bytes)
        .expect("a tape writes");
    String::from_utf8(bytes)
        .expect("a tape is UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// One way a tape is damaged. Indexes are taken modulo the line count.
#[derive(Debug, Clone)]
enum Mutation {
    Drop(usize),
    Duplicate(usize),
    Swap(usize, usize),
    /// The seq of a fact line set to this.
    Seq(usize, u64),
    /// The header moved to before this line.
    MoveHeader(usize),
    RemoveHeader,
    /// A fact after the last fact, numbered as the next.
    FactAfterEnd,
    /// An ASCII byte of a line replaced by another printable one.
    Byte(usize, usize, u8),
    /// A blank line before this line.
    Blank(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let i = || 0..64usize;
    prop_oneof![
        i().prop_map(Mutation::Drop),
        i().prop_map(Mutation::Duplicate),
        (i(), i()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (i(), prop_oneof![0..12u64, Just(u64::MAX), any::<u64>()])
            .prop_map(|(a, s)| Mutation::Seq(a, s)),
        i().prop_map(Mutation::MoveHeader),
        Just(Mutation::RemoveHeader),
        Just(Mutation::FactAfterEnd),
        (i(), any::<usize>(), 0x20u8..0x7f).prop_map(|(l, at, b)| Mutation::Byte(l, at, b)),
        i().prop_map(Mutation::Blank),
    ]
}

fn apply(lines: &mut Vec<String>, m: &Mutation) {
    if lines.is_empty() {
        return;
    }
    let n = lines.len();
    match *m {
        Mutation::Drop(i) => {
            lines.remove(i % n);
        }
        Mutation::Duplicate(i) => {
            let line = lines[i % n].clone();
            lines.insert(i % n, line);
        }
        Mutation::Swap(a, b) => lines.swap(a % n, b % n),
        Mutation::Seq(i, seq) => {
            let i = i % n;
            if let Ok(Value::Object(mut fact)) = serde_json::from_str::<Value>(&lines[i]) {
                if fact.contains_key("seq") {
                    fact.insert("seq".into(), seq.into());
                    lines[i] = Value::Object(fact).to_string();
                }
            }
        }
        Mutation::MoveHeader(to) => {
            let header = lines.remove(0);
            lines.insert(to % n, header);
        }
        Mutation::RemoveHeader => {
            lines.remove(0);
        }
        Mutation::FactAfterEnd => {
            let last = lines
                .iter()
                .rposition(|l| l.starts_with("{\"seq\""))
                .unwrap_or(0);
            let seq = serde_json::from_str::<Value>(&lines[last])
                .ok()
                .and_then(|v| v["seq"].as_u64())
                .map_or(0, |s| s.saturating_add(1));
            let fact = Fact {
                seq,
                at: 0,
                offset: 0,
                call: None,
                kind: FactKind::Log(Log {
                    level: reel_core::fact::Level::Info,
                    logger: None,
                    subflow: None,
                    data: "late".into(),
                    delivered: true,
                    in_flight: Vec::new(),
                }),
            };
            let line = serde_json::to_string(&fact).expect("a fact serializes");
            lines.insert(last + 1, line);
        }
        Mutation::Blank(i) => lines.insert(i % n, String::new()),
        Mutation::Byte(l, at, b) => {
            let line = &mut lines[l % n];
            let ascii: Vec<usize> = line
                .bytes()
                .enumerate()
                .filter(|(_, c)| c.is_ascii())
                .map(|(i, _)| i)
                .collect();
            if let Some(&at) = ascii.get(at % ascii.len().max(1)) {
                line.replace_range(at..=at, std::str::from_utf8(&[b]).expect("ASCII"));
            }
        }
    }
}

fn config() -> Config {
    Config {
        cases: 512,
        rng_algorithm: RngAlgorithm::XorShift,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn valid_tapes_are_valid_in_both(facts in valid_facts(), artifact in any::<bool>()) {
        let text = written(facts, artifact).join("\n") + "\n";
        prop_assert_eq!(core_verdict(&text), None);
        check(&text)?;
    }

    #[test]
    fn mutated_tapes_get_one_verdict(
        facts in valid_facts(),
        artifact in any::<bool>(),
        mutations in proptest::collection::vec(mutation(), 1..4),
        last_newline in any::<bool>(),
    ) {
        let mut lines = written(facts, artifact);
        for m in &mutations {
            apply(&mut lines, m);
        }
        let mut text = lines.join("\n");
        if last_newline {
            text.push('\n');
        }
        check(&text)?;
    }

    /// Any facts the strategy makes, also ones that break the rules (a
    /// second run.started, facts after run.ended, unknown kinds), as
    /// `reel export` would write them.
    #[test]
    fn any_facts_get_one_verdict(
        facts in reel_core::strategy::facts_of_run("run-p"),
        mutations in proptest::collection::vec(mutation(), 0..2),
    ) {
        let mut lines = written(facts, false);
        for m in &mutations {
            apply(&mut lines, m);
        }
        let text = lines.join("\n") + "\n";
        check(&text)?;
    }
}

/// Tapes written out by hand, one per kind of damage, each with the line
/// both name.
#[test]
fn each_damage_is_named_at_its_line_by_both() {
    let facts = |kinds: Vec<FactKind>| -> Vec<Fact> {
        kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| Fact {
                seq: i as u64,
                at: 0,
                offset: 0,
                call: None,
                kind,
            })
            .collect()
    };
    let started: Fact = serde_json::from_value(serde_json::json!({
        "seq": 0, "at": 0, "offset": 0, "call": null, "kind": "run.started",
        "data": { "run_id": "r", "producer": { "name": "hand", "version": "1" } }
    }))
    .expect("a run.started");
    let started = started.kind;
    let log = || {
        FactKind::Log(Log {
            level: reel_core::fact::Level::Info,
            logger: None,
            subflow: None,
            data: "x".into(),
            delivered: true,
            in_flight: Vec::new(),
        })
    };
    let ended = || {
        FactKind::RunEnded(RunEnded {
            status: RunStatus::Completed,
        })
    };
    let good = written(facts(vec![started.clone(), log(), log(), ended()]), true);
    let cases: Vec<(&str, Vec<Mutation>, Option<usize>)> = vec![
        ("valid", vec![], None),
        (
            "a fact after run.ended",
            vec![Mutation::FactAfterEnd],
            Some(6),
        ),
        (
            "a second run.started",
            vec![Mutation::Duplicate(1)],
            Some(3),
        ),
        ("a log dropped", vec![Mutation::Drop(2)], Some(3)),
        (
            "run.ended dropped: cut short",
            vec![Mutation::Drop(4)],
            Some(1),
        ),
        ("a seq changed", vec![Mutation::Seq(3, 7)], Some(4)),
        ("two logs swapped", vec![Mutation::Swap(2, 3)], Some(3)),
        ("header moved", vec![Mutation::MoveHeader(3)], Some(1)),
        ("header removed", vec![Mutation::RemoveHeader], Some(1)),
        ("the artifact first", vec![Mutation::Swap(1, 5)], Some(3)),
    ];
    for (name, mutations, want) in cases {
        let mut lines = good.clone();
        for m in &mutations {
            apply(&mut lines, m);
        }
        let text = lines.join("\n") + "\n";
        assert_eq!(core_verdict(&text), want, "{name}:\n{text}");
        if let Err(e) = check(&text) {
            panic!("{name}: {e}");
        }
    }
}

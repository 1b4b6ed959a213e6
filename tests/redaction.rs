//! Value scrubbing reaches every string of every fact.
//!
//! The property plants a distinct known secret into every string a fact of
//! any kind holds (found through the fact's serialised form, not through
//! the redactor's own walk: JSON strings, object keys, labels and their
//! keys, names, messages, ids), redacts the fact, and checks that no planted
//! value survives, except in the identifier fields reel leaves alone on
//! purpose (listed below, by kind and JSON pointer). A string field added to
//! the fact model later is planted like the others, so it fails this test
//! until the redactor walks it or it is listed here with its reason.

use proptest::prelude::*;
use reel::context::Secret;
use reel::fact::{Fact, FactKind};
use reel::redact::{KnownSecrets, Redactor};
use serde_json::{Map, Value};

/// Identifier fields left alone: (kind, JSON pointer into its data, `*`
/// matching one segment). Run and session ids and the identity are the
/// host's (also in the head of a call outside any run); its stream key,
/// call ids, digests, origins, key hashes and fingerprints are
/// assigned or derived by reel. Scrubbing them would break the archive's
/// own references (a run's id is its key, a call's id its envelope's).
const LEFT_ALONE: &[(&str, &str)] = &[
    ("run.started", "/run_id"),
    ("run.started", "/session_id"),
    ("run.started", "/identity/*"),
    ("call.started", "/call_id"),
    ("call.started", "/parent_call"),
    ("call.started", "/outside_run/key"),
    ("call.started", "/outside_run/session_id"),
    ("call.started", "/outside_run/identity/*"),
    ("call.started", "/wanted/*/digest"),
    ("call.started", "/wanted/*/scope/*"),
    ("call.started", "/wanted/*/origin/*"),
    ("credential.resolved", "/fingerprint"),
    ("artifact.put", "/meta/digest"),
    ("artifact.put", "/meta/scope/*"),
    ("artifact.put", "/meta/origin/*"),
    ("artifact.get", "/meta/digest"),
    ("artifact.get", "/meta/scope/*"),
    ("artifact.get", "/meta/origin/*"),
    ("teardown.registered", "/key_hash"),
    ("teardown.refused", "/key_hash"),
    ("teardown.ran", "/key_hash"),
];

fn left_alone(kind: &str, pointer: &str) -> bool {
    LEFT_ALONE.iter().any(|(k, pattern)| {
        let (a, b): (Vec<&str>, Vec<&str>) =
            (pattern.split('/').collect(), pointer.split('/').collect());
        *k == kind && a.len() == b.len() && a.iter().zip(&b).all(|(p, s)| *p == "*" || p == s)
    })
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// A string of a serialised fact: a value, or an object key (the last step).
#[derive(Debug, Clone)]
struct Pos {
    path: Vec<Step>,
    key: bool,
}

impl Pos {
    fn pointer(&self) -> String {
        self.path
            .iter()
            .map(|s| match s {
                Step::Key(k) => format!("/{}", k.replace('~', "~0").replace('/', "~1")),
                Step::Index(i) => format!("/{i}"),
            })
            .collect()
    }
}

fn positions(v: &Value, path: &mut Vec<Step>, out: &mut Vec<Pos>) {
    match v {
        Value::String(_) => out.push(Pos {
            path: path.clone(),
            key: false,
        }),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Step::Index(i));
                positions(item, path, out);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                path.push(Step::Key(k.clone()));
                out.push(Pos {
                    path: path.clone(),
                    key: true,
                });
                positions(item, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at<'v>(v: &'v mut Value, path: &[Step]) -> &'v mut Value {
    path.iter().fold(v, |v, s| match s {
        Step::Key(k) => &mut v[k.as_str()],
        Step::Index(i) => &mut v[*i],
    })
}

/// `data` with the string at `pos` replaced by `planted`.
fn plant(data: &Value, pos: &Pos, planted: &str) -> Value {
    let mut data = data.clone();
    let (last, parent) = pos.path.split_last().expect("a string inside the data");
    if pos.key {
        let Step::Key(old) = last else {
            unreachable!("a key position ends in a key")
        };
        let obj = at(&mut data, parent).as_object_mut().expect("an object");
        let renamed: Map<String, Value> = std::mem::take(obj)
            .into_iter()
            .map(|(k, v)| (if &k == old { planted.to_owned() } else { k }, v))
            .collect();
        *obj = renamed;
    } else {
        *at(&mut data, &pos.path) = Value::String(planted.to_owned());
    }
    data
}

fn data_of(kind: &FactKind) -> Value {
    let fact = Fact {
        seq: 0,
        at: 0,
        offset: 0,
        call: None,
        kind: kind.clone(),
    };
    serde_json::to_value(&fact).unwrap()["data"].take()
}

fn check(kind: FactKind) -> Result<(), TestCaseError> {
    let name = kind.name().to_owned();
    let mut data = data_of(&kind);
    let mut found = Vec::new();
    positions(&data, &mut Vec::new(), &mut found);
    // Values first (they move no path), then keys, innermost first (a
    // renamed key moves the paths below it).
    let (values, mut keys): (Vec<Pos>, Vec<Pos>) = found.into_iter().partition(|p| !p.key);
    keys.reverse();
    let mut planted: Vec<(String, String)> = Vec::new();
    for pos in values.into_iter().chain(keys) {
        let value = format!("ZQPLANTED{:04}XQ", planted.len());
        let candidate = plant(&data, &pos, &value);
        // A string the fact really holds: it reads back and keeps the
        // planted value (an enum tag or a field name does not).
        let Ok(back) = FactKind::from_parts(&name, candidate) else {
            continue;
        };
        let reread = data_of(&back);
        if !reread.to_string().contains(&value) {
            continue;
        }
        data = reread;
        planted.push((value, pos.pointer()));
    }
    let mut kind = FactKind::from_parts(&name, data).unwrap();
    let mut secrets = KnownSecrets::new();
    for (value, _) in &planted {
        secrets.add(Secret::new(value.clone()));
    }
    Redactor::default().redact_fact(&mut kind, &mut secrets);
    let text = data_of(&kind).to_string();
    for (value, pointer) in &planted {
        if left_alone(&name, pointer) {
            prop_assert!(
                text.contains(value.as_str()),
                "{name} {pointer} ({value}) is an identifier and must stay as it is: {text}"
            );
        } else {
            prop_assert!(
                !text.contains(value.as_str()),
                "a known secret planted at {name} {pointer} ({value}) survived redaction: {text}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_known_secret_planted_in_any_string_of_any_fact_is_scrubbed(kind in reel::strategy::fact_kind()) {
        check(kind)?;
    }
}

/// The planter finds the strings it must: a fact whose every field is
/// filled plants a value in each of its names and texts, and none in its
/// enum tags.
#[test]
fn the_planter_reaches_names_and_skips_tags() {
    use reel::fact::{Effect, EffectOutcome};
    let kind = FactKind::Effect(Effect {
        name: "api.call".into(),
        request: serde_json::json!({"k": "v"}),
        outcome: EffectOutcome::Err("boom".into()),
    });
    let data = data_of(&kind);
    let mut found = Vec::new();
    positions(&data, &mut Vec::new(), &mut found);
    let real: Vec<String> = found
        .iter()
        .filter(|pos| {
            FactKind::from_parts("effect", plant(&data, pos, "ZQPLANTEDXQ"))
                .is_ok_and(|k| data_of(&k).to_string().contains("ZQPLANTEDXQ"))
        })
        .map(|p| format!("{}{}", p.pointer(), if p.key { " (key)" } else { "" }))
        .collect();
    assert_eq!(
        real,
        ["/name", "/request/k (key)", "/request/k", "/outcome/err"]
    );
}

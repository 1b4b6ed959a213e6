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

/// The usage fields of the common model APIs: counts and limits, never
/// secrets, though many hold the word `token`.
const USAGE_KEYS: &[&str] = &[
    // OpenAI (chat completions and responses).
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "max_tokens",
    "max_completion_tokens",
    "input_tokens",
    "output_tokens",
    // Anthropic.
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    // Gemini.
    "promptTokenCount",
    "candidatesTokenCount",
    "totalTokenCount",
    "cachedContentTokenCount",
    "thoughtsTokenCount",
    "maxOutputTokens",
    // Bedrock (Converse).
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "maxTokens",
    // Generic.
    "token_count",
    "token_usage",
    "tokens_per_second",
    "num_tokens",
];

/// Keys that name a credential: their values are redacted and learned.
const SECRET_KEYS: &[&str] = &[
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "api_token",
    "auth_token",
    "bearer_token",
    "x-auth-token",
    "sessionToken",
    "csrf_token",
];

/// The usage objects of the APIs above as they send them (nested where
/// they nest), numbers drawn.
fn usage_shape() -> impl Strategy<Value = Value> {
    use serde_json::json;
    let n = || 0u64..200_000;
    prop_oneof![
        // OpenAI chat completions, with the nested details.
        (n(), n(), n(), n(), n()).prop_map(|(p, c, t, cached, reasoning)| json!({
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": t,
                      "prompt_tokens_details": {"cached_tokens": cached},
                      "completion_tokens_details": {"reasoning_tokens": reasoning}},
            "request": {"max_tokens": c, "max_completion_tokens": t}
        })),
        // OpenAI responses and Anthropic messages.
        (n(), n(), n(), n(), n()).prop_map(|(i, o, w, r, m)| json!({
            "usage": {"input_tokens": i, "output_tokens": o,
                      "cache_creation_input_tokens": w, "cache_read_input_tokens": r},
            "max_tokens": m
        })),
        // Gemini.
        (n(), n(), n(), n(), n(), n()).prop_map(|(p, c, t, cached, th, m)| json!({
            "usageMetadata": {"promptTokenCount": p, "candidatesTokenCount": c,
                              "totalTokenCount": t, "cachedContentTokenCount": cached,
                              "thoughtsTokenCount": th},
            "generationConfig": {"maxOutputTokens": m}
        })),
        // Bedrock Converse.
        (n(), n(), n(), n()).prop_map(|(i, o, t, m)| json!({
            "usage": {"inputTokens": i, "outputTokens": o, "totalTokens": t},
            "inferenceConfig": {"maxTokens": m}
        })),
        // Generic counters, one level deep or at the top.
        (n(), n(), n(), n(), any::<bool>()).prop_map(|(c, u, s, k, nested)| {
            let v = json!({"token_count": c, "token_usage": u,
                           "tokens_per_second": s as f64 / 10.0, "num_tokens": k});
            if nested {
                json!({"stats": v})
            } else {
                v
            }
        }),
    ]
}

/// The numbers of a JSON value, as text.
fn numbers(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|i| numbers(i, out)),
        Value::Object(map) => map.values().for_each(|i| numbers(i, out)),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    /// A usage object is recorded as sent, beside a secret-named member
    /// that is redacted; none of its numbers becomes a known secret, so a
    /// later fact quoting them (as text and as numbers) is kept too.
    #[test]
    fn usage_telemetry_is_kept_and_teaches_no_secret(
        usage in usage_shape(),
        secret_key in proptest::sample::select(SECRET_KEYS),
        secret in "[a-zA-Z]{12,20}",
    ) {
        use reel::fact::{Level, Log, Progress};
        use reel::redact::MARKER;
        let r = Redactor::default();
        let mut secrets = KnownSecrets::new();
        let mut payload = usage.clone();
        payload[secret_key] = Value::String(secret.clone());
        let mut kind = FactKind::Progress(Progress { payload, count: 1, delivered: false });
        r.redact_fact(&mut kind, &mut secrets);
        let FactKind::Progress(p) = &kind else { unreachable!() };
        let mut want = usage.clone();
        want[secret_key] = Value::String(MARKER.into());
        prop_assert_eq!(&p.payload, &want);
        prop_assert_eq!(secrets.len(), 1, "only the credential is learned");
        // A later fact quoting every number of the usage.
        let mut quoted = Vec::new();
        numbers(&usage, &mut quoted);
        let text = format!("used {} ({})", quoted.join(" tokens, "), secret);
        let mut later = FactKind::Log(Log {
            level: Level::Info,
            logger: None,
            subflow: None,
            data: serde_json::json!({"message": text, "usage": usage}),
            delivered: false, in_flight: Vec::new(),
        });
        r.redact_fact(&mut later, &mut secrets);
        let FactKind::Log(l) = &later else { unreachable!() };
        let want_text = format!("used {} ({})", quoted.join(" tokens, "), MARKER);
        prop_assert_eq!(&l.data["message"], &Value::String(want_text));
        prop_assert_eq!(&l.data["usage"], &usage);
    }
}

/// Each usage key alone is no secret key, and each credential key is one.
#[test]
fn usage_keys_are_not_secret_keys_and_credential_keys_are() {
    let r = Redactor::default();
    let misjudged: Vec<(&str, bool)> = USAGE_KEYS
        .iter()
        .map(|k| (*k, false))
        .chain(SECRET_KEYS.iter().map(|k| (*k, true)))
        .filter(|(k, secret)| r.is_secret_key(k) != *secret)
        .collect();
    assert_eq!(misjudged, [], "(key, should be secret)");
}

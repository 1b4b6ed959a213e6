//! [proptest] strategies for the fact model, for property tests in every
//! crate of the workspace (compiled only with the `proptest` feature).
//!
//! The strategies aim at the corners that break encodings: arbitrary nested
//! JSON payloads, Unicode strings with multi-byte characters, emoji and
//! control characters, integers at both ends of `i64`/`u64`, finite floats
//! (integral ones included), and optional fields that are absent (`None`),
//! empty (`Some("")`, `Some(empty map)`, an identity with every part absent)
//! or full. Sizes are bounded so that a few hundred cases of [`fact`] run in
//! well under a second; in debug builds, proptest's default ChaCha generator
//! dominates the cost, and `rng_algorithm: RngAlgorithm::XorShift` in the
//! `ProptestConfig` makes generation several times faster.
//!
//! In another crate, enable the feature for tests only:
//! `reel = { workspace = true, features = ["proptest"] }` under
//! `[dev-dependencies]`.
//!
//! ```
//! use proptest::prelude::*;
//! use proptest::strategy::ValueTree;
//! use proptest::test_runner::TestRunner;
//!
//! let mut runner = TestRunner::deterministic();
//! let facts = reel_core::strategy::facts_of_run("run-1")
//!     .new_tree(&mut runner)
//!     .unwrap()
//!     .current();
//! assert_eq!(facts[0].kind.name(), "run.started");
//! assert!(facts.iter().enumerate().all(|(i, f)| f.seq == i as u64));
//! ```

use std::collections::BTreeMap;

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::fact::*;

/// A Unicode string of up to 12 characters, drawn so that the awkward ones
/// come up often: ASCII, JSON's escape characters (`"`, `\`, control
/// characters, `\n`, `\r`, NUL), multi-byte letters, combining marks, the
/// line and paragraph separators, a byte-order mark, emoji (astral plane,
/// surrogate pairs in JSON's `\u` escapes) and any other `char`.
pub fn unicode_string() -> impl Strategy<Value = String> {
    vec(unicode_char(), 0..12).prop_map(|chars| chars.into_iter().collect())
}

/// One character, weighted towards the ones [`unicode_string`] describes.
pub fn unicode_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => proptest::char::range(' ', '~'),
        2 => prop::sample::select(vec![
            '"', '\\', '/', '\n', '\r', '\t', '\0', '\u{7}', '\u{1b}', '\u{7f}', '\u{85}',
            '\u{a0}', '\u{2028}', '\u{2029}', '\u{feff}', '\u{fffd}', '\u{ffff}',
        ]),
        1 => proptest::char::range('\u{0}', '\u{1f}'),
        2 => proptest::char::range('\u{a1}', '\u{52f}'),
        1 => proptest::char::range('\u{300}', '\u{36f}'),
        1 => proptest::char::range('\u{4e00}', '\u{9fff}'),
        2 => proptest::char::range('\u{1f300}', '\u{1faff}'),
        2 => any::<char>(),
    ]
}

/// A finite `f64`: any normal or subnormal value of either sign, zeros,
/// integral values (which JSON writes as `3.0`) and short decimals.
pub fn finite_f64() -> impl Strategy<Value = f64> {
    use proptest::num::f64 as f;
    prop_oneof![
        4 => f::POSITIVE | f::NEGATIVE | f::NORMAL | f::SUBNORMAL | f::ZERO,
        1 => (-1_000_000i64..1_000_000).prop_map(|i| i as f64),
        1 => (-100_000i64..100_000).prop_map(|i| i as f64 / 100.0),
        1 => prop::sample::select(vec![
            0.0,
            -0.0,
            0.1,
            1.0,
            -1.0,
            1e300,
            -1e-300,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::EPSILON,
            9_007_199_254_740_992.0,
        ]),
    ]
}

/// A JSON number: non-negative integers as `u64`, negative ones as `i64`
/// (the two forms `serde_json` itself produces), or a finite float.
pub fn json_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => any::<u64>().prop_map(Value::from),
        1 => (0u64..1000).prop_map(Value::from),
        2 => (i64::MIN..0).prop_map(Value::from),
        3 => finite_f64().prop_map(|f| Value::from(serde_json::Number::from_f64(f).expect("finite"))),
    ]
}

/// A JSON value nested up to 4 levels deep, with up to 6 items per array or
/// object and about 48 nodes in all: null, booleans, numbers (see
/// [`json_number`]), Unicode strings, arrays and objects with Unicode keys,
/// empty ones included.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        json_number(),
        unicode_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec((unicode_string(), inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

/// A JSON object (possibly empty) whose values are [`json_value`]s.
pub fn json_object() -> impl Strategy<Value = Value> {
    vec((unicode_string(), json_value()), 0..5)
        .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>()))
}

/// An optional string: absent, empty, or arbitrary Unicode.
pub fn opt_string() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some(String::new())),
        unicode_string().prop_map(Some),
    ]
}

/// An identity whose parts are each absent, empty or arbitrary (so
/// `Identity::default()`, every part absent, comes up too).
pub fn identity() -> impl Strategy<Value = Identity> {
    (opt_string(), opt_string(), opt_string()).prop_map(|(tenant, principal, conversation)| {
        Identity {
            tenant,
            principal,
            conversation,
        }
    })
}

/// An optional identity: absent, present with every part absent, or any
/// [`identity`].
pub fn opt_identity() -> impl Strategy<Value = Option<Identity>> {
    prop_oneof![
        Just(None),
        Just(Some(Identity::default())),
        identity().prop_map(Some),
    ]
}

/// A `sha256:<64 hex>` digest (of no bytes in particular).
pub fn digest() -> impl Strategy<Value = String> {
    any::<[u8; 32]>().prop_map(|d| format!("sha256:{}", hex::encode(d)))
}

/// An artifact claim ticket with arbitrary fields.
pub fn artifact_meta() -> impl Strategy<Value = ArtifactMeta> {
    (
        unicode_string(),
        digest(),
        any::<u64>(),
        prop_oneof![
            Just("text/markdown".to_owned()),
            Just("application/octet-stream".to_owned()),
            unicode_string(),
        ],
        identity(),
        (opt_string(), unicode_string()),
    )
        .prop_map(
            |(id, digest, size, media_type, scope, (run_id, call_id))| ArtifactMeta {
                id,
                digest,
                size,
                media_type,
                scope,
                origin: Origin { run_id, call_id },
            },
        )
}

/// An optional map: absent, present and empty, or with up to 3 entries.
fn opt_map<V: std::fmt::Debug + Clone + 'static>(
    value: impl Strategy<Value = V> + 'static,
) -> impl Strategy<Value = Option<BTreeMap<String, V>>> {
    prop_oneof![
        Just(None),
        Just(Some(BTreeMap::new())),
        btree_map(unicode_string(), value, 1..4).prop_map(Some),
    ]
}

fn teardown_scope() -> impl Strategy<Value = TeardownScope> {
    prop::sample::select(vec![
        TeardownScope::Call,
        TeardownScope::Run,
        TeardownScope::Session,
    ])
}

fn credential_mode() -> impl Strategy<Value = CredentialMode> {
    prop::sample::select(vec![CredentialMode::Declared, CredentialMode::Pulled])
}

/// A `run.started` for the run `run_id`.
pub fn run_started(run_id: impl Into<String>) -> impl Strategy<Value = RunStarted> {
    let run_id = run_id.into();
    (
        opt_string(),
        opt_identity(),
        (unicode_string(), unicode_string()),
        btree_map(unicode_string(), unicode_string(), 0..3),
        vec(teardown_scope(), 0..4),
    )
        .prop_map(
            move |(session_id, identity, (name, version), labels, teardown_scopes)| RunStarted {
                run_id: run_id.clone(),
                session_id,
                identity,
                producer: Producer { name, version },
                labels,
                teardown_scopes,
            },
        )
}

/// The head of a call outside any run, stored under `key`: what a
/// `run.started` says, said of the call.
pub fn outside_run(key: impl Into<String>) -> impl Strategy<Value = OutsideRun> {
    run_started(key).prop_map(|r| OutsideRun {
        key: r.run_id,
        session_id: r.session_id,
        identity: r.identity,
        producer: r.producer,
        labels: r.labels,
        teardown_scopes: r.teardown_scopes,
    })
}

fn opt_bool() -> impl Strategy<Value = Option<bool>> {
    prop::option::of(any::<bool>())
}

/// A tool spec: every optional part absent, empty or set; schemas are
/// arbitrary JSON (the record keeps whatever a spec says).
pub fn tool_spec() -> impl Strategy<Value = crate::spec::ToolSpec> {
    (
        (unicode_string(), opt_string(), opt_string(), opt_string()),
        prop::option::of((opt_bool(), opt_bool(), opt_bool(), opt_bool()).prop_map(
            |(read_only_hint, destructive_hint, idempotent_hint, open_world_hint)| {
                crate::spec::Annotations {
                    read_only_hint,
                    destructive_hint,
                    idempotent_hint,
                    open_world_hint,
                }
            },
        )),
        (
            json_value(),
            // A schema is an object or a boolean, never `null` (which
            // reads back as an absent output schema).
            prop::option::of(json_value().prop_filter("null is not a schema", |v| !v.is_null())),
            any::<bool>(),
        ),
        (vec(unicode_string(), 0..3), vec(unicode_string(), 0..3)),
    )
        .prop_map(
            |(
                (name, id, title, description),
                annotations,
                (input_schema, output_schema, sync),
                (needs, wants),
            )| crate::spec::ToolSpec {
                name,
                id,
                title,
                description,
                annotations,
                input_schema,
                output_schema,
                mode: if sync {
                    CallMode::Sync
                } else {
                    CallMode::Async
                },
                needs,
                wants,
            },
        )
}

fn call_started() -> impl Strategy<Value = CallStarted> {
    (
        (
            unicode_string(),
            unicode_string(),
            opt_string(),
            opt_string(),
        ),
        (any::<u32>(), opt_string(), any::<bool>()),
        (opt_string(), opt_string()),
        prop_oneof![
            Just(None),
            (unicode_string(), opt_string(), opt_string()).prop_map(|(name, version, title)| {
                Some(ClientInfo {
                    name,
                    version,
                    title,
                })
            }),
        ],
        json_value(),
        opt_map(artifact_meta()),
        prop::option::of(
            prop::array::uniform6(any::<bool>()).prop_map(|[c, a, e, d, l, g]| Attached {
                credentials: c,
                artifacts: a,
                elicitor: e,
                dispatch: d,
                log_listener: l,
                content_logging: g,
            }),
        ),
        (
            prop::option::of(tool_spec().prop_map(Box::new)),
            prop::option::of(vec(unicode_string(), 0..3)),
            prop::option::of(
                unicode_string()
                    .prop_flat_map(outside_run)
                    .prop_map(Box::new),
            ),
        ),
    )
        .prop_map(
            |(
                (call_id, tool_name, tool_id, parent_call),
                (iteration, invocation_id, sync),
                (protocol, platform),
                client_info,
                args,
                wanted,
                attached,
                (spec, dispatch_tools, outside_run),
            )| CallStarted {
                call_id,
                tool_name,
                tool_id,
                parent_call,
                iteration,
                invocation_id,
                mode: if sync {
                    CallMode::Sync
                } else {
                    CallMode::Async
                },
                protocol,
                platform,
                client_info,
                args,
                wanted,
                attached,
                spec,
                dispatch_tools,
                outside_run,
            },
        )
}

fn elicit_outcome() -> impl Strategy<Value = ElicitOutcome> {
    prop_oneof![
        json_value().prop_map(|content| ElicitOutcome::Accept { content }),
        Just(ElicitOutcome::Decline),
        Just(ElicitOutcome::Cancel),
        Just(ElicitOutcome::Timeout),
        unicode_string().prop_map(|message| ElicitOutcome::Error { message }),
    ]
}

fn teardown_outcome() -> impl Strategy<Value = TeardownOutcome> {
    prop_oneof![
        Just(TeardownOutcome::Ok),
        unicode_string().prop_map(|message| TeardownOutcome::Error { message }),
        Just(TeardownOutcome::TimedOut),
    ]
}

fn call_outcome() -> impl Strategy<Value = CallOutcome> {
    prop_oneof![
        json_value().prop_map(|result| CallOutcome::Ok { result }),
        (
            unicode_string(),
            // A structured error is a value: `null` would read back as none.
            proptest::option::of(json_value().prop_filter("a value", |v| !v.is_null())),
        )
            .prop_map(|(error, result)| CallOutcome::Error { error, result }),
        opt_string().prop_map(|reason| CallOutcome::Aborted { reason }),
    ]
}

/// A kind name this version does not know (never one of
/// [`FactKind::KNOWN`]), e.g. written by a newer reel.
pub fn unknown_kind_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("quantum.entangled".to_owned()),
        Just("call.paused".to_owned()),
        Just(String::new()),
        unicode_string(),
    ]
    .prop_filter("a kind this version knows", |name| {
        !FactKind::KNOWN.contains(&name.as_str())
    })
}

/// Any fact kind: every variant of [`FactKind`] equally often, with
/// arbitrary fields, including [`FactKind::Unknown`] with a name not in
/// [`FactKind::KNOWN`] and an object as `data`.
pub fn fact_kind() -> impl Strategy<Value = FactKind> {
    // More than 10 arms: `prop_oneof!` builds a `Union` of boxed strategies,
    // which keeps value trees small (nested unboxed unions of these arms
    // overflow a test thread's stack in debug builds).
    prop_oneof![
        run_started_any().prop_map(FactKind::RunStarted),
        call_started().prop_map(FactKind::CallStarted),
        opt_string().prop_map(|reason| FactKind::CancelRequested(CancelRequested { reason })),
        (1..=u64::MAX).prop_map(|count| FactKind::ProgressDropped(ProgressDropped { count })),
        (
            any::<String>(),
            any::<String>(),
            any::<String>(),
            any::<String>(),
            any::<String>()
        )
            .prop_map(|(point, fact, field, encoding, rule)| {
                FactKind::RedactionTripped(RedactionTripped {
                    point,
                    fact,
                    field,
                    encoding,
                    rule,
                })
            }),
        (json_value(), opt_string(), opt_string()).prop_map(|(value, stage, note)| {
            FactKind::CallOutput(CallOutput { value, stage, note })
        }),
        (call_outcome(), any::<u64>(), opt_string()).prop_map(
            |(outcome, duration_ns, invocation_id)| {
                FactKind::CallEnded(CallEnded {
                    outcome,
                    duration_ns,
                    invocation_id,
                })
            }
        ),
        prop::sample::select(vec![
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled
        ])
        .prop_map(|status| FactKind::RunEnded(RunEnded { status })),
        (unicode_string(), credential_mode(), opt_string()).prop_map(|(need, mode, kind)| {
            FactKind::CredentialRequested(CredentialRequested { need, mode, kind })
        }),
        (
            unicode_string(),
            credential_mode(),
            opt_string(),
            unicode_string(),
            proptest::option::of(any::<i64>()),
        )
            .prop_map(|(need, mode, kind, fp, expires_at)| {
                FactKind::CredentialResolved(CredentialResolved {
                    need,
                    mode,
                    kind,
                    fingerprint: Fingerprint(fp),
                    expires_at,
                })
            }),
        (unicode_string(), credential_mode(), unicode_string()).prop_map(|(need, mode, reason)| {
            FactKind::CredentialFailed(CredentialFailed { need, mode, reason })
        }),
        (unicode_string(), credential_mode(), unicode_string()).prop_map(|(need, mode, reason)| {
            FactKind::CredentialRefused(CredentialRefused { need, mode, reason })
        }),
        artifact_meta().prop_map(|meta| FactKind::ArtifactPut(ArtifactPut { meta })),
        (unicode_string(), proptest::option::of(artifact_meta()))
            .prop_map(|(id, meta)| FactKind::ArtifactGet(ArtifactGet { id, meta })),
        (any::<bool>(), opt_string(), unicode_string()).prop_map(|(put, id, reason)| {
            FactKind::ArtifactRefused(ArtifactRefused {
                op: if put {
                    ArtifactOp::Put
                } else {
                    ArtifactOp::Get
                },
                id,
                reason,
            })
        }),
        // Counts from 1: a count of 0 is "not numbered yet", which
        // `Archive::append` numbers (see `reel::sequence`).
        (json_value(), 1..=u64::MAX).prop_map(|(payload, count)| FactKind::Progress(Progress {
            payload,
            count,
            delivered: false
        })),
        (
            prop::sample::select(Level::ALL.to_vec()),
            opt_string(),
            opt_string(),
            json_value(),
            any::<bool>(),
            proptest::collection::vec(unicode_string(), 0..3),
        )
            .prop_map(|(level, logger, subflow, data, delivered, in_flight)| {
                FactKind::Log(Log {
                    level,
                    logger,
                    subflow,
                    data,
                    delivered,
                    in_flight,
                })
            }),
        (
            unicode_string(),
            json_value(),
            any::<bool>(),
            proptest::option::of(any::<u64>()),
            opt_string(),
            opt_string(),
        )
            .prop_map(|(message, schema, form, ttl_ms, url, elicitation_id)| {
                FactKind::ElicitRequested(ElicitRequested {
                    message,
                    schema,
                    mode: if form {
                        ElicitMode::Form
                    } else {
                        ElicitMode::Url
                    },
                    ttl_ms,
                    url,
                    elicitation_id,
                })
            }),
        (unicode_string(), any::<bool>(), unicode_string()).prop_map(|(message, form, reason)| {
            FactKind::ElicitRefused(ElicitRefused {
                message,
                mode: if form {
                    ElicitMode::Form
                } else {
                    ElicitMode::Url
                },
                reason,
            })
        }),
        (elicit_outcome(), vec(unicode_string(), 0..3), any::<bool>()).prop_map(
            |(outcome, validation_errors, pre_resolved)| {
                FactKind::ElicitAnswered(ElicitAnswered {
                    outcome,
                    validation_errors,
                    pre_resolved,
                })
            }
        ),
        (
            unicode_string(),
            json_value(),
            prop_oneof![
                json_value().prop_map(EffectOutcome::Ok),
                unicode_string().prop_map(EffectOutcome::Err),
            ],
        )
            .prop_map(|(name, request, outcome)| FactKind::Effect(Effect {
                name,
                request,
                outcome
            })),
        any::<i64>().prop_map(|unix_nanos| FactKind::Clock(Clock { unix_nanos })),
        any::<u64>().prop_map(|value| FactKind::Random(Random { value })),
        (
            teardown_scope(),
            unicode_string(),
            any::<bool>(),
            any::<u64>(),
            any::<i64>()
        )
            .prop_map(|(scope, key_hash, first, registrations, registered_at)| {
                FactKind::TeardownRegistered(TeardownRegistered {
                    scope,
                    key_hash,
                    first,
                    registrations,
                    registered_at,
                })
            }),
        (
            teardown_scope(),
            unicode_string(),
            vec(teardown_scope(), 0..4),
            unicode_string(),
        )
            .prop_map(|(scope, key_hash, honoured, reason)| {
                FactKind::TeardownRefused(TeardownRefused {
                    scope,
                    key_hash,
                    honoured,
                    reason,
                })
            }),
        (
            teardown_scope(),
            unicode_string(),
            teardown_outcome(),
            any::<u64>(),
            any::<u64>(),
            any::<i64>()
        )
            .prop_map(
                |(scope, key_hash, outcome, duration_ns, registrations, last_registered_at)| {
                    FactKind::TeardownRan(TeardownRan {
                        scope,
                        key_hash,
                        outcome,
                        duration_ns,
                        registrations,
                        last_registered_at,
                    })
                }
            ),
        model_called().prop_map(FactKind::ModelCalled),
        (unknown_kind_name(), json_object())
            .prop_map(|(kind, data)| FactKind::Unknown { kind, data }),
    ]
}

fn model_called() -> impl Strategy<Value = ModelCalled> {
    (
        (unicode_string(), opt_string(), opt_string(), opt_string()),
        (
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            vec(unicode_string(), 0..3),
            any::<u64>(),
            opt_string(),
        ),
        (
            proptest::option::of(json_value()),
            proptest::option::of(json_value()),
            proptest::option::of(json_value()),
        ),
    )
        .prop_map(
            |(
                (operation, provider, model, response_model),
                (input_tokens, output_tokens, finish_reasons, duration_ns, error),
                (input, output, tool_definitions),
            )| ModelCalled {
                operation,
                provider,
                model,
                response_model,
                input_tokens,
                output_tokens,
                finish_reasons,
                duration_ns,
                error,
                // `null` reads back as absent: never generated.
                input: input.filter(|v| !v.is_null()),
                output: output.filter(|v| !v.is_null()),
                tool_definitions: tool_definitions.filter(|v| !v.is_null()),
            },
        )
}

fn run_started_any() -> impl Strategy<Value = RunStarted> {
    unicode_string().prop_flat_map(run_started)
}

/// Fails to compile when a variant is added to [`FactKind`] without a
/// strategy for it in [`fact_kind`]: add both.
#[allow(dead_code)]
fn every_variant_has_a_strategy(kind: &FactKind) {
    match kind {
        FactKind::RunStarted(_)
        | FactKind::CallStarted(_)
        | FactKind::CredentialRequested(_)
        | FactKind::CredentialResolved(_)
        | FactKind::CredentialFailed(_)
        | FactKind::CredentialRefused(_)
        | FactKind::ArtifactPut(_)
        | FactKind::ArtifactGet(_)
        | FactKind::ArtifactRefused(_)
        | FactKind::Progress(_)
        | FactKind::ProgressDropped(_)
        | FactKind::RedactionTripped(_)
        | FactKind::Log(_)
        | FactKind::ElicitRequested(_)
        | FactKind::ElicitAnswered(_)
        | FactKind::ElicitRefused(_)
        | FactKind::TeardownRegistered(_)
        | FactKind::TeardownRefused(_)
        | FactKind::TeardownRan(_)
        | FactKind::Effect(_)
        | FactKind::Clock(_)
        | FactKind::Random(_)
        | FactKind::CancelRequested(_)
        | FactKind::CallOutput(_)
        | FactKind::CallEnded(_)
        | FactKind::RunEnded(_)
        | FactKind::ModelCalled(_)
        | FactKind::Unknown { .. } => {}
    }
}

/// A fact with an arbitrary envelope (any `seq`, `at` and `offset`; `call`
/// absent, empty or arbitrary) around any [`fact_kind`].
pub fn fact() -> impl Strategy<Value = Fact> {
    (
        any::<u64>(),
        any::<i64>(),
        any::<u64>(),
        opt_string(),
        fact_kind(),
    )
        .prop_map(|(seq, at, offset, call, kind)| Fact {
            seq,
            at,
            offset,
            call,
            kind,
        })
}

/// The facts of one run `run_id`: a `run.started` (run-level, `call: None`)
/// followed by up to 8 arbitrary facts, with seqs consecutive from 0, as a
/// tape or an archive holds them. The later facts are not a plausible
/// story (any kind may follow any other), only well-numbered.
pub fn facts_of_run(run_id: impl Into<String>) -> impl Strategy<Value = Vec<Fact>> {
    (
        run_started(run_id),
        any::<i64>(),
        vec(
            (any::<i64>(), any::<u64>(), opt_string(), fact_kind()),
            0..8,
        ),
    )
        .prop_map(|(started, at, rest)| {
            let mut facts = Vec::with_capacity(rest.len() + 1);
            facts.push(Fact {
                seq: 0,
                at,
                offset: 0,
                call: None,
                kind: FactKind::RunStarted(started),
            });
            for (at, offset, call, kind) in rest {
                facts.push(Fact {
                    seq: facts.len() as u64,
                    at,
                    offset,
                    call,
                    kind,
                });
            }
            facts
        })
}

//! `decode_fact_view` never disagrees with `decode_fact`: over every kind
//! of fact, a view is the fact `decode_fact` reads; over damaged bytes
//! (a byte flipped, the encoding cut short, bytes added) both read the
//! same fact or fail with the same error; and a progress report encoded
//! as the encoder writes it is read in place (else the view saves
//! nothing).

use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngAlgorithm};
use reel_core::codec::{decode_fact, decode_fact_view, encode_fact, FactView, MAX_DECODE_DEPTH};
use reel_core::fact::{Fact, FactKind, Progress};
use reel_core::strategy;
use serde_json::{json, Value};

/// `bytes` read both ways agree: the same fact, or the same error.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let owned = decode_fact(bytes);
    let view = decode_fact_view(bytes);
    match (view, owned) {
        (Ok(v), Ok(f)) => {
            if let FactView::Progress(p) = &v {
                prop_assert_eq!(p.encoded(), bytes);
                let FactKind::Progress(Progress { count, .. }) = &f.kind else {
                    return Err(TestCaseError::fail(format!(
                        "read in place as progress, decoded as {}",
                        f.kind.name()
                    )));
                };
                prop_assert_eq!(
                    (p.seq, p.at, p.offset, p.call, p.count),
                    (f.seq, f.at, f.offset, f.call.as_deref(), *count)
                );
            }
            prop_assert_eq!(v.seq(), f.seq);
            prop_assert_eq!(v.into_fact(), Ok(f));
        }
        (Err(a), Err(b)) => prop_assert_eq!(a, b),
        (v, f) => {
            return Err(TestCaseError::fail(format!(
                "the view reads {v:?} where decode_fact reads {f:?}"
            )))
        }
    }
    Ok(())
}

fn encoded(fact: &Fact) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_fact(fact, &mut bytes).expect("a fact encodes");
    bytes
}

/// A progress report with any envelope, payload and count (0 included).
fn progress() -> impl Strategy<Value = Fact> {
    (
        strategy::fact(),
        strategy::json_value(),
        prop_oneof![Just(0u64), any::<u64>()],
    )
        .prop_map(|(mut fact, payload, count)| {
            fact.kind = FactKind::Progress(Progress {
                payload,
                count,
                delivered: false,
            });
            fact
        })
}

/// Damage done to an encoding.
#[derive(Debug, Clone)]
enum Damage {
    /// Byte `at` (modulo the length) xor `with` (not 0).
    Flip { at: usize, with: u8 },
    /// Cut to `at` bytes (modulo the length).
    Cut { at: usize },
    /// Bytes added at the end.
    Extend(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => (any::<usize>(), 1..=u8::MAX).prop_map(|(at, with)| Damage::Flip { at, with }),
        1 => any::<usize>().prop_map(|at| Damage::Cut { at }),
        1 => proptest::collection::vec(any::<u8>(), 1..4).prop_map(Damage::Extend),
    ]
}

fn damaged(mut bytes: Vec<u8>, damage: &[Damage]) -> Vec<u8> {
    for d in damage {
        match d {
            Damage::Flip { at, with } if !bytes.is_empty() => {
                let i = at % bytes.len();
                bytes[i] ^= with;
            }
            Damage::Cut { at } => bytes.truncate(at % (bytes.len() + 1)),
            Damage::Extend(more) => bytes.extend_from_slice(more),
            Damage::Flip { .. } => {}
        }
    }
    bytes
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        rng_algorithm: RngAlgorithm::ChaCha,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Every kind (unknown kinds included) reads alike both ways.
    #[test]
    fn every_fact_reads_alike_as_a_view(fact in strategy::fact()) {
        let bytes = encoded(&fact);
        check(&bytes)?;
        prop_assert_eq!(decode_fact_view(&bytes).and_then(FactView::into_fact), Ok(fact));
    }

    /// A progress report as the encoder writes it is read in place.
    #[test]
    fn a_progress_report_is_read_in_place(fact in progress()) {
        let bytes = encoded(&fact);
        check(&bytes)?;
        prop_assert!(
            matches!(decode_fact_view(&bytes), Ok(FactView::Progress(_))),
            "decoded whole: {:?}", fact
        );
    }

    /// Damaged progress reports (the facts read in place) read alike.
    #[test]
    fn a_damaged_progress_report_reads_alike(
        fact in progress(),
        damage in proptest::collection::vec(damage(), 1..3),
    ) {
        check(&damaged(encoded(&fact), &damage))?;
    }

    /// Damaged facts of every kind read alike.
    #[test]
    fn any_damaged_fact_reads_alike(
        fact in strategy::fact(),
        damage in proptest::collection::vec(damage(), 1..3),
    ) {
        check(&damaged(encoded(&fact), &damage))?;
    }
}

/// A payload nested `depth` arrays deep.
fn nested(depth: usize) -> Value {
    (0..depth).fold(json!("core"), |v, _| Value::Array(vec![v]))
}

/// Around the depth `decode_fact` refuses: the view reads what it reads and
/// refuses what it refuses (the payloads are encoded by hand, past what
/// the encoder itself would write).
#[test]
fn payloads_near_the_depth_bound_read_alike() {
    for depth in (MAX_DECODE_DEPTH - 20)..(MAX_DECODE_DEPTH + 5) {
        let fact = Fact {
            seq: 1,
            at: 2,
            offset: 3,
            call: Some("c1".into()),
            kind: FactKind::Progress(Progress {
                payload: nested(depth),
                count: 1,
                delivered: false,
            }),
        };
        let mut bytes = Vec::new();
        reel_core::codec::encode_fact_serde(&fact, &mut bytes).expect("encodes");
        check(&bytes).unwrap_or_else(|e| panic!("depth {depth}: {e}"));
    }
}

/// A progress report encoded otherwise than the encoder writes it (fields
/// reordered, an unknown field, a count written signed, a payload with a
/// binary string or a key that is no string) is decoded whole: the same
/// fact, or the same error.
#[test]
fn other_encodings_of_a_progress_report_read_alike() {
    use rmp::encode as w;
    let envelope = |out: &mut Vec<u8>, fields: u32| {
        out.push(1);
        w::write_map_len(out, fields).unwrap();
        w::write_str(out, "seq").unwrap();
        w::write_uint(out, 4).unwrap();
        w::write_str(out, "at").unwrap();
        w::write_sint(out, -6).unwrap();
        w::write_str(out, "offset").unwrap();
        w::write_uint(out, 5).unwrap();
        w::write_str(out, "call").unwrap();
        w::write_str(out, "c1").unwrap();
        w::write_str(out, "kind").unwrap();
        w::write_str(out, "progress").unwrap();
        w::write_str(out, "data").unwrap();
    };
    let mut cases: Vec<Vec<u8>> = Vec::new();
    // count before payload.
    let mut b = Vec::new();
    envelope(&mut b, 6);
    w::write_map_len(&mut b, 2).unwrap();
    w::write_str(&mut b, "count").unwrap();
    w::write_uint(&mut b, 3).unwrap();
    w::write_str(&mut b, "payload").unwrap();
    w::write_str(&mut b, "x").unwrap();
    cases.push(b);
    // A count written signed, an unknown field, a binary payload, an
    // integer key, an extension.
    for payload in [
        &[0xa1, b'x'][..],
        &[0xc4, 1, b'x'],
        &[0x81, 0x01, 0xc0],
        &[0xd4, 1, 2],
        &[0x81, 0xa1, 0xff, 0xc0],
    ] {
        for (count, extra) in [
            (&[0x03][..], false),
            (&[0xd0, 0x03], false),
            (&[0x03], true),
        ] {
            let mut b = Vec::new();
            envelope(&mut b, 6);
            w::write_map_len(&mut b, 2 + u32::from(extra)).unwrap();
            w::write_str(&mut b, "payload").unwrap();
            b.extend_from_slice(payload);
            w::write_str(&mut b, "count").unwrap();
            b.extend_from_slice(count);
            if extra {
                w::write_str(&mut b, "later").unwrap();
                w::write_nil(&mut b).unwrap();
            }
            cases.push(b);
        }
    }
    for (i, bytes) in cases.iter().enumerate() {
        check(bytes).unwrap_or_else(|e| panic!("case {i}: {e}"));
    }
    // The plainest of them is read in place, and the envelope is its own.
    let Ok(FactView::Progress(p)) = decode_fact_view(&cases[1]) else {
        panic!("not read in place");
    };
    assert_eq!(
        (p.seq, p.at, p.offset, p.call, p.count),
        (4, -6, 5, Some("c1"), 3)
    );
}

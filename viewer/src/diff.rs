//! Two runs' facts aligned by position, as `reel diff` and the console's
//! compare page show them: one list of field differences per position,
//! found with the core's matcher (`reel_core::matching`, the rules the
//! replayer applies), ignoring what always differs between two runs
//! ([`volatile`]: times, durations, run ids, invocation ids, clock reads).
//!
//! A value a tool got from a clock read and passed on (into an effect's
//! request or result, an output) is the same read in both runs: a field
//! that holds run A's clock read where run B holds the clock read aligned
//! with it is not a difference either. The same goes for artifact ids,
//! which stores draw at random (the ids of two aligned `artifact.put`s
//! are one id), and for an artifact scope made from the run id
//! (`run:<id>`).
//!
//! ```
//! use reel_viewer::diff::align;
//! let rows = align(&[], &[]);
//! assert!(rows.is_empty());
//! ```

use reel_core::fact::FactKind;
use reel_core::matching::{diff_kinds, FieldDiff, IgnoreRule};
use reel_core::Fact;
use serde_json::Value;

/// Fields that differ between any two runs and are not compared.
pub fn volatile() -> Vec<IgnoreRule> {
    [
        ("run.started", "/run_id"),
        ("call.started", "/invocation_id"),
        ("call.ended", "/invocation_id"),
        ("call.ended", "/duration_ns"),
        ("teardown.ran", "/duration_ns"),
        ("teardown.ran", "/last_registered_at"),
        ("teardown.registered", "/registered_at"),
        ("clock", "/unix_nanos"),
        ("artifact.put", "/meta/origin/run_id"),
        ("artifact.get", "/meta/origin/run_id"),
    ]
    .into_iter()
    .map(|(kind, pointer)| IgnoreRule {
        kind: Some(kind.into()),
        pointer: pointer.into(),
    })
    .collect()
}

/// The differences at each position of the two runs (`max(a, b)` rows;
/// an empty list where the facts match). A position one run lacks is the
/// difference `fact` (the kind present vs none).
pub fn align(a: &[Fact], b: &[Fact]) -> Vec<Vec<FieldDiff>> {
    let ignore = volatile();
    // Aligned clock reads, artifact ids and run scopes so far: (run A's
    // value, run B's value).
    let mut same: Vec<(Value, Value)> = Vec::new();
    (0..a.len().max(b.len()))
        .map(|i| match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) => {
                match (&x.kind, &y.kind) {
                    (FactKind::Clock(cx), FactKind::Clock(cy)) => {
                        same.push((cx.unix_nanos.into(), cy.unix_nanos.into()));
                    }
                    (FactKind::ArtifactPut(px), FactKind::ArtifactPut(py)) => {
                        same.push((px.meta.id.clone().into(), py.meta.id.clone().into()));
                    }
                    (FactKind::RunStarted(rx), FactKind::RunStarted(ry)) => {
                        same.push((
                            format!("run:{}", rx.run_id).into(),
                            format!("run:{}", ry.run_id).into(),
                        ));
                    }
                    _ => {}
                }
                let mut d = diff_kinds(&x.kind, &y.kind, &ignore);
                d.retain(|d| {
                    !same.iter().any(|(ca, cb)| {
                        d.expected.as_ref() == Some(ca) && d.actual.as_ref() == Some(cb)
                    })
                });
                if x.call != y.call {
                    d.insert(
                        0,
                        FieldDiff {
                            path: "call".into(),
                            expected: x.call.clone().map(Into::into),
                            actual: y.call.clone().map(Into::into),
                        },
                    );
                }
                d
            }
            (fa, fb) => vec![FieldDiff {
                path: "fact".into(),
                expected: fa.map(|f| f.kind.name().into()),
                actual: fb.map(|f| f.kind.name().into()),
            }],
        })
        .collect()
}

/// The first position whose facts differ, in `rows` from [`align`].
pub fn first_difference(rows: &[Vec<FieldDiff>]) -> Option<usize> {
    rows.iter().position(|d| !d.is_empty())
}

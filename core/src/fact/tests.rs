use std::fmt;

use serde::Serialize;

use super::*;
use serde_json::{json, Value};

/// The serde name of `value`: the string it serialises to, or the tag
/// `tag` of the object it serialises to.
fn serde_name<T: Serialize>(value: &T, tag: Option<&str>) -> String {
    let v = serde_json::to_value(value).expect("serialises");
    match (tag, &v) {
        (None, Value::String(s)) => s.clone(),
        (Some(tag), Value::Object(o)) => o[tag].as_str().expect("tag").to_owned(),
        // An externally tagged variant with data: its one key.
        (None, Value::Object(o)) if o.len() == 1 => o.keys().next().unwrap().clone(),
        _ => panic!("unexpected serde form {v}"),
    }
}

fn check<T: Serialize + fmt::Display>(
    values: &[T],
    tag: Option<&str>,
    as_str: fn(&T) -> &'static str,
) {
    for v in values {
        let name = serde_name(v, tag);
        assert_eq!(as_str(v), name);
        assert_eq!(v.to_string(), name);
    }
}

#[test]
fn enum_names_are_serde_names() {
    use TeardownScope as S;
    check(&[S::Call, S::Run, S::Session], None, S::as_str);
    check(&[CallMode::Sync, CallMode::Async], None, CallMode::as_str);
    check(
        &[CredentialMode::Declared, CredentialMode::Pulled],
        None,
        CredentialMode::as_str,
    );
    check(&Level::ALL, None, Level::as_str);
    check(
        &[ElicitMode::Form, ElicitMode::Url],
        None,
        ElicitMode::as_str,
    );
    check(
        &[
            ElicitOutcome::Accept { content: json!({}) },
            ElicitOutcome::Decline,
            ElicitOutcome::Cancel,
            ElicitOutcome::Error {
                message: "m".into(),
            },
            ElicitOutcome::Timeout,
        ],
        Some("outcome"),
        ElicitOutcome::as_str,
    );
    check(
        &[
            TeardownOutcome::Ok,
            TeardownOutcome::Error {
                message: "m".into(),
            },
            TeardownOutcome::TimedOut,
        ],
        Some("outcome"),
        TeardownOutcome::as_str,
    );
    check(
        &[EffectOutcome::Ok(json!(1)), EffectOutcome::Err("e".into())],
        None,
        EffectOutcome::as_str,
    );
    check(
        &[CallStatus::Ok, CallStatus::Error, CallStatus::Aborted],
        None,
        CallStatus::as_str,
    );
    check(
        &[
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ],
        None,
        RunStatus::as_str,
    );
    check(
        &[ArtifactOp::Put, ArtifactOp::Get],
        None,
        ArtifactOp::as_str,
    );
    check(
        &[
            CallOutcome::Ok { result: json!(1) },
            CallOutcome::Error {
                error: "e".into(),
                result: None,
            },
            CallOutcome::Aborted { reason: None },
        ],
        Some("status"),
        CallOutcome::as_str,
    );
}

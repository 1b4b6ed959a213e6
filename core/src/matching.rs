//! Matching one emitted fact against one recorded fact: a field-level JSON
//! diff with ignore rules, and the readable line for the first difference.

use std::collections::HashMap;

use crate::fact::FactKind;
use crate::marker::{artifact_ref, json_fields_mut};
use crate::Fact;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::report::FieldDiff;

/// Fields to ignore when matching: a JSON pointer into a fact's `data`,
/// for one kind or for every kind; an empty pointer with a kind ignores
/// that kind's facts whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IgnoreRule {
    /// The kind it applies to (`None`: every kind).
    pub kind: Option<String>,
    /// JSON pointer into the kind's fields, e.g. `/payload/elapsed_ms`;
    /// empty (with a kind): the whole fact.
    pub pointer: String,
}

/// `{"kind": name, "data": fields}` of a fact kind.
pub fn kind_json(kind: &FactKind) -> Value {
    let fact = Fact {
        seq: 0,
        at: 0,
        offset: 0,
        call: None,
        kind: kind.clone(),
    };
    let mut v = serde_json::to_value(&fact).unwrap_or(Value::Null);
    let mut out = serde_json::Map::new();
    if let Value::Object(map) = &mut v {
        out.insert("kind".into(), map.remove("kind").unwrap_or(Value::Null));
        out.insert("data".into(), map.remove("data").unwrap_or(Value::Null));
    }
    Value::Object(out)
}

/// Replaces artifact references (payloads that were too large to store
/// inline) in a recorded fact with the values they point at.
pub fn resolve_refs(kind: &mut FactKind, artifacts: &HashMap<String, Vec<u8>>) {
    for field in json_fields_mut(kind) {
        if let Some(digest) = artifact_ref(field) {
            if let Some(v) = artifacts
                .get(digest)
                .and_then(|b| serde_json::from_slice(b).ok())
            {
                *field = v;
            }
        }
    }
}

/// Compares a recorded and a replayed fact kind. Returns every differing
/// field (empty when they match).
pub fn diff_kinds(expected: &FactKind, actual: &FactKind, ignore: &[IgnoreRule]) -> Vec<FieldDiff> {
    let mut e = kind_json(expected);
    let mut a = kind_json(actual);
    for rule in ignore {
        if rule.kind.as_deref().is_none_or(|k| k == expected.name()) {
            remove_pointer(&mut e["data"], &rule.pointer);
        }
        if rule.kind.as_deref().is_none_or(|k| k == actual.name()) {
            remove_pointer(&mut a["data"], &rule.pointer);
        }
    }
    let mut out = Vec::new();
    if e["kind"] != a["kind"] {
        out.push(FieldDiff {
            path: "kind".into(),
            expected: Some(e["kind"].clone()),
            actual: Some(a["kind"].clone()),
        });
        return out;
    }
    let whole_kind_ignored = ignore
        .iter()
        .any(|r| r.pointer.is_empty() && r.kind.as_deref() == Some(expected.name()));
    if whole_kind_ignored {
        return out;
    }
    diff_values(
        &kind_path(expected.name()),
        Some(&e["data"]),
        Some(&a["data"]),
        &mut out,
    );
    out
}

fn remove_pointer(value: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    let target = if parent.is_empty() {
        Some(value)
    } else {
        value.pointer_mut(parent)
    };
    match target {
        Some(Value::Object(map)) => {
            map.remove(&last);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = last.parse::<usize>() {
                if i < items.len() {
                    items[i] = Value::Null;
                }
            }
        }
        _ => {}
    }
}

/// Appends every differing leaf of `e` and `a` under `path`, a JSON
/// pointer (children are `path/key`, with `~` and `/` in a key escaped as
/// `~0` and `~1`, and `path/i`; arrays of different lengths, and values
/// of different types, differ as a whole). `None`: absent. A fact's paths
/// start with its kind, `progress:/payload/message`: the form `--ignore`
/// takes, so a divergence line can be pasted into one.
pub fn diff_values(path: &str, e: Option<&Value>, a: Option<&Value>, out: &mut Vec<FieldDiff>) {
    match (e, a) {
        (Some(Value::Object(em)), Some(Value::Object(am))) => {
            for (k, ev) in em {
                diff_values(&child(path, k), Some(ev), am.get(k), out);
            }
            for (k, av) in am {
                if !em.contains_key(k) {
                    diff_values(&child(path, k), None, Some(av), out);
                }
            }
        }
        (Some(Value::Array(ea)), Some(Value::Array(aa))) if ea.len() == aa.len() => {
            for (i, (ev, av)) in ea.iter().zip(aa).enumerate() {
                diff_values(&format!("{path}/{i}"), Some(ev), Some(av), out);
            }
        }
        (e, a) if e == a => {}
        (e, a) => out.push(FieldDiff {
            path: path.to_owned(),
            expected: e.cloned(),
            actual: a.cloned(),
        }),
    }
}

/// `path/key`, the key escaped as a JSON pointer's token (RFC 6901: `~`
/// as `~0`, `/` as `~1`; a dot stays a dot, as in MCP's `_meta` keys).
fn child(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// Where a fact kind's paths start: `progress:` (then a pointer into its
/// fields).
pub fn kind_path(kind: &str) -> String {
    format!("{kind}:")
}

/// The places of a fact where redaction left a bare
/// [`MARKER`](crate::marker::MARKER), as the paths a diff names them by
/// (`effect:/request/headers/authorization`): a replayed fact equal to the
/// recorded one there is equal to a marker, which proves nothing about the
/// value it stands for. A keyed marker equal on both sides is left out:
/// its tag shows the same hidden value. Cheap for a fact without a
/// marker (most).
pub fn redacted_places(kind: &FactKind) -> Vec<String> {
    let mut any = false;
    crate::marker::each_json_field(kind, |v| any = any || crate::marker::holds_marker(v));
    if !any {
        return Vec::new();
    }
    marker_paths(
        &kind_path(kind.name()),
        &kind_json(kind)["data"],
        Tags::Bare,
    )
}

/// The paths under `path` of the strings of `value` that hold a marker,
/// bare or keyed (see [`redacted_places`]).
pub fn redacted_paths(path: &str, value: &Value) -> Vec<String> {
    marker_paths(path, value, Tags::Any)
}

/// The paths under `path` of the strings of `value` that hold a bare
/// marker: what a replay cannot show equal, where a keyed one it can.
pub fn bare_marker_paths(path: &str, value: &Value) -> Vec<String> {
    marker_paths(path, value, Tags::Bare)
}

/// Which markers [`marker_paths`] looks for.
#[derive(Clone, Copy, PartialEq)]
enum Tags {
    Any,
    Bare,
}

fn marker_paths(path: &str, value: &Value, tags: Tags) -> Vec<String> {
    fn walk(path: &str, v: &Value, tags: Tags, out: &mut Vec<String>) {
        match v {
            Value::String(s) => {
                let found = match tags {
                    Tags::Any => crate::marker::holds_marker_str(s),
                    Tags::Bare => crate::marker::holds_bare_marker(s),
                };
                if found {
                    out.push(path.to_owned())
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(&format!("{path}/{i}"), item, tags, out);
                }
            }
            Value::Object(map) => {
                for (k, item) in map {
                    walk(&child(path, k), item, tags, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(path, value, tags, &mut out);
    out
}

/// Takes out of `diff` the differences that are only in markers' tags
/// where one side's marker is bare (a replay without the key, or a
/// record from before keyed markers): equal as far as can be shown, so
/// not a divergence, and not proven either. Returns their paths. Two
/// keyed markers with different tags stay in `diff`: the hidden values
/// differ.
pub fn split_unproven(diff: &mut Vec<FieldDiff>) -> Vec<String> {
    let mut unproven = Vec::new();
    diff.retain(|d| {
        let (Some(Value::String(e)), Some(Value::String(a))) = (&d.expected, &d.actual) else {
            return true;
        };
        if tags_alone_unshown(e, a) {
            unproven.push(d.path.clone());
            false
        } else {
            true
        }
    });
    unproven
}

/// True when `e` and `a` differ only where a marker is bare on one side
/// and keyed on the other (never where both are keyed).
fn tags_alone_unshown(e: &str, a: &str) -> bool {
    use crate::marker::{marker_spans, strip_tags};
    if strip_tags(e) != strip_tags(a) {
        return false;
    }
    let (es, as_) = (marker_spans(e), marker_spans(a));
    es.len() == as_.len()
        && es
            .iter()
            .zip(&as_)
            .all(|(x, y)| !(x.keyed && y.keyed) || e[x.start..x.end] == a[y.start..y.end])
}

/// A value for a readable line: JSON, cut to 80 characters.
pub fn show(v: &Option<Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(v) => {
            let s = v.to_string();
            match s.char_indices().nth(80) {
                Some((i, _)) => format!("{}…", &s[..i]),
                None => s,
            }
        }
    }
}

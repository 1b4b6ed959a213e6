//! The record's reserved strings and shapes: what redaction leaves in a
//! fact ([`MARKER`]), a too-deep subtree kept as text ([`NESTED`]), a
//! payload spilled into an artifact ([`ARTIFACT_REF`]), and the JSON fields
//! of a fact they apply to. They are part of the record format: every
//! reader (the viewer's language server, the OTLP export, replay matching)
//! recognises them, and only `reel::redact` writes [`MARKER`].

use serde_json::Value;

use crate::fact::{CallOutcome, EffectOutcome, ElicitOutcome, FactKind};

/// What a redacted value is replaced with.
pub const MARKER: &str = "[REDACTED]";

/// The stage of a host's receipt: a `call.output` the host filed after
/// the tool returned (the recorder's `CallBuilder::receipt`), not the
/// tool's own output; replay serves it from the record.
pub const RECEIPT_STAGE: &str = "reel.receipt";

/// How deep a recorded JSON value may nest. Deeper subtrees are kept whole
/// as JSON text under `{"$reel.nested": "..."}`, so that every reader
/// (the archive's decoder, a tape's JSON parser) can read them back.
pub const MAX_JSON_DEPTH: usize = 100;

/// The key that holds a too-deep subtree as JSON text.
pub const NESTED: &str = "$reel.nested";

/// Replaces subtrees nested deeper than [`MAX_JSON_DEPTH`] by their JSON text.
pub fn cap_depth(value: &mut Value) {
    fn walk(v: &mut Value, depth: usize) {
        match v {
            Value::Array(_) | Value::Object(_) if depth >= MAX_JSON_DEPTH => {
                let text = serde_json::to_string(v).unwrap_or_default();
                let mut m = serde_json::Map::new();
                m.insert(NESTED.into(), Value::String(text));
                *v = Value::Object(m);
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, depth + 1)),
            Value::Object(map) => map.values_mut().for_each(|i| walk(i, depth + 1)),
            _ => {}
        }
    }
    walk(value, 0)
}

/// The key of an artifact reference: a JSON value too large to store inline
/// is stored as an artifact and replaced by
/// `{"$reel.artifact": "sha256:...", "size": N, "media_type": "application/json"}`.
pub const ARTIFACT_REF: &str = "$reel.artifact";

/// The digest an artifact reference points at, if `value` is one.
pub fn artifact_ref(value: &Value) -> Option<&str> {
    match value {
        Value::Object(map) if map.len() == 3 => map.get(ARTIFACT_REF)?.as_str(),
        _ => None,
    }
}

/// The JSON fields of a fact (payloads, args, results, ...).
pub fn json_fields_mut(kind: &mut FactKind) -> Vec<&mut Value> {
    let mut out = Vec::new();
    each_json_field_mut(kind, |v| out.push(v));
    out
}

/// Calls `each` with every JSON field of a fact, in the order
/// [`json_fields_mut`] lists them, without collecting them (the writer
/// calls this for every fact).
pub fn each_json_field_mut<'a>(kind: &'a mut FactKind, mut each: impl FnMut(&'a mut Value)) {
    match kind {
        FactKind::CallStarted(c) => each(&mut c.args),
        FactKind::Progress(p) => each(&mut p.payload),
        FactKind::Log(l) => each(&mut l.data),
        FactKind::ElicitRequested(e) => each(&mut e.schema),
        FactKind::ElicitAnswered(e) => {
            if let ElicitOutcome::Accept { content } = &mut e.outcome {
                each(content)
            }
        }
        FactKind::Effect(e) => {
            each(&mut e.request);
            if let EffectOutcome::Ok(v) = &mut e.outcome {
                each(v)
            }
        }
        FactKind::CallOutput(o) => each(&mut o.value),
        FactKind::CallEnded(e) => {
            if let CallOutcome::Ok { result } = &mut e.outcome {
                each(result)
            }
        }
        FactKind::ModelCalled(m) => {
            for v in [&mut m.input, &mut m.output, &mut m.tool_definitions]
                .into_iter()
                .flatten()
            {
                each(v)
            }
        }
        FactKind::Unknown { data, .. } => each(data),
        _ => {}
    }
}

/// [`each_json_field_mut`] for reading: `each` sees the same fields, in
/// the same order.
pub fn each_json_field<'a>(kind: &'a FactKind, mut each: impl FnMut(&'a Value)) {
    match kind {
        FactKind::CallStarted(c) => each(&c.args),
        FactKind::Progress(p) => each(&p.payload),
        FactKind::Log(l) => each(&l.data),
        FactKind::ElicitRequested(e) => each(&e.schema),
        FactKind::ElicitAnswered(e) => {
            if let ElicitOutcome::Accept { content } = &e.outcome {
                each(content)
            }
        }
        FactKind::Effect(e) => {
            each(&e.request);
            if let EffectOutcome::Ok(v) = &e.outcome {
                each(v)
            }
        }
        FactKind::CallOutput(o) => each(&o.value),
        FactKind::CallEnded(e) => {
            if let CallOutcome::Ok { result } = &e.outcome {
                each(result)
            }
        }
        FactKind::ModelCalled(m) => {
            for v in [&m.input, &m.output, &m.tool_definitions]
                .into_iter()
                .flatten()
            {
                each(v)
            }
        }
        FactKind::Unknown { data, .. } => each(data),
        _ => {}
    }
}

/// True when `value` holds a string that redaction wrote a marker into
/// ([`MARKER`] or a keyed one).
pub fn holds_marker(value: &Value) -> bool {
    match value {
        Value::String(s) => holds_marker_str(s),
        Value::Array(items) => items.iter().any(holds_marker),
        Value::Object(map) => map.values().any(holds_marker),
        _ => false,
    }
}

/// A cheap upper estimate of a JSON value's encoded size, which stops
/// counting once past `limit`.
pub fn approx_size(value: &Value, limit: usize) -> usize {
    fn walk(v: &Value, acc: &mut usize, limit: usize) {
        if *acc > limit {
            return;
        }
        match v {
            Value::Null | Value::Bool(_) => *acc += 1,
            Value::Number(_) => *acc += 9,
            Value::String(s) => *acc += s.len() + 5,
            Value::Array(items) => {
                *acc += 5;
                for i in items {
                    walk(i, acc, limit);
                }
            }
            Value::Object(map) => {
                *acc += 5;
                for (k, i) in map {
                    *acc += k.len() + 5;
                    walk(i, acc, limit);
                }
            }
        }
    }
    let mut acc = 0;
    walk(value, &mut acc, limit);
    acc
}

/// Moves every JSON field of `kind` larger than `limit` bytes into an
/// artifact (via `store`, which returns its digest) and leaves a reference
/// in its place. Nothing is cut: the whole value is in the artifact.
pub fn spill_large(kind: &mut FactKind, limit: usize, mut store: impl FnMut(&[u8]) -> String) {
    each_json_field_mut(kind, |field| {
        if approx_size(field, limit) > limit {
            let bytes = serde_json::to_vec(field).unwrap_or_default();
            let digest = store(&bytes);
            let mut r = serde_json::Map::new();
            r.insert(ARTIFACT_REF.into(), Value::String(digest));
            r.insert("size".into(), Value::from(bytes.len() as u64));
            r.insert(
                "media_type".into(),
                Value::String("application/json".into()),
            );
            *field = Value::Object(r);
        }
    });
}

/// How a keyed marker begins: `[REDACTED:` then [`TAG_HEX`] hex digits
/// then `]`. A keyed marker stands where [`MARKER`] would, and its tag
/// tells "the same hidden value" without telling the value: the first 8
/// bytes of an HMAC-SHA256 under the archive's fingerprint key (kept
/// outside the archive), or, for a resolved credential, of the
/// credential's own fingerprint. A replay that has the key (or the same
/// credential's fingerprint) writes the same tag for the same value, so
/// it can prove equality where a bare [`MARKER`] cannot.
pub const KEYED_MARKER_PREFIX: &str = "[REDACTED:";

/// How many hex digits a keyed marker's tag has.
pub const TAG_HEX: usize = 16;

/// The keyed marker of a hidden value whose keyed MAC is `mac`.
pub fn keyed_marker(mac: &[u8]) -> String {
    let mut out = String::with_capacity(KEYED_MARKER_PREFIX.len() + TAG_HEX + 1);
    out.push_str(KEYED_MARKER_PREFIX);
    for b in mac.iter().take(TAG_HEX / 2) {
        out.push_str(&format!("{b:02x}"));
    }
    out.push(']');
    out
}

/// A redaction marker found in a string: its byte range, and whether it
/// is keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerSpan {
    /// Byte offset of the `[`.
    pub start: usize,
    /// Byte offset just past the `]`.
    pub end: usize,
    /// A keyed marker (`[REDACTED:...]`), not a bare [`MARKER`].
    pub keyed: bool,
}

/// The markers in `text`, bare and keyed, in order.
pub fn marker_spans(text: &str) -> Vec<MarkerSpan> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("[REDACTED") {
        let start = from + i;
        let rest = &text[start..];
        if rest.starts_with(MARKER) {
            out.push(MarkerSpan {
                start,
                end: start + MARKER.len(),
                keyed: false,
            });
            from = start + MARKER.len();
            continue;
        }
        let tag_at = KEYED_MARKER_PREFIX.len();
        let keyed = rest.starts_with(KEYED_MARKER_PREFIX)
            && rest.len() > tag_at + TAG_HEX
            && rest.as_bytes()[tag_at..tag_at + TAG_HEX]
                .iter()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            && rest.as_bytes()[tag_at + TAG_HEX] == b']';
        if keyed {
            let end = start + tag_at + TAG_HEX + 1;
            out.push(MarkerSpan {
                start,
                end,
                keyed: true,
            });
            from = end;
        } else {
            from = start + 1;
        }
    }
    out
}

/// True when `text` holds a marker, bare or keyed.
pub fn holds_marker_str(text: &str) -> bool {
    text.contains("[REDACTED") && !marker_spans(text).is_empty()
}

/// True when `text` holds a bare [`MARKER`]: a hidden value no tag
/// stands for.
pub fn holds_bare_marker(text: &str) -> bool {
    text.contains(MARKER)
}

/// `text` with every keyed marker made bare: what a reader without the
/// key compares.
pub fn strip_tags(text: &str) -> std::borrow::Cow<'_, str> {
    let spans = marker_spans(text);
    if spans.iter().all(|s| !s.keyed) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for s in spans {
        out.push_str(&text[at..s.start]);
        out.push_str(MARKER);
        at = s.end;
    }
    out.push_str(&text[at..]);
    std::borrow::Cow::Owned(out)
}

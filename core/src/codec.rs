//! The stored encoding of one fact, shared by the archive's blocks and the
//! tape's `facts_sha256`: one version byte, then MessagePack with field
//! names (`rmp_serde` `write_named`), so reordering a struct never breaks
//! an old archive or tape digest.

use crate::fact::Fact;

mod view;
pub use view::{decode_fact_view, FactView, ProgressView, ViewSink};

/// Fact encoding version.
pub const FACT_VERSION: u8 = 1;

/// The deepest nesting a stored fact may have (the fact's own structure
/// plus its JSON payloads, which the recorder caps at
/// [`crate::marker::MAX_JSON_DEPTH`]).
pub const MAX_DECODE_DEPTH: usize = 160;

/// A sha-256 digest.
pub type Digest = [u8; 32];

/// Encodes one fact: version byte + MessagePack with field names.
///
/// The kinds a recording is made of (progress, call start and end, logs,
/// effects, clock and randomness reads) are written field by field with
/// `rmp`'s primitives, straight into `out`; every other kind goes through `rmp_serde`. Both give the same
/// bytes, byte for byte: what `rmp_serde::encode::write_named` writes for
/// the fact ([`encode_fact_serde`]; `tests/it/fact_roundtrip.rs` holds the two
/// to each other over every kind). *Why:* `rmp_serde`'s generic path was a
/// sixth of the recorder's writer thread (a profile of the record bench),
/// most of it in the JSON payloads.
pub fn encode_fact(fact: &Fact, out: &mut Vec<u8>) -> Result<(), rmp_serde::encode::Error> {
    if !fast::handles(&fact.kind) {
        return encode_fact_serde(fact, out);
    }
    let at = out.len();
    out.push(FACT_VERSION);
    let written = fast::fact(fact, out);
    if written.is_err() {
        out.truncate(at);
    }
    written
}

/// [`encode_fact`] through `rmp_serde` for every kind: the reference the
/// field-by-field encoder is held to.
#[doc(hidden)]
pub fn encode_fact_serde(fact: &Fact, out: &mut Vec<u8>) -> Result<(), rmp_serde::encode::Error> {
    out.push(FACT_VERSION);
    rmp_serde::encode::write_named(out, fact)
}

/// The MessagePack of [`encode_fact`] written field by field with `rmp`'s
/// primitives (no serde walk): structs as maps of
/// their serialized fields in declaration order, unit variants as their
/// names, newtype variants as one-entry maps, internally tagged variants
/// with the tag first.
mod fast {
    use rmp_serde::encode::Error;
    use serde_json::Value;

    use crate::fact::*;

    /// True for the kinds written field by field.
    pub(super) fn handles(kind: &FactKind) -> bool {
        matches!(
            kind,
            FactKind::Progress(_)
                | FactKind::CallStarted(_)
                | FactKind::CallEnded(_)
                | FactKind::Log(_)
                | FactKind::Effect(_)
                | FactKind::Clock(_)
                | FactKind::Random(_)
                | FactKind::RunEnded(_)
        )
    }

    pub(super) fn fact(fact: &Fact, out: &mut Vec<u8>) -> Result<(), Error> {
        map_len(out, 6)?;
        str(out, "seq")?;
        uint(out, fact.seq);
        str(out, "at")?;
        sint(out, fact.at);
        str(out, "offset")?;
        uint(out, fact.offset);
        str(out, "call")?;
        opt_str(out, fact.call.as_deref())?;
        str(out, "kind")?;
        str(out, fact.kind.name())?;
        str(out, "data")?;
        match &fact.kind {
            FactKind::Progress(Progress {
                payload,
                count,
                delivered,
            }) => {
                map_len(out, if *delivered { 3 } else { 2 })?;
                str(out, "payload")?;
                value(out, payload)?;
                str(out, "count")?;
                uint(out, *count);
                if *delivered {
                    str(out, "delivered")?;
                    bool(out, true);
                }
            }
            FactKind::CallStarted(c) => call_started(out, c)?,
            FactKind::CallEnded(CallEnded {
                outcome,
                duration_ns,
                invocation_id,
            }) => {
                map_len(out, 3)?;
                str(out, "outcome")?;
                let structured = matches!(
                    outcome,
                    CallOutcome::Error {
                        result: Some(_),
                        ..
                    }
                );
                map_len(out, if structured { 3 } else { 2 })?;
                str(out, "status")?;
                match outcome {
                    CallOutcome::Ok { result } => {
                        str(out, "ok")?;
                        str(out, "result")?;
                        value(out, result)?;
                    }
                    CallOutcome::Error { error, result } => {
                        str(out, "error")?;
                        str(out, "error")?;
                        str(out, error)?;
                        if let Some(result) = result {
                            str(out, "result")?;
                            value(out, result)?;
                        }
                    }
                    CallOutcome::Aborted { reason } => {
                        str(out, "aborted")?;
                        str(out, "reason")?;
                        opt_str(out, reason.as_deref())?;
                    }
                }
                str(out, "duration_ns")?;
                uint(out, *duration_ns);
                str(out, "invocation_id")?;
                opt_str(out, invocation_id.as_deref())?;
            }
            FactKind::Log(Log {
                level,
                logger,
                subflow,
                data,
                delivered,
                in_flight,
            }) => {
                map_len(out, if in_flight.is_empty() { 5 } else { 6 })?;
                str(out, "level")?;
                str(out, level.as_str())?;
                str(out, "logger")?;
                opt_str(out, logger.as_deref())?;
                str(out, "subflow")?;
                opt_str(out, subflow.as_deref())?;
                str(out, "data")?;
                value(out, data)?;
                str(out, "delivered")?;
                bool(out, *delivered);
                if !in_flight.is_empty() {
                    str(out, "in_flight")?;
                    array_len(out, in_flight.len())?;
                    for call in in_flight {
                        str(out, call)?;
                    }
                }
            }
            FactKind::Effect(Effect {
                name,
                request,
                outcome,
            }) => {
                map_len(out, 3)?;
                str(out, "name")?;
                str(out, name)?;
                str(out, "request")?;
                value(out, request)?;
                str(out, "outcome")?;
                map_len(out, 1)?;
                match outcome {
                    EffectOutcome::Ok(v) => {
                        str(out, "ok")?;
                        value(out, v)?;
                    }
                    EffectOutcome::Err(e) => {
                        str(out, "err")?;
                        str(out, e)?;
                    }
                }
            }
            FactKind::Clock(Clock { unix_nanos }) => {
                map_len(out, 1)?;
                str(out, "unix_nanos")?;
                sint(out, *unix_nanos);
            }
            FactKind::Random(Random { value }) => {
                map_len(out, 1)?;
                str(out, "value")?;
                uint(out, *value);
            }
            FactKind::RunEnded(RunEnded { status }) => {
                map_len(out, 1)?;
                str(out, "status")?;
                str(out, status.as_str())?;
            }
            other => {
                // Not reached (see `handles`): the reference path.
                return Err(Error::Syntax(format!(
                    "{} is not written by the hand encoder",
                    other.name()
                )));
            }
        }
        Ok(())
    }

    fn call_started(out: &mut Vec<u8>, c: &CallStarted) -> Result<(), Error> {
        let CallStarted {
            call_id,
            tool_name,
            tool_id,
            parent_call,
            iteration,
            invocation_id,
            mode,
            protocol,
            platform,
            client_info,
            args,
            wanted,
            attached,
            spec,
            dispatch_tools,
            outside_run,
        } = c;
        let len = 14 + u32::from(dispatch_tools.is_some()) + u32::from(outside_run.is_some());
        map_len(out, len)?;
        str(out, "call_id")?;
        str(out, call_id)?;
        str(out, "tool_name")?;
        str(out, tool_name)?;
        str(out, "tool_id")?;
        opt_str(out, tool_id.as_deref())?;
        str(out, "parent_call")?;
        opt_str(out, parent_call.as_deref())?;
        str(out, "iteration")?;
        uint(out, u64::from(*iteration));
        str(out, "invocation_id")?;
        opt_str(out, invocation_id.as_deref())?;
        str(out, "mode")?;
        str(out, mode.as_str())?;
        str(out, "protocol")?;
        opt_str(out, protocol.as_deref())?;
        str(out, "platform")?;
        opt_str(out, platform.as_deref())?;
        str(out, "client_info")?;
        via_serde(out, client_info)?;
        str(out, "args")?;
        value(out, args)?;
        str(out, "wanted")?;
        via_serde(out, wanted)?;
        str(out, "attached")?;
        match attached {
            None => nil(out),
            Some(Attached {
                credentials,
                artifacts,
                elicitor,
                dispatch,
                log_listener,
                content_logging,
            }) => {
                map_len(out, 6)?;
                for (name, v) in [
                    ("credentials", credentials),
                    ("artifacts", artifacts),
                    ("elicitor", elicitor),
                    ("dispatch", dispatch),
                    ("log_listener", log_listener),
                    ("content_logging", content_logging),
                ] {
                    str(out, name)?;
                    bool(out, *v);
                }
            }
        }
        str(out, "spec")?;
        via_serde(out, spec)?;
        if let Some(tools) = dispatch_tools {
            str(out, "dispatch_tools")?;
            array_len(out, tools.len())?;
            for t in tools {
                str(out, t)?;
            }
        }
        if let Some(outside) = outside_run {
            str(out, "outside_run")?;
            via_serde(out, outside)?;
        }
        Ok(())
    }

    /// A field of a rarely recorded type, through `rmp_serde` (what it
    /// writes for a value nested in a fact is what it writes for it alone).
    fn via_serde<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) -> Result<(), Error> {
        rmp_serde::encode::write_named(out, v)
    }

    fn value(out: &mut Vec<u8>, v: &Value) -> Result<(), Error> {
        match v {
            Value::Null => nil(out),
            Value::Bool(b) => bool(out, *b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    uint(out, u)
                } else if let Some(i) = n.as_i64() {
                    sint(out, i)
                } else if let Some(f) = n.as_f64() {
                    f64(out, f)
                } else {
                    // Not reached without serde_json's arbitrary precision.
                    via_serde(out, n)?;
                }
            }
            Value::String(s) => str(out, s)?,
            Value::Array(items) => {
                array_len(out, items.len())?;
                for item in items {
                    value(out, item)?;
                }
            }
            Value::Object(map) => {
                map_len_usize(out, map.len())?;
                for (k, item) in map {
                    str(out, k)?;
                    value(out, item)?;
                }
            }
        }
        Ok(())
    }

    // The primitives are `rmp`'s, the functions `rmp_serde` itself calls,
    // so every marker is the one it picks (the smallest that holds the
    // value). Writing into a `Vec` cannot fail but for a length over
    // `u32`, which MessagePack cannot hold.

    fn nil(out: &mut Vec<u8>) {
        out.push(rmp::Marker::Null.to_u8());
    }

    fn bool(out: &mut Vec<u8>, b: bool) {
        out.push(
            if b {
                rmp::Marker::True
            } else {
                rmp::Marker::False
            }
            .to_u8(),
        );
    }

    fn uint(out: &mut Vec<u8>, v: u64) {
        let _ = rmp::encode::write_uint(out, v);
    }

    fn sint(out: &mut Vec<u8>, v: i64) {
        let _ = rmp::encode::write_sint(out, v);
    }

    fn f64(out: &mut Vec<u8>, v: f64) {
        let _ = rmp::encode::write_f64(out, v);
    }

    fn len32(what: &str, len: usize) -> Result<u32, Error> {
        u32::try_from(len)
            .map_err(|_| Error::Syntax(format!("{what} of {len} items is too long to encode")))
    }

    fn str(out: &mut Vec<u8>, s: &str) -> Result<(), Error> {
        len32("a string", s.len())?;
        rmp::encode::write_str(out, s).map_err(Error::from)
    }

    fn opt_str(out: &mut Vec<u8>, s: Option<&str>) -> Result<(), Error> {
        match s {
            Some(s) => str(out, s),
            None => {
                nil(out);
                Ok(())
            }
        }
    }

    fn map_len(out: &mut Vec<u8>, len: u32) -> Result<(), Error> {
        rmp::encode::write_map_len(out, len)
            .map(drop)
            .map_err(Error::from)
    }

    fn map_len_usize(out: &mut Vec<u8>, len: usize) -> Result<(), Error> {
        map_len(out, len32("a map", len)?)
    }

    fn array_len(out: &mut Vec<u8>, len: usize) -> Result<(), Error> {
        rmp::encode::write_array_len(out, len32("an array", len)?)
            .map(drop)
            .map_err(Error::from)
    }
}

/// Decodes one fact written by [`encode_fact`].
pub fn decode_fact(bytes: &[u8]) -> Result<Fact, String> {
    match bytes.split_first() {
        Some((&FACT_VERSION, rest)) => {
            let mut de = rmp_serde::Deserializer::from_read_ref(rest);
            // Bounded, so that damaged or hostile bytes cannot overflow the
            // stack; the recorder caps payload nesting well below this.
            de.set_max_depth(MAX_DECODE_DEPTH);
            serde::Deserialize::deserialize(&mut de).map_err(|e| format!("fact does not decode: {e}"))
        }
        Some((v, _)) => Err(format!(
            "fact encoding version {v} is not supported by this reel (supports {FACT_VERSION}): upgrade reel"
        )),
        None => Err("empty fact encoding".into()),
    }
}

/// Parses `sha256:<64 hex>` into raw bytes.
pub fn parse_digest(digest: &str) -> Option<Digest> {
    let hex_part = digest.strip_prefix("sha256:")?;
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_part, &mut out).ok()?;
    Some(out)
}

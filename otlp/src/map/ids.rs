//! The ids of a stream's spans: derived from the stream (so exporting
//! twice gives the same ids), or the caller's from a W3C `traceparent`.

use super::*;

/// A W3C `traceparent` (`00-<32 hex trace id>-<16 hex span id>-<2 hex
/// flags>`), parsed. All-zero ids and other versions than `00` are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The caller's trace id.
    pub trace_id: [u8; 16],
    /// The caller's span: the parent of the spans reel exports.
    pub span_id: [u8; 8],
    /// The trace flags.
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` header value; `None` when it is malformed.
    pub fn parse(value: &str) -> Option<TraceParent> {
        let parts: Vec<&str> = value.trim().split('-').collect();
        let [version, trace, span, flags] = parts[..] else {
            return None;
        };
        if version != "00" || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
            return None;
        }
        let lower = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if !lower(trace) || !lower(span) || !lower(flags) {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        hex::decode_to_slice(trace, &mut trace_id).ok()?;
        hex::decode_to_slice(span, &mut span_id).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            flags,
        })
    }
}

pub(super) fn digest(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        // Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    h.finalize().into()
}

/// What reel derives a stream's trace and span ids from, when no
/// recorded `traceparent` gives them: the archive's key of the stream (a
/// run id, or the key of a call outside any run), the wall-clock `at` of
/// its first fact (`run.started`, or the outside call's `call.started`)
/// and its recorded producer (name and version). Each is hashed
/// (SHA-256, length-prefixed parts) and truncated.
///
/// Why these: a run id alone is not unique across archives. Two hosts
/// running the same demo record `demo-deploy` twice; a collector given
/// both keeps the first trace and silently drops the second. The ids
/// must stay a pure function of the record (exporting a run twice, or
/// live and then from the archive, gives the same ids, so a collector
/// deduplicates instead of doubling), and the record is all an export
/// reads: these three fields are in every stream's first fact, in every
/// version of the fact model, and never change once written. The start
/// instant is what differs between two recordings of one run id; the
/// producer separates two programs that share a clock tick. A per-archive
/// salt in the archive's meta would do the same, but it is not in the
/// record (live export sees only facts), and a tape imported elsewhere
/// would change its ids.
///
/// Limits: two streams still collide when they have the same key and the
/// same producer and started at the same nanosecond by their wall clocks
/// (a clock of coarse resolution, or two hosts whose clocks were set to
/// the same fixed time, make that likelier; random run ids, as `reel mcp
/// record` gives, rule it out). A copy of a recording (a tape imported
/// into another archive, a synced stream) keeps its ids on purpose: it
/// is the same recording, the same trace. The ids identify, they do not
/// hide: anyone holding the record can compute them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamId {
    key: String,
    started_at: i64,
    producer_name: String,
    producer_version: String,
}

impl StreamId {
    /// The stream id of `key`, first recorded at `started_at` (unix
    /// nanoseconds, its first fact's `at`) by `producer`.
    pub fn new(key: &str, started_at: i64, producer: &Producer) -> StreamId {
        StreamId {
            key: key.to_owned(),
            started_at,
            producer_name: producer.name.clone(),
            producer_version: producer.version.clone(),
        }
    }

    /// The stream id of a stream's record and facts: its first fact's
    /// `at` and producer when that fact starts the stream, else the
    /// record's start and no producer (a stream read from its middle).
    pub fn of(record: &RunRecord, facts: &[Fact]) -> StreamId {
        let start = facts.first().and_then(|f| match &f.kind {
            FactKind::RunStarted(r) => Some((f.at, &r.producer)),
            FactKind::CallStarted(c) => c.outside_run.as_ref().map(|o| (f.at, &o.producer)),
            _ => None,
        });
        match start {
            Some((at, producer)) => StreamId::new(&record.run_id, at, producer),
            None => StreamId {
                key: record.run_id.clone(),
                started_at: record.started_at,
                producer_name: String::new(),
                producer_version: String::new(),
            },
        }
    }

    pub(super) fn digest(&self, domain: &str, call: Option<&str>) -> [u8; 32] {
        let at = self.started_at.to_string();
        let mut parts = vec![
            domain,
            self.key.as_str(),
            at.as_str(),
            self.producer_name.as_str(),
            self.producer_version.as_str(),
        ];
        parts.extend(call);
        digest(&parts)
    }
}

/// The trace id reel derives for a stream: the first 16 bytes of a
/// SHA-256 of its [`StreamId`], so exporting twice gives the same id and
/// two recordings of one run id (two archives) do not collide.
pub fn derived_trace_id(stream: &StreamId) -> [u8; 16] {
    let d = stream.digest("reel.trace", None);
    d[..16].try_into().expect("16 bytes")
}

/// The span id reel derives for a call of a stream (`call`) or for the
/// run itself (`None`): the first 8 bytes of a SHA-256 of the
/// [`StreamId`] and the call id.
pub fn derived_span_id(stream: &StreamId, call: Option<&str>) -> [u8; 8] {
    let d = match call {
        Some(call) => stream.digest("reel.span.call", Some(call)),
        None => stream.digest("reel.span.run", None),
    };
    d[..8].try_into().expect("8 bytes")
}

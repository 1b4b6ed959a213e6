//! The tripwire: the last line of redaction, and it fails closed.
//!
//! Redaction ([`crate::redact`]) scrubs by key names and known values, in
//! the forms it knows to look for. The tripwire runs after it, on what is
//! about to leave the process (a block appended to the archive, a tape
//! exported, a span exported), and searches it for every secret value it
//! was given (the credentials resolved in the run, and every value the
//! host declared secret) in the raw form and in the encodings a tool or a
//! library may have put it in:
//!
//! - `json`: JSON-escaped (serde's escaping, and with `/` as `\/`), and
//!   an escaped form escaped again (JSON text inside a JSON string);
//! - `debug`: Rust `{:?}`-escaped;
//! - `percent`: percent-encoded (every byte but the unreserved ones, hex in
//!   upper or lower case; also with a space as `+`);
//! - `base64` / `base64url`: standard and url-safe alphabets, with and
//!   without padding, at each of the 3 alignments a value can have inside
//!   a longer base64 run, so `user:secret` (basic auth) and a secret in the
//!   middle of an encoded JSON body are found: for each alignment only the
//!   characters that depend on the secret's bytes alone are searched;
//! - `hex`: the bytes' hex digits, lower or upper case;
//! - `unicode-escape`: every UTF-16 unit `\uXXXX`-escaped (lower or upper
//!   case digits), as an escape-everything JSON or JavaScript encoder
//!   writes it, and that escaped again;
//! - `utf16le` / `utf16be`: UTF-16 text, found in bytes (an artifact's).
//!
//! Not found: a secret compressed (gzip, zstd: an artifact's bytes are
//! scanned as stored, not decompressed), encrypted or hashed, in an
//! encoding not listed (base32, hex with separators, `\x` escapes), or
//! split across two strings or two facts (two progress reports each
//! holding half): each string is scanned on its own.
//!
//! All patterns are searched at once (Aho-Corasick) over every string of
//! the fact (every string, map key and byte string its serialization
//! holds, gathered into one buffer), so a fact that holds no secret costs
//! one walk and one scan. A hit is scrubbed: every string (and object key) of
//! the fact is searched and each match replaced by [`MARKER`]; the caller
//! records a `redaction.tripped` fact naming the point, the fact's kind,
//! the field (a JSON pointer, built from scrubbed keys) and the encoding,
//! never the value nor a digest of it (a short secret's digest can be
//! brute-forced).
//!
//! Values shorter than [`MIN_LEN`] bytes are not searched: found anywhere,
//! they would trip on ordinary text (the redactor still scrubs them as
//! whole tokens).
//!
//! ```
//! use reel::tripwire::{Encoding, Tripwire};
//! use reel::redact::MARKER;
//!
//! let mut wire = Tripwire::new();
//! wire.add("hunter2-s3cr3t");
//! // "ann:hunter2-s3cr3t" in base64, as a basic-auth header carries it.
//! let mut header = String::from("Basic YW5uOmh1bnRlcjItczNjcjN0");
//! assert_eq!(wire.scrub_str(&mut header), Some(Encoding::Base64));
//! assert!(header.contains(MARKER));
//! assert!(!header.contains("h1bnRlcjItczNjcjN0"), "{header}");
//! ```

use aho_corasick::{AhoCorasick, MatchKind};
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use serde_json::Value;

use crate::fact::{Fact, FactKind, NewFact, RedactionTripped};
use crate::redact::MARKER;
use crate::rules::ends_stream;
use crate::secret::Secret;
use crate::tape::Tape;

/// How a secret value was encoded where the tripwire found it (the core's:
/// `redaction.tripped` names it, and [`Guard`] answers with it).
pub use reel_core::guard::{Encoding, Guard};

mod strings;

/// The shortest value the tripwire searches for, in bytes.
pub const MIN_LEN: usize = 8;

/// Where a hit was found in a fact: a JSON pointer into its envelope
/// (`/data/...`), and how the value was encoded there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The field, a JSON pointer built from scrubbed keys.
    pub field: String,
    /// The encoding of the first pattern found in that field.
    pub encoding: Encoding,
}

/// The secret values to search for and their encoded forms (memory only).
#[derive(Default)]
pub struct Tripwire {
    /// Each pattern and its encoding, in the matcher's pattern order.
    patterns: Vec<(zeroize::Zeroizing<Vec<u8>>, Encoding)>,
    matcher: Option<AhoCorasick>,
}

impl std::fmt::Debug for Tripwire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tripwire({} patterns)", self.patterns.len())
    }
}

impl Clone for Tripwire {
    fn clone(&self) -> Tripwire {
        Tripwire {
            patterns: self.patterns.clone(),
            matcher: self.matcher.clone(),
        }
    }
}

/// The base64 characters that depend only on the bytes of `b` when `b`
/// starts at byte `k` (0, 1 or 2) of a 3-byte group inside a longer run.
fn base64_core(engine: &impl base64::Engine, b: &[u8], k: usize) -> Vec<u8> {
    let mut padded = vec![0u8; k];
    padded.extend_from_slice(b);
    let text = engine.encode(&padded).into_bytes();
    // Characters before the secret's first pure one: the group's first
    // char (k=1: 2 chars, k=2: 3 chars) mixes the prefix's bits in.
    let skip = [0, 2, 3][k];
    // The last char mixes in the bits of what follows, unless the secret
    // ends on a group boundary.
    let cut = usize::from(!padded.len().is_multiple_of(3));
    if text.len() < skip + cut {
        return Vec::new();
    }
    text[skip..text.len() - cut].to_vec()
}

fn percent(b: &[u8], upper: bool, plus: bool) -> Vec<u8> {
    let hex: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut out = Vec::with_capacity(b.len() * 3);
    for &c in b {
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
            out.push(c);
        } else if plus && c == b' ' {
            out.push(b'+');
        } else {
            out.extend_from_slice(&[b'%', hex[usize::from(c >> 4)], hex[usize::from(c & 15)]]);
        }
    }
    out
}

impl Tripwire {
    /// A tripwire that searches for nothing yet.
    pub fn new() -> Tripwire {
        Tripwire::default()
    }

    /// A tripwire over `secrets`.
    pub fn of<'a>(secrets: impl IntoIterator<Item = &'a Secret>) -> Tripwire {
        let mut wire = Tripwire::new();
        for s in secrets {
            wire.add(s.expose());
        }
        wire
    }

    /// True when it searches for nothing (every check passes at no cost).
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Adds a secret value and its encoded forms (ignored when shorter
    /// than [`MIN_LEN`] bytes).
    pub fn add(&mut self, secret: &str) {
        let b = secret.as_bytes();
        if b.len() < MIN_LEN {
            return;
        }
        let mut new: Vec<(Vec<u8>, Encoding)> = vec![(b.to_vec(), Encoding::Raw)];
        if let Ok(json) = serde_json::to_string(secret) {
            let inner = json[1..json.len() - 1].to_owned();
            new.push((inner.replace('/', "\\/").into_bytes(), Encoding::Json));
            new.push((inner.into_bytes(), Encoding::Json));
        }
        let debug = format!("{secret:?}");
        new.push((
            debug.as_bytes()[1..debug.len() - 1].to_vec(),
            Encoding::Debug,
        ));
        // Every UTF-16 unit `\uXXXX`-escaped, as an escape-everything JSON
        // or JavaScript encoder writes it (escaped again below).
        for upper in [false, true] {
            let mut escaped = String::with_capacity(secret.len() * 6);
            for unit in secret.encode_utf16() {
                if upper {
                    escaped.push_str(&format!("\\u{unit:04X}"));
                } else {
                    escaped.push_str(&format!("\\u{unit:04x}"));
                }
            }
            new.push((escaped.into_bytes(), Encoding::UnicodeEscape));
        }
        // An escaped form inside JSON text (a JSON body logged as a
        // string, exported as a JSON attribute) is escaped again.
        let escaped: Vec<(Vec<u8>, Encoding)> = new[1..].to_vec();
        for (once, encoding) in escaped {
            if let Ok(twice) = serde_json::to_string(&String::from_utf8_lossy(&once)) {
                let encoding = match encoding {
                    Encoding::UnicodeEscape => encoding,
                    _ => Encoding::Json,
                };
                new.push((twice.as_bytes()[1..twice.len() - 1].to_vec(), encoding));
            }
        }
        for (upper, plus) in [(true, false), (false, false), (true, true), (false, true)] {
            new.push((percent(b, upper, plus), Encoding::Percent));
        }
        for k in 0..3 {
            new.push((base64_core(&STANDARD_NO_PAD, b, k), Encoding::Base64));
            new.push((base64_core(&URL_SAFE_NO_PAD, b, k), Encoding::Base64Url));
        }
        new.push((hex::encode(b).into_bytes(), Encoding::Hex));
        new.push((hex::encode_upper(b).into_bytes(), Encoding::Hex));
        // UTF-16 text is found in bytes (an artifact's), not in a fact's
        // strings, which are UTF-8.
        new.push((
            secret.encode_utf16().flat_map(u16::to_le_bytes).collect(),
            Encoding::Utf16Le,
        ));
        new.push((
            secret.encode_utf16().flat_map(u16::to_be_bytes).collect(),
            Encoding::Utf16Be,
        ));
        for (pattern, encoding) in new {
            if pattern.len() >= MIN_LEN && !self.patterns.iter().any(|(p, _)| **p == pattern) {
                self.patterns
                    .push((zeroize::Zeroizing::new(pattern), encoding));
            }
        }
        // A contiguous NFA, not a DFA: the long escaped forms (six bytes
        // per character, twice for each case) made the DFA's build, once
        // per run and secret, cost more than its faster scan saved.
        self.matcher = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
            .build(self.patterns.iter().map(|(p, _)| p.as_slice()))
            .ok();
    }

    /// The encoding of the first pattern found in `bytes`, if any.
    pub fn scan(&self, bytes: &[u8]) -> Option<Encoding> {
        let m = self.matcher.as_ref()?.find(bytes)?;
        Some(self.patterns[m.pattern().as_usize()].1)
    }

    /// Replaces every match in `text` by [`MARKER`] (overlapping matches
    /// merged); the encoding of the first match, if there was one.
    pub fn scrub_str(&self, text: &mut String) -> Option<Encoding> {
        let matcher = self.matcher.as_ref()?;
        let mut spans: Vec<(usize, usize, Encoding)> = matcher
            .find_overlapping_iter(text.as_bytes())
            .map(|m| (m.start(), m.end(), self.patterns[m.pattern().as_usize()].1))
            .collect();
        if spans.is_empty() {
            return None;
        }
        spans.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
        let first = spans[0].2;
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = 0;
        let mut i = 0;
        while i < spans.len() {
            let (start, mut end) = (spans[i].0, spans[i].1);
            i += 1;
            while i < spans.len() && spans[i].0 <= end {
                end = end.max(spans[i].1);
                i += 1;
            }
            out.extend_from_slice(&bytes[at..start]);
            out.extend_from_slice(MARKER.as_bytes());
            at = end;
        }
        out.extend_from_slice(&bytes[at..]);
        // A match may cut a multi-byte character (an encoded pattern next
        // to one): what is left of it is replaced, never kept.
        *text = String::from_utf8_lossy(&out).into_owned();
        Some(first)
    }

    /// Scrubs every string and object key of `value`, noting each field
    /// hit (`pointer` is where `value` stands).
    pub fn scrub_json(&self, value: &mut Value, pointer: &mut String, hits: &mut Vec<Hit>) {
        match value {
            Value::String(s) => {
                if let Some(encoding) = self.scrub_str(s) {
                    hits.push(Hit {
                        field: pointer.clone(),
                        encoding,
                    });
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&i.to_string());
                    self.scrub_json(item, pointer, hits);
                    pointer.truncate(len);
                }
            }
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (mut key, mut item) in old {
                    if let Some(encoding) = self.scrub_str(&mut key) {
                        hits.push(Hit {
                            field: format!("{pointer}/{}", escape_pointer(&key)),
                            encoding,
                        });
                    }
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&escape_pointer(&key));
                    self.scrub_json(&mut item, pointer, hits);
                    pointer.truncate(len);
                    // Two keys scrubbed to the same text: keep both values.
                    while map.contains_key(&key) {
                        key.push('~');
                    }
                    map.insert(key, item);
                }
            }
            _ => {}
        }
    }

    /// Checks one fact: gathers its strings into `buf` (reused between
    /// calls) and scans them; on a hit, scrubs every string of the fact. The
    /// fields hit, or nothing when the fact is clean.
    pub fn check_fact(&self, fact: &mut Fact, buf: &mut Vec<u8>) -> Vec<Hit> {
        if self.is_empty() {
            return Vec::new();
        }
        buf.clear();
        strings::gather(&*fact, buf);
        if self.scan(buf).is_none() {
            return Vec::new();
        }
        let mut hits = Vec::new();
        let Ok(mut value) = serde_json::to_value(&*fact) else {
            return hits;
        };
        self.scrub_json(&mut value, &mut String::new(), &mut hits);
        if hits.is_empty() {
            return hits;
        }
        match serde_json::from_value::<Fact>(value) {
            Ok(scrubbed) => *fact = scrubbed,
            // The scrubbed text no longer reads as this kind: the fact is
            // withheld whole (fail closed), its kind named.
            Err(_) => {
                let name = fact.kind.name().to_owned();
                fact.kind = FactKind::Unknown {
                    kind: "redaction.withheld".into(),
                    data: serde_json::json!({ "kind": name }),
                };
            }
        }
        hits
    }

    /// Checks a batch of one stream's facts, in order, before they are
    /// numbered: each hit fact is scrubbed, and a `redaction.tripped` fact
    /// (of the same call, at the same time) is put after it, or before it
    /// when it ends the stream (`outside`: the call id of a call outside
    /// any run the stream is). How many tripped facts were added.
    pub fn guard_batch(
        &self,
        point: &str,
        rule: &str,
        outside: Option<&str>,
        facts: &mut Vec<NewFact>,
        buf: &mut Vec<u8>,
    ) -> usize {
        if self.is_empty() {
            return 0;
        }
        let mut numbered: Vec<Fact> = std::mem::take(facts)
            .into_iter()
            .map(|f| f.with_seq(0))
            .collect();
        let added = self.guard_facts(point, rule, outside, &mut numbered, buf);
        *facts = numbered.into_iter().map(Fact::into_new).collect();
        added
    }

    /// [`Tripwire::guard_batch`] of facts not yet numbered, held as
    /// [`Fact`]s (their `seq` is ignored, and a tripped fact put in gets
    /// 0): checked where they stand, never moved (the recorder's writer
    /// guards every batch this way).
    pub fn guard_facts(
        &self,
        point: &str,
        rule: &str,
        outside: Option<&str>,
        facts: &mut Vec<Fact>,
        buf: &mut Vec<u8>,
    ) -> usize {
        if self.is_empty() {
            return 0;
        }
        // One scan over every string of the batch (each string ends with a
        // byte no pattern holds, so no match spans two): a batch without a
        // hit, the rule, costs one pass, not one per fact.
        buf.clear();
        for fact in facts.iter() {
            strings::gather(fact, buf);
        }
        if self.scan(buf).is_none() {
            return 0;
        }
        let mut added = 0;
        let mut i = 0;
        while i < facts.len() {
            let fact = &mut facts[i];
            let hits = self.check_fact(fact, buf);
            if hits.is_empty() {
                i += 1;
                continue;
            }
            let trips: Vec<Fact> = hits
                .iter()
                .map(|hit| Fact {
                    seq: 0,
                    at: fact.at,
                    offset: fact.offset,
                    call: fact.call.clone(),
                    kind: tripped(point, rule, fact.kind.name(), hit),
                })
                .collect();
            let ends = ends_stream(outside, fact.call.as_deref(), &fact.kind);
            let n = trips.len();
            let at = if ends { i } else { i + 1 };
            facts.splice(at..at, trips);
            added += n;
            i += n + 1;
        }
        added
    }
}

impl Tripwire {
    /// Checks a tape before it is written: its facts as
    /// [`Tripwire::guard_batch`] does (seqs renumbered from the first
    /// fact's where tripped facts were put in), its header's run record
    /// (labels) scrubbed, and an artifact holding a secret withheld from
    /// the tape, named by a `redaction.tripped` fact (`fact`: `artifact`,
    /// `field`: its digest) before the stream's end. How many tripped
    /// facts were added.
    pub fn guard_tape(&self, tape: &mut Tape, point: &str, rule: &str) -> usize {
        if self.is_empty() {
            return 0;
        }
        let outside = tape.header.run.outside_run.clone();
        let base = tape.facts.first().map_or(0, |f| f.seq);
        let mut facts: Vec<NewFact> = std::mem::take(&mut tape.facts)
            .into_iter()
            .map(Fact::into_new)
            .collect();
        let mut buf = Vec::new();
        let mut added = self.guard_batch(point, rule, outside.as_deref(), &mut facts, &mut buf);
        let mut artifacts = std::mem::take(&mut tape.artifacts);
        let mut withheld = Vec::new();
        artifacts.retain(|(digest, bytes)| match self.scan(bytes) {
            Some(encoding) => {
                withheld.push(Hit {
                    field: digest.clone(),
                    encoding,
                });
                false
            }
            None => true,
        });
        for hit in withheld {
            let last = facts.last();
            let (at, offset, call) =
                last.map_or((0, 0, None), |f| (f.at, f.offset, f.call.clone()));
            let ends =
                last.is_some_and(|f| ends_stream(outside.as_deref(), f.call.as_deref(), &f.kind));
            let fact = NewFact {
                at,
                offset,
                call,
                kind: tripped(point, rule, "artifact", &hit),
            };
            let i = if ends { facts.len() - 1 } else { facts.len() };
            facts.insert(i, fact);
            added += 1;
        }
        let mut run = tape.header.run.clone();
        if let Ok(mut value) = serde_json::to_value(&run) {
            let mut hits = Vec::new();
            self.scrub_json(&mut value, &mut String::new(), &mut hits);
            if !hits.is_empty() {
                if let Ok(scrubbed) = serde_json::from_value(value) {
                    run = scrubbed;
                }
            }
        }
        run.facts += added as u64;
        let facts = facts
            .into_iter()
            .enumerate()
            .map(|(i, f)| f.with_seq(base + i as u64))
            .collect();
        *tape = Tape::new(run, facts, artifacts);
        added
    }
}

/// The core's seam ([`Guard`]): what the archive's tape export and the
/// OTLP export call, with this tripwire passed in by the host.
impl Guard for Tripwire {
    fn is_empty(&self) -> bool {
        Tripwire::is_empty(self)
    }

    fn scan(&self, bytes: &[u8]) -> Option<Encoding> {
        Tripwire::scan(self, bytes)
    }

    fn scrub_str(&self, text: &mut String) -> Option<Encoding> {
        Tripwire::scrub_str(self, text)
    }

    fn guard_tape(&self, tape: &mut Tape, point: &str, rule: &str) -> usize {
        Tripwire::guard_tape(self, tape, point, rule)
    }
}

/// The `redaction.tripped` fact of `hit` in a fact of kind `fact`.
pub fn tripped(point: &str, rule: &str, fact: &str, hit: &Hit) -> FactKind {
    FactKind::RedactionTripped(RedactionTripped {
        point: point.to_owned(),
        fact: fact.to_owned(),
        field: hit.field.clone(),
        encoding: hit.encoding.as_str().to_owned(),
        rule: rule.to_owned(),
    })
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests;

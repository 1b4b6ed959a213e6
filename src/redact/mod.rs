//! Redaction: what runs on every fact before it leaves the process.
//!
//! Two passes over every fact, in this order:
//!
//! 1. **Secret-named keys.** An object member (of any JSON field, or a run
//!    label) whose key names a secret has its value replaced by [`MARKER`],
//!    whatever its length or JSON type. A key names a secret when its words
//!    (split at `_`, `-`, `.`, spaces and camelCase humps, lower-cased)
//!    contain the words of a rule in a row: the rule `api_key` matches
//!    `apiKey`, `x-api-key` and `API_KEY`, the rule `token` matches
//!    `access_token` and `refreshToken` but not `max_tokens`. Words after
//!    the rule's that say "how many" ([`QUANTITY_AFTER`]: `count`, `usage`,
//!    `limit`, ...) or one right before them ([`QUANTITY_BEFORE`]: `max`,
//!    `num`, ...) make the key name a quantity, not a secret: `token_count`,
//!    `promptTokenCount`, `token_usage` and `max_token` are kept, so the
//!    usage fields of the model APIs (OpenAI, Anthropic, Gemini, Bedrock)
//!    are recorded as sent; so is MCP's `progressToken`, a correlation id
//!    ([`ID_BEFORE`]). The value also joins the run's
//!    [`KnownSecrets`]: every string in it, and the numbers that stand
//!    under a secret-named key itself (directly or in an array), not those
//!    under a plain key of an object inside one (`expires_in`, a count). A
//!    number is never learned from a key that does not name a secret.
//!    A string holding a token with a secret's prefix
//!    ([`SECRET_PREFIXES`]: `whsec_`, a webhook signing secret) teaches
//!    that token too, whatever its key.
//! 2. **Known secret values.** Every occurrence of a known secret (a
//!    credential the recorder resolved in this run, or a value learned in
//!    pass 1 from this fact or an earlier one of the run) is replaced by
//!    [`MARKER`], in every string of the fact: JSON strings and object keys
//!    (and JSON numbers, replaced whole when their text holds one),
//!    labels and their keys, and every free-text and name field (tool and
//!    effect names, sub-flow names, media types, artifact ids, messages,
//!    reasons, ...). The fields left alone are the identifiers the host
//!    chooses or reel derives: run and session ids, the caller's identity,
//!    call ids, artifact digests, scopes and origins, teardown key hashes,
//!    credential fingerprints and an unknown kind's name. The walk over a
//!    fact's fields names every field of every kind, so a field added later
//!    does not compile until it is placed on one side or the other.
//!
//! Occurrences are found for all known values at once (Aho-Corasick,
//! overlapping matches); overlapping and adjacent-inside matches are merged
//! and each merged span is replaced once, so the result does not depend on
//! the order secrets became known (a secret that is a prefix of another
//! leaves nothing of the longer one behind). A value holding quotes,
//! backslashes or control characters is also looked for in the escaped
//! forms that `{:?}` and JSON text give it (an error message quoting a
//! need name, a log line embedding a JSON body).
//!
//! # False positives
//!
//! A value shorter than [`MIN_ANYWHERE`] characters, and any value learned
//! from a JSON number, is scrubbed only where it stands as a whole token:
//! where it begins (ends) with a letter or digit, the character before (after)
//! it must not be a letter or digit. So a learned `5` scrubs `step 5 of 9` and
//! `pin=5;` but not `v15`, and `hzkQx` scrubs `bad password hzkQx` but not
//! `hzkQxy`. Longer values are scrubbed wherever they occur, inside words
//! too. Booleans, `null`, empty strings, the strings `true`, `false` and
//! `null`, and [`MARKER`] itself are never learned (they are still replaced
//! where they stand under a secret-named key).
//!
//! ```
//! use reel::redact::{KnownSecrets, Redactor, MARKER};
//! use serde_json::json;
//!
//! let r = Redactor::new(&["session_cookie"]);
//! let mut known = KnownSecrets::new();
//! let mut v = json!({"user": "ann", "apiKey": "k-123", "max_tokens": 5, "session-cookie": "c",
//!                    "note": "sent k-123 and c"});
//! r.redact_value(&mut v, &mut known);
//! assert_eq!(v, json!({"user": "ann", "apiKey": MARKER, "max_tokens": 5, "session-cookie": MARKER,
//!                      "note": "sent [REDACTED] and [REDACTED]"}));
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

use crate::fact::*;
use crate::secret::Secret;
use reel_core::marker::each_json_field_mut;

mod keys;
mod known;
#[cfg(test)]
mod tests;
mod walk;

use keys::*;
use walk::*;

pub use keys::{ID_BEFORE, QUANTITY_AFTER, QUANTITY_BEFORE};
pub use known::{KnownSecrets, MIN_ANYWHERE};

/// The record's markers and the JSON-field helpers redaction shares with
/// every reader; they live in the core ([`reel_core::marker`]).
pub use reel_core::marker::{
    approx_size, artifact_ref, cap_depth, json_fields_mut, spill_large, ARTIFACT_REF,
    KEYED_MARKER_PREFIX, MARKER, MAX_JSON_DEPTH, NESTED,
};

/// True when `text` is one marker, bare or keyed, and nothing else.
pub(crate) fn is_marker(text: &str) -> bool {
    matches!(reel_core::marker::marker_spans(text)[..], [m] if m.start == 0 && m.end == text.len())
}

/// The purpose a [`Tagger`]'s MAC is keyed for (the archive's
/// `keyed_mac(TAG_PURPOSE, ..)`), apart from every other use of the key.
pub const TAG_PURPOSE: &str = "reel/redacted-value";

/// Keys the marker of a hidden value: a keyed MAC (HMAC-SHA256 under the
/// archive's fingerprint key for [`TAG_PURPOSE`], which never lives in
/// the archive) of the value, of which the marker keeps 8 bytes
/// (`[REDACTED:` and 16 hex digits `]`). A recording and a replay keyed
/// alike write the same marker for the same value, so the replay can
/// prove equality where a bare [`MARKER`] proves nothing; a reader
/// without the key learns only "same" or "not the same".
#[derive(Clone)]
pub struct Tagger(Arc<KeyedMac>);

/// A keyed MAC over bytes.
type KeyedMac = dyn Fn(&[u8]) -> [u8; 32] + Send + Sync;

impl Tagger {
    /// A tagger over `mac` (for example
    /// `move |b| archive.keyed_mac(TAG_PURPOSE, b)`).
    pub fn new(mac: impl Fn(&[u8]) -> [u8; 32] + Send + Sync + 'static) -> Tagger {
        Tagger(Arc::new(mac))
    }

    /// The keyed marker of the hidden `value`.
    pub fn marker(&self, value: &[u8]) -> String {
        reel_core::marker::keyed_marker(&(self.0)(value))
    }
}

impl std::fmt::Debug for Tagger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tagger(..)")
    }
}

/// The rules every redactor starts with.
pub const DEFAULT_RULES: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "token",
    "secret",
    "authorization",
    "api_key",
    "apikey",
    "private_key",
    "cookie",
    "set_cookie",
    "credential",
    "credentials",
    "client_secret",
    // MCP's SEP-3221: values a host injects into a `tools/call` apart from
    // the model's `arguments` (infrastructure coordinates, tenants).
    "secure_arguments",
];

/// Prefixes of secrets recognised by their value, under any key: a string
/// holding one followed by token characters teaches that token to the
/// run's [`KnownSecrets`] in pass 1, so pass 2 scrubs it here and later.
/// `whsec_`: a webhook signing secret (Standard Webhooks, Svix, Stripe).
pub const SECRET_PREFIXES: &[&str] = &["whsec_"];

/// Learns every token of `text` that begins with one of
/// [`SECRET_PREFIXES`] (the prefix and the letters, digits, `+`, `/`, `=`,
/// `_` and `-` after it; a prefix with nothing after it is not one).
pub(crate) fn learn_prefixed(text: &str, secrets: &mut KnownSecrets) {
    for prefix in SECRET_PREFIXES {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let after = &rest[at + prefix.len()..];
            let len = after
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || b"+/=_-".contains(b))
                .count();
            if len > 0 {
                let token = &rest[at..at + prefix.len() + len];
                secrets.add(crate::context::Secret::new(token));
            }
            rest = &after[len..];
        }
    }
}

/// Key rules plus the redaction logic.
#[derive(Debug, Clone)]
pub struct Redactor {
    rules: Vec<Vec<String>>,
    /// The first word of every rule: a key names a secret only if one of
    /// its words is one of these (the fast rejection of [`Redactor::is_secret_key`]).
    first_words: Vec<String>,
    /// Bit `n` is set when a first word is `n` bytes long (63: 63 or more).
    first_lens: u64,
    /// Bit `b` is set when a first word begins with the ASCII byte `b`
    /// (rule words are lower case).
    first_bytes: u128,
    /// Keys the markers (see [`Redactor::keyed`]); `None`: bare markers,
    /// but for credentials, whose marker comes from their fingerprint.
    tagger: Option<Tagger>,
}

impl Default for Redactor {
    fn default() -> Redactor {
        Redactor::new::<&str>(&[])
    }
}

impl Redactor {
    /// The default rules plus `extra` (each rule is a key name, split into
    /// words like keys are).
    pub fn new<S: AsRef<str>>(extra: &[S]) -> Redactor {
        let rules = DEFAULT_RULES
            .iter()
            .copied()
            .chain(extra.iter().map(AsRef::as_ref))
            .map(words)
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>();
        let mut first_words: Vec<String> = rules.iter().map(|r| r[0].clone()).collect();
        first_words.sort();
        first_words.dedup();
        let first_lens = first_words
            .iter()
            .fold(0u64, |m, w| m | 1 << w.len().min(63));
        let first_bytes = first_words
            .iter()
            .filter_map(|w| w.bytes().next())
            .filter(u8::is_ascii)
            .fold(0u128, |m, b| m | 1 << b);
        Redactor {
            rules,
            first_words,
            first_lens,
            first_bytes,
            tagger: None,
        }
    }

    /// This redactor with keyed markers: each hidden value is replaced by
    /// `[REDACTED:` and a 16-hex tag `]` that `tagger` keys (see
    /// [`Tagger`]), so a replay keyed alike can prove it unchanged. The
    /// recorder keys with its archive's fingerprint key.
    pub fn keyed(mut self, tagger: Tagger) -> Redactor {
        self.tagger = Some(tagger);
        self
    }

    /// True when `word` (a slice of a key) may begin a rule.
    fn begins_rule(&self, word: &str) -> bool {
        // An ASCII word keeps its length when lower-cased: most words are
        // rejected on their length alone.
        if word.is_ascii() {
            let len = word.len();
            // Lower-casing an ASCII word keeps it ASCII: a rule word that
            // does not begin with its first byte cannot be it.
            let first = word.as_bytes().first().map_or(0, u8::to_ascii_lowercase);
            return self.first_lens & (1 << len.min(63)) != 0
                && self.first_bytes & (1 << first) != 0
                && self
                    .first_words
                    .iter()
                    .any(|r| r.len() == len && word.eq_ignore_ascii_case(r));
        }
        self.first_words.iter().any(|r| word_is(word, r))
    }

    /// True when `key` names a secret.
    pub fn is_secret_key(&self, key: &str) -> bool {
        // Called for every object member of every recorded payload, so the
        // common case (no word of the key begins a rule) is rejected first,
        // and nothing allocates: the words stay slices of the key, compared
        // to the rules case-insensitively.
        let mut candidate = false;
        split_words(key, |w| candidate = candidate || self.begins_rule(w));
        if !candidate {
            return false;
        }
        let mut stack = [""; STACK_WORDS];
        let mut n = 0;
        split_words(key, |w| {
            if n < STACK_WORDS {
                stack[n] = w;
            }
            n += 1;
        });
        if n > STACK_WORDS {
            return self.names_secret(&words(key));
        }
        self.names_secret(&stack[..n])
    }

    /// True when the words of a key (as they stand in it, or lower-cased)
    /// hold a rule's words in a row that do not name a quantity (see
    /// [`QUANTITY_AFTER`]) or a protocol's correlation id ([`ID_BEFORE`]).
    fn names_secret<W: AsRef<str>>(&self, w: &[W]) -> bool {
        let is = |word: &W, r: &str| word_is(word.as_ref(), r);
        self.rules.iter().any(|rule| {
            let n = rule.len();
            (0..(w.len() + 1).saturating_sub(n)).any(|i| {
                w[i..i + n].iter().zip(rule).all(|(word, r)| is(word, r))
                    && !i.checked_sub(1).is_some_and(|b| {
                        QUANTITY_BEFORE
                            .iter()
                            .chain(ID_BEFORE)
                            .any(|q| is(&w[b], q))
                    })
                    && !w[i + n..]
                        .iter()
                        .any(|word| QUANTITY_AFTER.iter().any(|q| is(word, q)))
            })
        })
    }

    /// Redacts one JSON value in place: secret-named members are replaced
    /// (and their values learned into `secrets`), then every occurrence of a
    /// known secret in its strings and object keys.
    pub fn redact_value(&self, value: &mut Value, secrets: &mut KnownSecrets) {
        self.mark_json(value, secrets);
        if let Some(scrubber) = secrets.scrubber(self.tagger.as_ref()) {
            scrubber.json(value);
        }
    }

    /// Redacts every string of a fact in place (see the module docs): first
    /// the values under secret-named keys, which join `secrets`, then every
    /// occurrence of every known secret. Then caps the nesting of its JSON
    /// values (see [`cap_depth`]).
    ///
    /// `secrets` is the run's: call this for a run's facts in order, with
    /// the same `secrets`, so that a value learned from one fact is scrubbed
    /// from it and from every later one.
    pub fn redact_fact(&self, kind: &mut FactKind, secrets: &mut KnownSecrets) {
        // One walk in the common case: pass 1 also notes whether any JSON
        // value nests past the cap, and pass 2 runs only when the run knows
        // a secret. (Three walks, one of them the cap's, were a sixth of the
        // recorder's writer thread.)
        let mut mark = MarkPass {
            redactor: self,
            secrets,
            deep: false,
        };
        walk_fields(kind, &mut mark);
        let deep = mark.deep;
        if let Some(mut scrubber) = secrets.scrubber(self.tagger.as_ref()) {
            walk_fields(kind, &mut scrubber);
        }
        // Capped after redaction: a capped subtree is JSON text, where a
        // secret-named key would no longer be seen as a key.
        if deep {
            each_json_field_mut(kind, cap_depth);
        }
    }

    /// The marker for `value`, found under a secret-named key, before it
    /// is learned: keyed over its text (a string as it is, anything else
    /// as JSON) with the credentials in it marked, or bare unkeyed.
    pub(super) fn hidden(&self, value: &Value, secrets: &mut KnownSecrets) -> String {
        if let Value::String(s) = value {
            // Already a marker (a recorded value a replay hands back).
            if is_marker(s) {
                return s.clone();
            }
        }
        if self.tagger.is_none() && secrets.is_empty() {
            return MARKER.to_owned();
        }
        let json;
        let text = match value {
            Value::String(s) => s.as_str(),
            other => {
                json = other.to_string();
                json.as_str()
            }
        };
        match secrets.scrubber(self.tagger.as_ref()) {
            Some(scrubber) => scrubber.whole(text),
            None => match &self.tagger {
                Some(t) => t.marker(text.as_bytes()),
                None => MARKER.to_owned(),
            },
        }
    }

    /// Pass 1 over a JSON value: replaces the values of secret-named
    /// members by [`MARKER`] and learns them.
    fn mark_json(&self, value: &mut Value, secrets: &mut KnownSecrets) {
        self.mark_json_at(value, secrets, 0);
    }

    /// [`Redactor::mark_json`] of a value at `depth` (the root is 0): true
    /// when an array or object in it sits at [`MAX_JSON_DEPTH`] or deeper
    /// (where [`cap_depth`] cuts), as it stands after marking.
    fn mark_json_at(&self, value: &mut Value, secrets: &mut KnownSecrets, depth: usize) -> bool {
        match value {
            Value::Array(items) => {
                let mut deep = depth >= MAX_JSON_DEPTH;
                for v in items {
                    deep |= self.mark_json_at(v, secrets, depth + 1);
                }
                deep
            }
            Value::Object(map) => {
                let mut deep = depth >= MAX_JSON_DEPTH;
                for (k, v) in map.iter_mut() {
                    if self.is_secret_key(k) {
                        let marker = self.hidden(v, secrets);
                        secrets.learn(v, known::Under::SecretKey, self);
                        *v = Value::String(marker);
                    } else {
                        deep |= self.mark_json_at(v, secrets, depth + 1);
                    }
                }
                deep
            }
            Value::String(text) => {
                learn_prefixed(text, secrets);
                false
            }
            _ => false,
        }
    }
}

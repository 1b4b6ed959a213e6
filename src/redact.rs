//! Redaction: what runs on every fact before it leaves the process.
//!
//! Two passes over every JSON value and free-text field of a fact:
//!
//! 1. **Secret-named keys.** An object member whose key names a secret has
//!    its value replaced by [`MARKER`]. A key names a secret when its words
//!    (split at `_`, `-`, `.`, spaces and camelCase humps, lower-cased)
//!    contain the words of a rule in a row: the rule `api_key` matches
//!    `apiKey`, `x-api-key` and `API_KEY`, the rule `token` matches
//!    `access_token` and `refreshToken` but not `max_tokens`.
//! 2. **Known secret values.** Every occurrence of a credential value the
//!    recorder resolved in this run is replaced by [`MARKER`], wherever it
//!    appears (a tool that logs its token still leaks nothing).
//!
//! ```
//! use reel::redact::{Redactor, MARKER};
//! use serde_json::json;
//!
//! let r = Redactor::new(&["session_cookie"]);
//! let mut v = json!({"user": "ann", "apiKey": "k-123", "max_tokens": 5, "session-cookie": "c"});
//! r.redact_value(&mut v, &[]);
//! assert_eq!(v, json!({"user": "ann", "apiKey": MARKER, "max_tokens": 5, "session-cookie": MARKER}));
//! ```

use serde_json::Value;

use crate::fact::*;

/// What a redacted value is replaced with.
pub const MARKER: &str = "[REDACTED]";

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
];

/// Key rules plus the redaction logic.
#[derive(Debug, Clone)]
pub struct Redactor {
    rules: Vec<Vec<String>>,
    /// The first word of every rule: a key names a secret only if one of
    /// its words is one of these (the fast rejection of [`Redactor::is_secret_key`]).
    first_words: Vec<String>,
    /// Bit `n` is set when a first word is `n` bytes long (63: 63 or more).
    first_lens: u64,
}

impl Default for Redactor {
    fn default() -> Redactor {
        Redactor::new::<&str>(&[])
    }
}

/// Calls `each` with every word of `key`, as a slice of `key` (not yet
/// lower-cased): words are split at `_`, `-`, `.`, spaces, `/` and before an
/// upper-case letter that follows a lower-case letter or a digit.
fn split_words<'k>(key: &'k str, mut each: impl FnMut(&'k str)) {
    if key.is_ascii() {
        // The same rules on bytes (for ASCII, `char::is_uppercase` is
        // `is_ascii_uppercase`, and so on), without decoding UTF-8.
        let bytes = key.as_bytes();
        let mut start: Option<usize> = None;
        let mut prev_lower = false;
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'_' || b == b'-' || b == b'.' || b == b' ' || b == b'/' {
                if let Some(s) = start.take() {
                    each(&key[s..i]);
                }
                prev_lower = false;
                continue;
            }
            if b.is_ascii_uppercase() && prev_lower {
                if let Some(s) = start.take() {
                    each(&key[s..i]);
                }
            }
            start.get_or_insert(i);
            prev_lower = b.is_ascii_lowercase() || b.is_ascii_digit();
        }
        if let Some(s) = start {
            each(&key[s..]);
        }
        return;
    }
    let mut start: Option<usize> = None;
    let mut prev_lower = false;
    for (i, ch) in key.char_indices() {
        if ch == '_' || ch == '-' || ch == '.' || ch == ' ' || ch == '/' {
            if let Some(s) = start.take() {
                each(&key[s..i]);
            }
            prev_lower = false;
            continue;
        }
        if ch.is_uppercase() && prev_lower {
            if let Some(s) = start.take() {
                each(&key[s..i]);
            }
        }
        start.get_or_insert(i);
        prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
    }
    if let Some(s) = start {
        each(&key[s..]);
    }
}

/// Splits a key into lower-case words.
fn words(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    split_words(key, |w| {
        out.push(w.chars().flat_map(char::to_lowercase).collect())
    });
    out
}

/// True when the word `word` (a slice of a key), lower-cased, is `rule`
/// (a lower-case rule word). Allocation-free.
#[inline]
fn word_is(word: &str, rule: &str) -> bool {
    if word.is_ascii() {
        // Lower-casing keeps an ASCII word's length; the rule is lower case.
        word.len() == rule.len() && word.eq_ignore_ascii_case(rule)
    } else {
        word.chars().flat_map(char::to_lowercase).eq(rule.chars())
    }
}

/// Keys with at most this many words are matched without allocating.
const STACK_WORDS: usize = 16;

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
        Redactor {
            rules,
            first_words,
            first_lens,
        }
    }

    /// True when `word` (a slice of a key) may begin a rule.
    fn begins_rule(&self, word: &str) -> bool {
        // An ASCII word keeps its length when lower-cased: most words are
        // rejected on their length alone.
        if word.is_ascii() {
            let len = word.len();
            return self.first_lens & (1 << len.min(63)) != 0
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
            let w = words(key);
            return self
                .rules
                .iter()
                .any(|rule| w.windows(rule.len()).any(|win| win == rule.as_slice()));
        }
        let w = &stack[..n];
        self.rules.iter().any(|rule| {
            w.windows(rule.len())
                .any(|win| win.iter().zip(rule).all(|(word, r)| word_is(word, r)))
        })
    }

    /// Redacts one JSON value in place: secret-named members, and every
    /// occurrence of a known secret value inside strings.
    pub fn redact_value(&self, value: &mut Value, secrets: &[&str]) {
        match value {
            Value::String(s) => scrub(s, secrets),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_value(v, secrets)),
            Value::Object(map) => {
                // Keys may themselves carry a secret value.
                if !secrets.is_empty() && map.keys().any(|k| secrets.iter().any(|s| k.contains(s)))
                {
                    let old = std::mem::take(map);
                    for (mut k, v) in old {
                        scrub(&mut k, secrets);
                        map.insert(k, v);
                    }
                }
                for (k, v) in map.iter_mut() {
                    if self.is_secret_key(k) {
                        *v = Value::String(MARKER.into());
                    } else {
                        self.redact_value(v, secrets);
                    }
                }
            }
            _ => {}
        }
    }

    /// The string values (6 characters or longer) that stand under
    /// secret-named keys in `value`. A host scrubs them from the rest of the
    /// run, so that an error message echoing an argument leaks nothing.
    pub fn secret_values(&self, value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Array(items) => items.iter().for_each(|v| self.secret_values(v, out)),
            Value::Object(map) => {
                for (k, v) in map {
                    if self.is_secret_key(k) {
                        collect_strings(v, out);
                    } else {
                        self.secret_values(v, out);
                    }
                }
            }
            _ => {}
        }
    }

    /// Redacts every JSON value and free-text field of a fact in place,
    /// and caps the nesting of its JSON values (see [`cap_depth`]).
    pub fn redact_fact(&self, kind: &mut FactKind, secrets: &[&str]) {
        self.redact_fields(kind, secrets);
        // Capped after redaction: a capped subtree is JSON text, where a
        // secret-named key would no longer be seen as a key.
        each_json_field_mut(kind, cap_depth);
    }

    fn redact_fields(&self, kind: &mut FactKind, secrets: &[&str]) {
        let v = |value: &mut Value| self.redact_value(value, secrets);
        let s = |text: &mut String| scrub(text, secrets);
        match kind {
            FactKind::RunStarted(r) => {
                for val in r.labels.values_mut() {
                    s(val);
                }
            }
            FactKind::CallStarted(c) => v(&mut c.args),
            FactKind::CredentialRequested(_) | FactKind::CredentialResolved(_) => {}
            FactKind::CredentialFailed(c) => s(&mut c.reason),
            FactKind::CredentialRefused(c) => s(&mut c.reason),
            FactKind::ArtifactPut(_) | FactKind::ArtifactGet(_) => {}
            FactKind::ArtifactRefused(a) => s(&mut a.reason),
            FactKind::Progress(p) => v(&mut p.payload),
            FactKind::Log(l) => v(&mut l.data),
            FactKind::ElicitRequested(e) => {
                s(&mut e.message);
                v(&mut e.schema);
            }
            FactKind::ElicitAnswered(e) => {
                if let ElicitOutcome::Accept { content } = &mut e.outcome {
                    v(content);
                }
                e.validation_errors.iter_mut().for_each(s);
            }
            FactKind::TeardownRegistered(_) => {}
            FactKind::TeardownRefused(t) => s(&mut t.reason),
            FactKind::TeardownRan(t) => {
                if let TeardownOutcome::Error { message } = &mut t.outcome {
                    s(message);
                }
            }
            FactKind::Effect(e) => {
                v(&mut e.request);
                match &mut e.outcome {
                    EffectOutcome::Ok(val) => v(val),
                    EffectOutcome::Err(msg) => s(msg),
                }
            }
            FactKind::Clock(_) | FactKind::Random(_) => {}
            FactKind::CancelRequested(c) => {
                if let Some(r) = &mut c.reason {
                    s(r);
                }
            }
            FactKind::CallOutput(o) => {
                v(&mut o.value);
                o.stage.iter_mut().chain(o.note.iter_mut()).for_each(s);
            }
            FactKind::CallEnded(e) => match &mut e.outcome {
                CallOutcome::Ok { result } => v(result),
                CallOutcome::Error { error } => s(error),
                CallOutcome::Aborted { reason } => {
                    if let Some(r) = reason {
                        s(r);
                    }
                }
            },
            FactKind::RunEnded(_) => {}
            FactKind::Unknown { data, .. } => v(data),
        }
    }
}

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
fn each_json_field_mut<'a>(kind: &'a mut FactKind, mut each: impl FnMut(&'a mut Value)) {
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
        FactKind::Unknown { data, .. } => each(data),
        _ => {}
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

/// Replaces every occurrence of each secret in `text` by [`MARKER`].
fn collect_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) if s.chars().count() >= 6 => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

fn scrub(text: &mut String, secrets: &[&str]) {
    for secret in secrets {
        if !secret.is_empty() && text.contains(secret) {
            *text = text.replace(secret, MARKER);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(key: &str, secret: bool) {
        assert_eq!(
            Redactor::default().is_secret_key(key),
            secret,
            "key {key:?}"
        );
    }

    #[test]
    fn key_rules() {
        for (key, secret) in [
            ("password", true),
            ("Password", true),
            ("user_password", true),
            ("access_token", true),
            ("refreshToken", true),
            ("x-api-key", true),
            ("API_KEY", true),
            ("apiKey", true),
            ("Authorization", true),
            ("client_secret", true),
            ("max_tokens", false),
            ("tokens_used", false),
            ("username", false),
            ("message", false),
            ("keyboard", false),
            ("secretary", false),
        ] {
            check(key, secret);
        }
    }

    /// The allocation-free matcher agrees with matching on the allocated
    /// lower-case words, key by key.
    #[test]
    fn key_matching_agrees_with_the_word_lists() {
        let r = Redactor::new(&["session_cookie", "x-Ärger", "İd"]);
        let reference = |key: &str| {
            let w = words(key);
            r.rules
                .iter()
                .any(|rule| w.windows(rule.len()).any(|win| win == rule.as_slice()))
        };
        let long = "a_".repeat(STACK_WORDS + 3) + "api_key";
        let keys = [
            "",
            "_",
            "__token__",
            "token",
            "TOKEN",
            "Token",
            "toKen",
            "maxTokens",
            "max_tokens",
            "apiKey",
            "APIKey",
            "api.key",
            "api key",
            "api/key",
            "x-api-key",
            "apikey",
            "ApiKeys",
            "session-cookie",
            "sessionCookie",
            "SESSION_COOKIE",
            "set-cookie",
            "client_secret",
            "clientSecret2",
            "secret2",
            "v2Token",
            "passwört",
            "PASSWÖRT",
            "x_ärger",
            "X-ÄRGER",
            "xÄrger",
            "İd",
            "id",
            "İD",
            "i\u{307}d",
            "ǅungla",
            "message",
            "done",
            "total",
            "privateKey",
            "private_key_id",
            "credentials",
            "authorizationHeader",
            long.as_str(),
            &"w".repeat(200),
            "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p_q",
            "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p",
            "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_token",
        ];
        for key in keys {
            assert_eq!(r.is_secret_key(key), reference(key), "key {key:?}");
        }
    }

    #[test]
    fn deep_values_are_kept_whole_as_text() {
        let mut deep = json!("leaf");
        for _ in 0..(MAX_JSON_DEPTH + 30) {
            deep = json!([deep]);
        }
        let original = deep.clone();
        cap_depth(&mut deep);
        // Walk down to the cap and parse the kept text back.
        let mut v = &deep;
        for _ in 0..MAX_JSON_DEPTH {
            v = &v[0];
        }
        let text = v[NESTED].as_str().expect("capped subtree");
        let rest: Value = serde_json::from_str(text).unwrap();
        let mut o = &original;
        for _ in 0..MAX_JSON_DEPTH {
            o = &o[0];
        }
        assert_eq!(&rest, o);
    }

    #[test]
    fn secrets_are_scrubbed_everywhere() {
        let r = Redactor::default();
        let mut v = json!({"note": "used ghp_abc to call", "list": ["ghp_abc"], "ghp_abc": 1});
        r.redact_value(&mut v, &["ghp_abc"]);
        let text = v.to_string();
        assert!(!text.contains("ghp_abc"), "{text}");
        assert_eq!(v["note"], json!("used [REDACTED] to call"));
    }
}

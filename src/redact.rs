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
//!    are recorded as sent. The value also joins the run's
//!    [`KnownSecrets`]: every string in it, and the numbers that stand
//!    under a secret-named key itself (directly or in an array), not those
//!    under a plain key of an object inside one (`expires_in`, a count). A
//!    number is never learned from a key that does not name a secret.
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

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

use crate::secret::Secret;
use crate::fact::*;
use reel_core::marker::each_json_field_mut;

/// The record's markers and the JSON-field helpers redaction shares with
/// every reader; they live in the core ([`reel_core::marker`]).
pub use reel_core::marker::{
    approx_size, artifact_ref, cap_depth, json_fields_mut, spill_large, ARTIFACT_REF, MARKER,
    MAX_JSON_DEPTH, NESTED,
};

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
    /// Bit `b` is set when a first word begins with the ASCII byte `b`
    /// (rule words are lower case).
    first_bytes: u128,
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

/// Words that, anywhere after a rule's words in a key, make it name a
/// quantity of the thing rather than the thing: `token_count`,
/// `promptTokenCount`, `token_usage`, `password_length` hold numbers about
/// tokens and passwords, never one.
///
/// Not `per`: `token_per_user` may hold a token for each user.
pub const QUANTITY_AFTER: &[&str] = &[
    "count", "counts", "usage", "usages", "limit", "limits", "budget", "total", "rate", "length",
    "len",
];

/// Words that, right before a rule's words in a key, make it name a
/// quantity: `max_token`, `num_token`, `total_token`.
pub const QUANTITY_BEFORE: &[&str] = &["max", "min", "num", "total"];

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
        }
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
    /// [`QUANTITY_AFTER`]).
    fn names_secret<W: AsRef<str>>(&self, w: &[W]) -> bool {
        let is = |word: &W, r: &str| word_is(word.as_ref(), r);
        self.rules.iter().any(|rule| {
            let n = rule.len();
            (0..(w.len() + 1).saturating_sub(n)).any(|i| {
                w[i..i + n].iter().zip(rule).all(|(word, r)| is(word, r))
                    && !i
                        .checked_sub(1)
                        .is_some_and(|b| QUANTITY_BEFORE.iter().any(|q| is(&w[b], q)))
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
        if let Some(scrubber) = secrets.scrubber() {
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
        if let Some(mut scrubber) = secrets.scrubber() {
            walk_fields(kind, &mut scrubber);
        }
        // Capped after redaction: a capped subtree is JSON text, where a
        // secret-named key would no longer be seen as a key.
        if deep {
            each_json_field_mut(kind, cap_depth);
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
                        secrets.learn(v, true, self);
                        *v = Value::String(MARKER.into());
                    } else {
                        deep |= self.mark_json_at(v, secrets, depth + 1);
                    }
                }
                deep
            }
            _ => false,
        }
    }
}

/// The fields of a fact, by what they hold. [`walk_fields`] calls these
/// for every string-bearing field of a fact.
trait Fields {
    /// A free-text or name field.
    fn text(&mut self, text: &mut String);
    /// A JSON field (payload, args, result, ...).
    fn json(&mut self, value: &mut Value);
    /// Run labels: keys and values are strings.
    fn labels(&mut self, labels: &mut BTreeMap<String, String>);
    /// The keys of a map whose keys are names (the values are walked apart).
    fn keys<V>(&mut self, map: &mut BTreeMap<String, V>);
}

fn opt_text(f: &mut impl Fields, text: &mut Option<String>) {
    if let Some(t) = text {
        f.text(t);
    }
}

fn meta_fields(f: &mut impl Fields, meta: &mut ArtifactMeta) {
    let ArtifactMeta {
        id,
        // A content address: scrubbing it would break the reference.
        digest: _,
        size: _,
        media_type,
        // The caller's identity and the run and call ids: the host's
        // identifiers, not a tool's text.
        scope: _,
        origin: _,
    } = meta;
    f.text(id);
    f.text(media_type);
}

/// A tool spec is the host's declaration: its texts are scrubbed of known
/// secrets like any other, but its schemas only in their string values, never
/// by key name (a schema's property named `token` is a name, not a secret,
/// and redacting it would destroy the schema).
fn spec_fields(f: &mut impl Fields, spec: &mut reel_core::spec::ToolSpec) {
    let reel_core::spec::ToolSpec {
        name,
        id,
        title,
        description,
        annotations: _,
        input_schema,
        output_schema,
        mode: _,
        needs,
        wants,
    } = spec;
    f.text(name);
    opt_text(f, id);
    opt_text(f, title);
    opt_text(f, description);
    schema_strings(f, input_schema);
    if let Some(schema) = output_schema {
        schema_strings(f, schema);
    }
    for need in needs {
        f.text(need);
    }
    for want in wants {
        f.text(want);
    }
}

fn schema_strings(f: &mut impl Fields, value: &mut Value) {
    match value {
        Value::String(s) => f.text(s),
        Value::Array(items) => items.iter_mut().for_each(|v| schema_strings(f, v)),
        Value::Object(members) => {
            // Property names are scrubbed of known secrets too (as text: a
            // name like `token` is kept); a name that scrubs into another
            // is kept apart, never merged.
            let old = std::mem::take(members);
            for (mut key, mut v) in old {
                f.text(&mut key);
                schema_strings(f, &mut v);
                let mut unique = key.clone();
                let mut n = 2;
                while members.contains_key(&unique) {
                    unique = format!("{key} #{n}");
                    n += 1;
                }
                members.insert(unique, v);
            }
        }
        _ => {}
    }
}

/// Calls `f` for every string-bearing field of a fact. Every field of every
/// kind is named here (no `..`): a field added to the catalogue does not
/// compile until it is either walked or named as left alone, with the
/// reason. What is left alone is the identifiers the host chooses (run and
/// session ids, the identity) or reel assigns or derives (call ids, digests,
/// origins, key hashes, fingerprints), none of which a tool writes.
fn walk_fields(kind: &mut FactKind, f: &mut impl Fields) {
    match kind {
        FactKind::RunStarted(RunStarted {
            run_id: _,
            session_id: _,
            identity: _,
            producer: Producer { name, version },
            labels,
            teardown_scopes: _,
        }) => {
            f.text(name);
            f.text(version);
            f.labels(labels);
        }
        FactKind::CallStarted(CallStarted {
            call_id: _,
            tool_name,
            tool_id,
            parent_call: _,
            iteration: _,
            invocation_id,
            mode: _,
            protocol,
            platform,
            client_info,
            args,
            wanted,
            attached: _,
            spec,
            dispatch_tools,
            outside_run,
        }) => {
            if let Some(outside) = outside_run {
                // The key is reel's; the session and identity are the
                // host's identifiers, left alone as in `run.started`.
                let OutsideRun {
                    key: _,
                    session_id: _,
                    identity: _,
                    producer: Producer { name, version },
                    labels,
                    teardown_scopes: _,
                } = &mut **outside;
                f.text(name);
                f.text(version);
                f.labels(labels);
            }
            if let Some(spec) = spec {
                spec_fields(f, spec);
            }
            dispatch_tools.iter_mut().flatten().for_each(|t| f.text(t));
            f.text(tool_name);
            opt_text(f, tool_id);
            opt_text(f, invocation_id);
            opt_text(f, protocol);
            opt_text(f, platform);
            if let Some(ClientInfo {
                name,
                version,
                title,
            }) = client_info
            {
                f.text(name);
                opt_text(f, version);
                opt_text(f, title);
            }
            f.json(args);
            if let Some(wanted) = wanted {
                f.keys(wanted);
                for meta in wanted.values_mut() {
                    meta_fields(f, meta);
                }
            }
        }
        FactKind::CredentialRequested(CredentialRequested {
            need,
            mode: _,
            kind,
        }) => {
            f.text(need);
            opt_text(f, kind);
        }
        FactKind::CredentialResolved(CredentialResolved {
            need,
            mode: _,
            kind,
            fingerprint: _,
            expires_at: _,
        }) => {
            f.text(need);
            opt_text(f, kind);
        }
        FactKind::CredentialFailed(CredentialFailed {
            need,
            mode: _,
            reason,
        })
        | FactKind::CredentialRefused(CredentialRefused {
            need,
            mode: _,
            reason,
        }) => {
            f.text(need);
            f.text(reason);
        }
        FactKind::ArtifactPut(ArtifactPut { meta }) => meta_fields(f, meta),
        FactKind::ArtifactGet(ArtifactGet { id, meta }) => {
            f.text(id);
            if let Some(meta) = meta {
                meta_fields(f, meta);
            }
        }
        FactKind::ArtifactRefused(ArtifactRefused { op: _, id, reason }) => {
            opt_text(f, id);
            f.text(reason);
        }
        FactKind::Progress(Progress { payload, count: _ }) => f.json(payload),
        FactKind::ProgressDropped(ProgressDropped { count: _ }) => {}
        // Written by the tripwire itself: names and a pointer, no value.
        FactKind::RedactionTripped(RedactionTripped {
            point,
            fact,
            field,
            encoding,
            rule,
        }) => {
            f.text(point);
            f.text(fact);
            f.text(field);
            f.text(encoding);
            f.text(rule);
        }
        FactKind::Log(Log {
            level: _,
            logger,
            subflow,
            data,
            delivered: _,
        }) => {
            opt_text(f, logger);
            opt_text(f, subflow);
            f.json(data);
        }
        FactKind::ElicitRequested(ElicitRequested {
            message,
            schema,
            mode: _,
            ttl_ms: _,
            url,
            elicitation_id,
        }) => {
            f.text(message);
            f.json(schema);
            opt_text(f, url);
            opt_text(f, elicitation_id);
        }
        FactKind::ElicitRefused(ElicitRefused {
            message,
            mode: _,
            reason,
        }) => {
            f.text(message);
            f.text(reason);
        }
        FactKind::ElicitAnswered(ElicitAnswered {
            outcome,
            validation_errors,
            pre_resolved: _,
        }) => {
            match outcome {
                ElicitOutcome::Accept { content } => f.json(content),
                ElicitOutcome::Error { message } => f.text(message),
                ElicitOutcome::Decline | ElicitOutcome::Cancel | ElicitOutcome::Timeout => {}
            }
            validation_errors.iter_mut().for_each(|e| f.text(e));
        }
        FactKind::TeardownRegistered(TeardownRegistered {
            scope: _,
            key_hash: _,
            first: _,
            registrations: _,
            registered_at: _,
        }) => {}
        FactKind::TeardownRefused(TeardownRefused {
            scope: _,
            key_hash: _,
            honoured: _,
            reason,
        }) => f.text(reason),
        FactKind::TeardownRan(TeardownRan {
            scope: _,
            key_hash: _,
            outcome,
            duration_ns: _,
            registrations: _,
            last_registered_at: _,
        }) => match outcome {
            TeardownOutcome::Error { message } => f.text(message),
            TeardownOutcome::Ok | TeardownOutcome::TimedOut => {}
        },
        FactKind::Effect(Effect {
            name,
            request,
            outcome,
        }) => {
            f.text(name);
            f.json(request);
            match outcome {
                EffectOutcome::Ok(value) => f.json(value),
                EffectOutcome::Err(message) => f.text(message),
            }
        }
        FactKind::Clock(Clock { unix_nanos: _ }) | FactKind::Random(Random { value: _ }) => {}
        FactKind::CancelRequested(CancelRequested { reason }) => opt_text(f, reason),
        FactKind::CallOutput(CallOutput { value, stage, note }) => {
            f.json(value);
            opt_text(f, stage);
            opt_text(f, note);
        }
        FactKind::CallEnded(CallEnded {
            outcome,
            duration_ns: _,
            invocation_id,
        }) => {
            opt_text(f, invocation_id);
            match outcome {
                CallOutcome::Ok { result } => f.json(result),
                CallOutcome::Error { error } => f.text(error),
                CallOutcome::Aborted { reason } => opt_text(f, reason),
            }
        }
        FactKind::RunEnded(RunEnded { status: _ }) => {}
        // The kind's name is the writer's, not data.
        FactKind::Unknown { kind: _, data } => f.json(data),
    }
}

/// Pass 1: secret-named members and labels are replaced and learned.
struct MarkPass<'a> {
    redactor: &'a Redactor,
    secrets: &'a mut KnownSecrets,
    /// Some JSON field nests past [`MAX_JSON_DEPTH`]: it is capped after
    /// redaction.
    deep: bool,
}

impl Fields for MarkPass<'_> {
    fn text(&mut self, _: &mut String) {}

    fn json(&mut self, value: &mut Value) {
        self.deep |= self.redactor.mark_json_at(value, self.secrets, 0);
    }

    fn labels(&mut self, labels: &mut BTreeMap<String, String>) {
        for (k, v) in labels.iter_mut() {
            if self.redactor.is_secret_key(k) {
                self.secrets.learn_str(v, false);
                *v = MARKER.into();
            }
        }
    }

    fn keys<V>(&mut self, _: &mut BTreeMap<String, V>) {}
}

/// Values shorter than this many characters are scrubbed only where they
/// stand as whole tokens (see the module docs); longer ones everywhere.
pub const MIN_ANYWHERE: usize = 8;

/// One known secret value.
#[derive(Clone)]
struct Known {
    value: Secret,
    /// Scrubbed only as a whole token.
    whole_token: bool,
    /// An escaped form of another known value, not a value of its own.
    escaped: bool,
}

/// The secret values known in one run: resolved credentials and values
/// learned from secret-named keys. Kept in memory only; the values are
/// zeroed on drop (the matcher built over them is not).
#[derive(Clone, Default)]
pub struct KnownSecrets {
    known: Vec<Known>,
    /// Some value could be the text of a JSON number (then numbers are
    /// checked too).
    numeric: bool,
    /// Built over `known` when a string is first scrubbed after a change.
    matcher: Option<AhoCorasick>,
}

impl std::fmt::Debug for KnownSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KnownSecrets({} values)", self.known.len())
    }
}

impl KnownSecrets {
    /// No secrets known yet.
    pub fn new() -> KnownSecrets {
        KnownSecrets::default()
    }

    /// Adds a secret value (a resolved credential, say): scrubbed
    /// everywhere, or as a whole token when shorter than [`MIN_ANYWHERE`]
    /// characters. The empty string is ignored.
    pub fn add(&mut self, secret: Secret) {
        let whole_token = secret.expose().chars().count() < MIN_ANYWHERE;
        self.insert(secret, whole_token);
    }

    /// How many distinct values are known.
    pub fn len(&self) -> usize {
        self.known.iter().filter(|k| !k.escaped).count()
    }

    /// True when no value is known.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// Replaces every occurrence of every known value in `text` by
    /// [`MARKER`] (see the module docs); true when something was replaced.
    pub fn scrub(&mut self, text: &mut String) -> bool {
        self.scrubber().is_some_and(|s| s.scrub(text))
    }

    /// Learns the strings and numbers of a value found under a
    /// secret-named key. `secret_key`: the value (or the array holding it)
    /// stands under a secret-named key itself, not under a plain key of an
    /// object inside one. Numbers are learned only there: a number under a
    /// plain key (`expires_in`, a count) is redacted with its object but is
    /// not a secret (learned, it would be scrubbed from every later fact).
    fn learn(&mut self, value: &Value, secret_key: bool, redactor: &Redactor) {
        match value {
            Value::String(s) => self.learn_str(s, false),
            Value::Number(n) if secret_key => self.learn_str(&n.to_string(), true),
            Value::Number(_) => {}
            Value::Array(items) => items
                .iter()
                .for_each(|v| self.learn(v, secret_key, redactor)),
            Value::Object(map) => map
                .iter()
                .for_each(|(k, v)| self.learn(v, redactor.is_secret_key(k), redactor)),
            Value::Bool(_) | Value::Null => {}
        }
    }

    fn learn_str(&mut self, s: &str, number: bool) {
        if matches!(s, "" | "true" | "false" | "null" | MARKER) {
            return;
        }
        let whole_token = number || s.chars().count() < MIN_ANYWHERE;
        self.insert(Secret::new(s), whole_token);
    }

    fn insert(&mut self, value: Secret, whole_token: bool) {
        if value.expose().is_empty() {
            return;
        }
        // A value with quotes, backslashes or control characters also
        // occurs escaped, where a message quotes it (`{:?}`) or embeds it
        // as JSON text: those forms are scrubbed as well.
        let raw = value.expose();
        let quoted = |s: String| Secret::new(&s[1..s.len() - 1]);
        let escaped = [
            quoted(format!("{raw:?}")),
            quoted(serde_json::to_string(raw).unwrap_or_default()),
        ];
        self.insert_form(value, whole_token, false);
        for form in escaped {
            self.insert_form(form, whole_token, true);
        }
    }

    fn insert_form(&mut self, value: Secret, whole_token: bool, escaped: bool) {
        match self.known.iter_mut().find(|k| k.value == value) {
            Some(k) => {
                // Learned as a number and known as a string: everywhere
                // wins; a value given itself counts as one.
                let changed = k.whole_token && !whole_token;
                k.whole_token &= whole_token;
                k.escaped &= escaped;
                if !changed {
                    return;
                }
            }
            None => {
                self.numeric |= looks_numeric(value.expose());
                self.known.push(Known {
                    value,
                    whole_token,
                    escaped,
                })
            }
        }
        self.matcher = None;
    }

    /// A scrubber over the known values; `None` when none is known.
    fn scrubber(&mut self) -> Option<Scrubber<'_>> {
        if self.known.is_empty() {
            return None;
        }
        if self.matcher.is_none() {
            let built = AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .build(self.known.iter().map(|k| k.value.expose()));
            // Building fails only past the automaton's size limits (many
            // megabytes of secrets): then scrub one value at a time.
            self.matcher = built.ok();
        }
        Some(Scrubber {
            matcher: self.matcher.as_ref(),
            known: &self.known,
            numeric: self.numeric,
        })
    }
}

/// Pass 2: every occurrence of every known value, in every string.
struct Scrubber<'a> {
    matcher: Option<&'a AhoCorasick>,
    known: &'a [Known],
    /// See [`KnownSecrets::numeric`].
    numeric: bool,
}

/// True when `value` could occur in a JSON number's text.
fn looks_numeric(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
}

fn is_word(c: Option<char>) -> bool {
    c.is_some_and(char::is_alphanumeric)
}

/// True when `text[start..end]` stands as a whole token: no letter or
/// digit runs on from either alphanumeric end.
fn whole_token(text: &str, start: usize, end: usize) -> bool {
    let m = &text[start..end];
    let left = is_word(m.chars().next()) && is_word(text[..start].chars().next_back());
    let right = is_word(m.chars().next_back()) && is_word(text[end..].chars().next());
    !left && !right
}

impl Scrubber<'_> {
    /// The spans of `text` that hold a known value, sorted (they may
    /// overlap). Allocates only when there is one.
    fn spans(&self, text: &str) -> Vec<(usize, usize)> {
        let mut spans = Vec::new();
        // A marker put in place by pass 1 (or by the recording a replay
        // compares with) stays as it is.
        if text.is_empty() || text == MARKER {
            return spans;
        }
        let mut keep = |k: &Known, start: usize, end: usize| {
            if !k.whole_token || whole_token(text, start, end) {
                spans.push((start, end));
            }
        };
        match self.matcher {
            Some(ac) => {
                for m in ac.find_overlapping_iter(text) {
                    keep(&self.known[m.pattern().as_usize()], m.start(), m.end());
                }
            }
            None => {
                for k in self.known {
                    let v = k.value.expose();
                    let mut from = 0;
                    while let Some(i) = text[from..].find(v) {
                        let start = from + i;
                        keep(k, start, start + v.len());
                        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
                    }
                }
            }
        }
        spans.sort_unstable();
        spans
    }

    /// True when `text` holds a known value.
    fn finds(&self, text: &str) -> bool {
        !self.spans(text).is_empty()
    }

    /// Replaces every occurrence in `text`; true when something was.
    fn scrub(&self, text: &mut String) -> bool {
        let spans = self.spans(text);
        if spans.is_empty() {
            return false;
        }
        // Merge overlapping spans, then replace each merged span once: the
        // result does not depend on the order the values became known.
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut i = 0;
        while i < spans.len() {
            let (start, mut end) = spans[i];
            i += 1;
            while i < spans.len() && spans[i].0 < end {
                end = end.max(spans[i].1);
                i += 1;
            }
            out.push_str(&text[at..start]);
            out.push_str(MARKER);
            at = end;
        }
        out.push_str(&text[at..]);
        *text = out;
        true
    }

    /// Scrubs every string and object key of a JSON value.
    fn json(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                self.scrub(s);
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            Value::Object(map) => {
                // Keys may themselves carry a secret value.
                if map.keys().any(|k| self.finds(k)) {
                    for (mut k, v) in std::mem::take(map) {
                        self.scrub(&mut k);
                        let k = unique_key(k, |k| map.contains_key(k));
                        map.insert(k, v);
                    }
                }
                map.values_mut().for_each(|v| self.json(v));
            }
            // A number whose text holds a known value (a PIN echoed as a
            // number) is replaced whole: a number cannot be cut.
            Value::Number(n) if self.numeric => {
                if self.finds(&n.to_string()) {
                    *value = Value::String(MARKER.into());
                }
            }
            Value::Number(_) | Value::Bool(_) | Value::Null => {}
        }
    }
}

/// `key`, or when `taken` (two keys scrubbed to the same text) `key` with
/// ` #2`, ` #3`, ... appended: no member is lost to a collision.
fn unique_key(key: String, taken: impl Fn(&str) -> bool) -> String {
    if !taken(&key) {
        return key;
    }
    (2..)
        .map(|n| format!("{key} #{n}"))
        .find(|k| !taken(k))
        .expect("some suffix is free")
}

impl Fields for Scrubber<'_> {
    fn text(&mut self, text: &mut String) {
        self.scrub(text);
    }

    fn json(&mut self, value: &mut Value) {
        Scrubber::json(self, value);
    }

    fn labels(&mut self, labels: &mut BTreeMap<String, String>) {
        self.keys(labels);
        for v in labels.values_mut() {
            self.scrub(v);
        }
    }

    fn keys<V>(&mut self, map: &mut BTreeMap<String, V>) {
        if map.keys().any(|k| self.finds(k)) {
            for (mut k, v) in std::mem::take(map) {
                self.scrub(&mut k);
                let k = unique_key(k, |k| map.contains_key(k));
                map.insert(k, v);
            }
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
            // Counts, usage and limits of tokens are quantities, not
            // tokens: a quantity word after the rule's words, or a
            // quantity word right before them, says so.
            ("token_count", false),
            ("promptTokenCount", false),
            ("cachedContentTokenCount", false),
            ("token_usage", false),
            ("TOKEN_LIMIT", false),
            ("max_token", false),
            ("num_token", false),
            ("password_length", false),
            ("token_type", true),
            ("session_token", true),
            ("x-auth-token", true),
            ("count_token", true),
            ("token_per_user", true),
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
            r.rules.iter().any(|rule| {
                (0..w.len()).any(|i| {
                    w[i..].starts_with(rule)
                        && !(i > 0 && QUANTITY_BEFORE.contains(&w[i - 1].as_str()))
                        && !w[i + rule.len()..]
                            .iter()
                            .any(|x| QUANTITY_AFTER.contains(&x.as_str()))
                })
            })
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
            "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p_token_count",
            "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p_max_token",
            "token_count",
            "TokenCount",
            "promptTokenCount",
            "token_type",
            "maxToken",
            "max_api_key",
            "api_key_length",
            "count_token",
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

    /// `redact_fact` caps a payload only when it nests past the cap, and
    /// then exactly as `cap_depth` does: at the boundary and on either side
    /// of it, with and without a known secret.
    #[test]
    fn redact_fact_caps_where_cap_depth_does() {
        let r = Redactor::default();
        for n in [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1] {
            let mut v = json!({"leaf": 1, "token": "t-value-1234"});
            for _ in 0..n {
                v = json!([v, {"a": []}]);
            }
            for secrets in [KnownSecrets::new(), known(&["leaf"])] {
                let mut want = v.clone();
                let mut want_secrets = secrets.clone();
                r.redact_value(&mut want, &mut want_secrets);
                cap_depth(&mut want);
                let mut kind = FactKind::Progress(Progress {
                    payload: v.clone(),
                    count: 1,
                });
                let mut secrets = secrets;
                r.redact_fact(&mut kind, &mut secrets);
                assert_eq!(
                    kind,
                    FactKind::Progress(Progress {
                        payload: want,
                        count: 1
                    }),
                    "{n} levels"
                );
                assert_eq!(secrets.len(), want_secrets.len());
            }
        }
    }

    fn known(values: &[&str]) -> KnownSecrets {
        let mut k = KnownSecrets::new();
        for v in values {
            k.add(Secret::new(*v));
        }
        k
    }

    /// `text` scrubbed with `values` added in the given order.
    fn scrubbed(values: &[&str], text: &str) -> String {
        let mut t = text.to_owned();
        known(values).scrub(&mut t);
        t
    }

    #[test]
    fn secrets_are_scrubbed_everywhere() {
        let r = Redactor::default();
        let mut v =
            json!({"note": "used ghp_abc123 to call", "list": ["ghp_abc123"], "ghp_abc123": 1});
        r.redact_value(&mut v, &mut known(&["ghp_abc123"]));
        let text = v.to_string();
        assert!(!text.contains("ghp_abc123"), "{text}");
        assert_eq!(v["note"], json!("used [REDACTED] to call"));
        assert_eq!(v[MARKER], json!(1), "the key is scrubbed too");
    }

    /// Secrets that overlap leave nothing behind, whatever the order they
    /// became known in: a prefix, a suffix, one inside another, two that
    /// overlap partly.
    #[test]
    fn overlapping_secrets_leave_nothing_whatever_their_order() {
        let a = "gho_16C7e42F292c6912E7710c83";
        let b = "gho_16C7e42F292c6912E7710c838347Ae178B4abWKZbByNYGnZwPxvmvkh";
        for (values, text, want) in [
            (vec![a, b], format!("using {b}"), "using [REDACTED]"),
            (vec![b, a], format!("using {b}"), "using [REDACTED]"),
            (
                vec![a, b],
                format!("{a} then {b}"),
                "[REDACTED] then [REDACTED]",
            ),
            // Suffix.
            (
                vec!["347Ae178B4abWKZb", "x9347Ae178B4abWKZb"],
                "k=x9347Ae178B4abWKZb.".into(),
                "k=[REDACTED].",
            ),
            // Contained in the middle.
            (
                vec!["MIDDLEPART", "headMIDDLEPARTtail"],
                "<headMIDDLEPARTtail>".into(),
                "<[REDACTED]>",
            ),
            // Partly overlapping: neither contains the other.
            (
                vec!["AAAABBBB", "BBBBCCCC"],
                "xAAAABBBBCCCCx".into(),
                "x[REDACTED]x",
            ),
            // Adjacent, not overlapping: two markers.
            (
                vec!["AAAABBBB", "CCCCDDDD"],
                "AAAABBBBCCCCDDDD".into(),
                "[REDACTED][REDACTED]",
            ),
        ] {
            let mut rev = values.clone();
            rev.reverse();
            assert_eq!(scrubbed(&values, &text), want, "{values:?} in {text:?}");
            assert_eq!(scrubbed(&rev, &text), want, "{rev:?} in {text:?}");
        }
    }

    /// Short values are scrubbed where they stand as whole tokens, and
    /// only there; long ones everywhere.
    #[test]
    fn short_values_are_scrubbed_as_whole_tokens() {
        for (value, text, want) in [
            ("hzkQx", "bad password hzkQx", "bad password [REDACTED]"),
            ("hzkQx", "hzkQx", "[REDACTED]"),
            ("hzkQx", "(hzkQx)", "([REDACTED])"),
            ("hzkQx", "pw=hzkQx;", "pw=[REDACTED];"),
            ("hzkQx", "pw_hzkQx", "pw_[REDACTED]"),
            ("hzkQx", "hzkQxy", "hzkQxy"),
            ("hzkQx", "ahzkQx", "ahzkQx"),
            ("hzkQx", "é hzkQx", "é [REDACTED]"),
            ("hzkQx", "éhzkQx", "éhzkQx"),
            ("Q", "Q Q-Q QQ", "[REDACTED] [REDACTED]-[REDACTED] QQ"),
            // An edge that is not a letter or digit binds to nothing.
            ("-x", "a-x b", "a[REDACTED] b"),
            ("a\"b", "say a\"b!", "say [REDACTED]!"),
            // Seven characters: still a token; eight: everywhere.
            ("abcdefg", "xabcdefgx", "xabcdefgx"),
            ("abcdefgh", "xabcdefghx", "x[REDACTED]x"),
        ] {
            assert_eq!(scrubbed(&[value], text), want, "{value:?} in {text:?}");
        }
        // A short token inside a longer secret is covered by the longer.
        assert_eq!(
            scrubbed(&["ab", "xxabyyzzqq"], "xxabyyzzqq ab"),
            "[REDACTED] [REDACTED]"
        );
    }

    /// A value with quotes or backslashes is also scrubbed in the escaped
    /// forms a message quoting it (`{:?}`) or JSON text embedding it holds.
    #[test]
    fn escaped_forms_of_a_secret_are_scrubbed() {
        let secret = "pa\"ss\\wörd\n1";
        let debug = format!("credential {secret:?} refused");
        let json = format!("body {}", json!({ "pw": secret }));
        for text in [debug, json] {
            assert!(!text.contains(secret), "the raw form is not in {text:?}");
            let out = scrubbed(&[secret], &text);
            assert!(
                out.contains(MARKER) && !out.contains("ss"),
                "{text:?} -> {out:?}"
            );
        }
        assert_eq!(
            known(&[secret]).len(),
            1,
            "escaped forms are not values of their own"
        );
    }

    /// A value under a secret-named key is redacted where it stands and
    /// learned, whatever its length or JSON type; numbers are tokens.
    #[test]
    fn values_under_secret_keys_are_learned_whatever_their_type() {
        let r = Redactor::default();
        let mut secrets = KnownSecrets::new();
        let mut args = json!({
            "password": 73920938,
            "pin_token": "hzkQx",
            "api_key": [7.5, {"parts": ["k1", true, null, ""]}],
            "secret": false,
            "note": "seen hzkQx",
        });
        r.redact_value(&mut args, &mut secrets);
        assert_eq!(
            args,
            json!({"password": MARKER, "pin_token": MARKER, "api_key": MARKER,
                   "secret": MARKER, "note": "seen [REDACTED]"}),
        );
        // 73920938, hzkQx, 7.5, k1: not true, null or "".
        assert_eq!(secrets.len(), 4, "{secrets:?}");
        for (text, want) in [
            ("wrong password 73920938", "wrong password [REDACTED]"),
            (
                "id 173920938 is another number",
                "id 173920938 is another number",
            ),
            ("v7.5 or 7.5", "v7.5 or [REDACTED]"),
            ("keys k1,k2", "keys [REDACTED],k2"),
            ("true false null", "true false null"),
        ] {
            let mut t = text.to_owned();
            secrets.scrub(&mut t);
            assert_eq!(t, want, "{text:?}");
        }
        // Echoed as JSON numbers: replaced whole where the text is one.
        let mut echo = json!({"n": 73920938, "other": 173920938, "f": 7.5, "count": 3});
        r.redact_value(&mut echo, &mut secrets);
        assert_eq!(
            echo,
            json!({"n": MARKER, "other": 173920938, "f": MARKER, "count": 3})
        );
    }

    /// A number is learned only from a secret-named key: inside an object
    /// under one, a number under a non-secret key (an expiry, a count) is
    /// redacted where it stands but not learned, while strings are (a
    /// credential object's `value` holds the secret).
    #[test]
    fn numbers_are_learned_only_from_secret_named_keys() {
        let r = Redactor::default();
        let mut secrets = KnownSecrets::new();
        let mut v = json!({
            "credentials": {"value": "s3cr3t-v4lue", "expires_in": 3600, "pin_code": [4711],
                            "password": 9183, "extra": {"token": [55]}},
            "token_count": 1200,
            "usage": {"promptTokenCount": 17},
        });
        r.redact_value(&mut v, &mut secrets);
        assert_eq!(
            v,
            json!({"credentials": MARKER, "token_count": 1200, "usage": {"promptTokenCount": 17}})
        );
        // s3cr3t-v4lue, 9183 and 55; not 3600, 4711, 1200 or 17.
        assert_eq!(secrets.len(), 3, "{secrets:?}");
        let mut later = json!({"note": "3600 s, 1200 tokens, pin 4711, 17, 9183, 55",
                               "n": [3600, 1200, 4711, 17, 9183, 55]});
        r.redact_value(&mut later, &mut secrets);
        assert_eq!(
            later,
            json!({"note": "3600 s, 1200 tokens, pin 4711, 17, [REDACTED], [REDACTED]",
                   "n": [3600, 1200, 4711, 17, MARKER, MARKER]})
        );
    }

    /// Every string of a fact is scrubbed and labels under secret-named
    /// keys are redacted, learned from the fact itself.
    #[test]
    fn names_and_labels_are_redacted() {
        let r = Redactor::default();
        let mut secrets = KnownSecrets::new();
        let mut kind = FactKind::RunStarted(RunStarted {
            run_id: "run-s3cr3t".into(),
            session_id: Some("s3cr3t".into()),
            identity: None,
            producer: Producer {
                name: "host".into(),
                version: "1".into(),
            },
            labels: [
                ("api_key".to_owned(), "s3cr3t".to_owned()),
                ("note".to_owned(), "key s3cr3t".to_owned()),
                ("s3cr3t".to_owned(), "as a key".to_owned()),
            ]
            .into(),
            teardown_scopes: vec![],
        });
        r.redact_fact(&mut kind, &mut secrets);
        let FactKind::RunStarted(s) = &kind else {
            unreachable!()
        };
        assert_eq!(s.labels["api_key"], MARKER);
        assert_eq!(s.labels["note"], "key [REDACTED]");
        assert_eq!(s.labels[MARKER], "as a key");
        // The run's ids are the host's and stay as they are.
        assert_eq!(s.run_id, "run-s3cr3t");
        let mut effect = FactKind::Effect(Effect {
            name: "api.s3cr3t".into(),
            request: json!({}),
            outcome: EffectOutcome::Err("s3cr3t".into()),
        });
        r.redact_fact(&mut effect, &mut secrets);
        assert_eq!(
            effect,
            FactKind::Effect(Effect {
                name: "api.[REDACTED]".into(),
                request: json!({}),
                outcome: EffectOutcome::Err(MARKER.into()),
            })
        );
    }
}

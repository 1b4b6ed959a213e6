//! Known secret values ([`KnownSecrets`]): learned from secret-named keys
//! and resolved credentials, scrubbed from every string of a fact.

use super::*;

/// Values shorter than this many characters are scrubbed only where they
/// stand as whole tokens (see the module docs); longer ones everywhere.
pub const MIN_ANYWHERE: usize = 8;

/// Where a value [`KnownSecrets::learn`] is given stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Under {
    /// Under a secret-named key itself (or in an array there).
    SecretKey,
    /// Under a plain key of an object inside one.
    PlainKey,
}

impl Under {
    fn key(redactor: &Redactor, key: &str) -> Under {
        if redactor.is_secret_key(key) {
            Under::SecretKey
        } else {
            Under::PlainKey
        }
    }
}

/// What a string [`KnownSecrets::learn_str`] is given was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Text {
    /// A string: scrubbed everywhere when long enough.
    String,
    /// A number's text: scrubbed only as a whole token.
    Number,
}

/// Which form of a value [`KnownSecrets::insert_form`] is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// The value as given.
    Given,
    /// An escaped form of it (quoted by `{:?}` or as JSON text).
    Escaped,
}

/// One known secret value.
#[derive(Clone)]
pub(super) struct Known {
    value: Secret,
    /// Scrubbed only as a whole token.
    whole_token: bool,
    /// An escaped form of another known value, not a value of its own.
    escaped: bool,
    /// The keyed marker of a resolved credential, made from its
    /// fingerprint: the same in a recording and in its replay, whose
    /// stand-in carries the recorded fingerprint.
    tag: Option<Arc<str>>,
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
        self.insert(secret, whole_token, None);
    }

    /// Adds a resolved credential, as [`KnownSecrets::add`], and marks it
    /// with a keyed marker made from its `fingerprint` (`hmac-sha256:` and
    /// hex, as the archive makes them; another form, or none, gets none):
    /// a replay whose stand-in carries the recorded fingerprint writes the
    /// same marker where the tool put its credential, which proves the
    /// place.
    pub fn add_credential(&mut self, secret: Secret, fingerprint: Option<&Fingerprint>) {
        let whole_token = secret.expose().chars().count() < MIN_ANYWHERE;
        let tag = fingerprint.and_then(credential_tag);
        self.insert(secret, whole_token, tag);
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
        self.scrubber(None).is_some_and(|s| s.scrub(text))
    }

    /// Learns the strings and numbers of a value found under a
    /// secret-named key. `under`: whether the value (or the array holding
    /// it) stands under a secret-named key itself, or under a plain key of
    /// an object inside one. Numbers are learned only under the secret key:
    /// a number under a plain key (`expires_in`, a count) is redacted with
    /// its object but is not a secret (learned, it would be scrubbed from
    /// every later fact).
    pub(super) fn learn(&mut self, value: &Value, under: Under, redactor: &Redactor) {
        match value {
            Value::String(s) => self.learn_str(s, Text::String),
            Value::Number(n) if under == Under::SecretKey => {
                self.learn_str(&n.to_string(), Text::Number)
            }
            Value::Number(_) => {}
            Value::Array(items) => items.iter().for_each(|v| self.learn(v, under, redactor)),
            Value::Object(map) => map
                .iter()
                .for_each(|(k, v)| self.learn(v, Under::key(redactor, k), redactor)),
            Value::Bool(_) | Value::Null => {}
        }
    }

    pub(super) fn learn_str(&mut self, s: &str, text: Text) {
        if matches!(s, "" | "true" | "false" | "null") || is_marker(s) {
            return;
        }
        let whole_token = text == Text::Number || s.chars().count() < MIN_ANYWHERE;
        self.insert(Secret::new(s), whole_token, None);
    }

    pub(super) fn insert(&mut self, value: Secret, whole_token: bool, tag: Option<Arc<str>>) {
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
        self.insert_form(value, whole_token, Form::Given, tag.clone());
        for form in escaped {
            self.insert_form(form, whole_token, Form::Escaped, tag.clone());
        }
    }

    pub(super) fn insert_form(
        &mut self,
        value: Secret,
        whole_token: bool,
        form: Form,
        tag: Option<Arc<str>>,
    ) {
        let escaped = form == Form::Escaped;
        match self.known.iter_mut().find(|k| k.value == value) {
            Some(k) => {
                if k.tag.is_none() && tag.is_some() {
                    k.tag = tag;
                }
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
                    tag,
                })
            }
        }
        self.matcher = None;
    }

    /// A scrubber over the known values, marking with `tagger` where
    /// given (see [`Tagger`]); `None` when none is known.
    pub(super) fn scrubber<'a>(&'a mut self, tagger: Option<&'a Tagger>) -> Option<Scrubber<'a>> {
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
            tagger,
        })
    }
}

/// Pass 2: every occurrence of every known value, in every string.
pub(super) struct Scrubber<'a> {
    matcher: Option<&'a AhoCorasick>,
    known: &'a [Known],
    /// See [`KnownSecrets::numeric`].
    numeric: bool,
    /// Keys the markers of values that are not credentials.
    tagger: Option<&'a Tagger>,
}

/// The keyed marker of a credential whose fingerprint is `fingerprint`.
fn credential_tag(fingerprint: &Fingerprint) -> Option<Arc<str>> {
    let hex = fingerprint.0.strip_prefix("hmac-sha256:")?;
    let tag = hex.get(..reel_core::marker::TAG_HEX)?;
    tag.bytes()
        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        .then(|| format!("{KEYED_MARKER_PREFIX}{tag}]").into())
}

/// True when `value` could occur in a JSON number's text.
pub(super) fn looks_numeric(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
}

pub(super) fn is_word(c: Option<char>) -> bool {
    c.is_some_and(char::is_alphanumeric)
}

/// True when `text[start..end]` stands as a whole token: no letter or
/// digit runs on from either alphanumeric end.
pub(super) fn whole_token(text: &str, start: usize, end: usize) -> bool {
    let m = &text[start..end];
    let left = is_word(m.chars().next()) && is_word(text[..start].chars().next_back());
    let right = is_word(m.chars().next_back()) && is_word(text[end..].chars().next());
    !left && !right
}

impl Scrubber<'_> {
    /// The spans of `text` that hold a known value, sorted (they may
    /// overlap), each with the index of its value. A marker already in
    /// `text` (put by pass 1, or by the recording a replay compares with)
    /// is left alone. Allocates only when there is one.
    pub(super) fn spans(&self, text: &str) -> Vec<(usize, usize, usize)> {
        let mut spans = Vec::new();
        if text.is_empty() || is_marker(text) {
            return spans;
        }
        let mut keep = |i: usize, start: usize, end: usize| {
            if !self.known[i].whole_token || whole_token(text, start, end) {
                spans.push((start, end, i));
            }
        };
        match self.matcher {
            Some(ac) => {
                for m in ac.find_overlapping_iter(text) {
                    keep(m.pattern().as_usize(), m.start(), m.end());
                }
            }
            None => {
                for (i, k) in self.known.iter().enumerate() {
                    let v = k.value.expose();
                    let mut from = 0;
                    while let Some(at) = text[from..].find(v) {
                        let start = from + at;
                        keep(i, start, start + v.len());
                        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
                    }
                }
            }
        }
        if !spans.is_empty() && text.contains("[REDACTED") {
            let marks = reel_core::marker::marker_spans(text);
            spans.retain(|&(s, e, _)| !marks.iter().any(|m| s < m.end && m.start < e));
        }
        spans.sort_unstable();
        spans
    }

    /// True when `text` holds a known value.
    pub(super) fn finds(&self, text: &str) -> bool {
        !self.spans(text).is_empty()
    }

    /// Replaces every occurrence in `text`; true when something was.
    pub(super) fn scrub(&self, text: &mut String) -> bool {
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
            let first = i;
            let (start, mut end, _) = spans[i];
            i += 1;
            while i < spans.len() && spans[i].0 < end {
                end = end.max(spans[i].1);
                i += 1;
            }
            out.push_str(&text[at..start]);
            out.push_str(&self.marker(&text[start..end], &spans[first..i], start));
            at = end;
        }
        out.push_str(&text[at..]);
        *text = out;
        true
    }

    /// The marker for the hidden `span` (merged from `parts`, offsets in
    /// the whole text, `start` being the span's): a credential's own
    /// keyed marker when it is one credential, else a marker keyed over
    /// the span with its credentials marked (so a replay's stand-in keys
    /// alike), else the bare [`MARKER`].
    fn marker(&self, span: &str, parts: &[(usize, usize, usize)], start: usize) -> String {
        if let [(s, e, k)] = parts {
            if let (Some(tag), true) =
                (&self.known[*k].tag, *s == start && *e == start + span.len())
            {
                return tag.to_string();
            }
        }
        match self.tagger {
            Some(tagger) => {
                let mut at = 0;
                let mut normal = String::with_capacity(span.len());
                for &(s, e, k) in parts {
                    let (s, e) = (s - start, e - start);
                    if let (Some(tag), true) = (&self.known[k].tag, s >= at) {
                        normal.push_str(&span[at..s]);
                        normal.push_str(tag);
                        at = e;
                    }
                }
                normal.push_str(&span[at.min(span.len())..]);
                tagger.marker(normal.as_bytes())
            }
            None => MARKER.to_owned(),
        }
    }

    /// The marker for a whole value hidden in pass 1, whose text is
    /// `text`: as [`Scrubber::marker`] of all of it.
    pub(super) fn whole(&self, text: &str) -> String {
        let parts: Vec<_> = self
            .spans(text)
            .into_iter()
            .filter(|&(_, _, k)| self.known[k].tag.is_some())
            .collect();
        if let [(0, e, _)] = parts[..] {
            if e == text.len() {
                return self.marker(text, &parts, 0);
            }
        }
        match self.tagger {
            Some(_) => self.marker(text, &parts, 0),
            None => MARKER.to_owned(),
        }
    }

    /// Scrubs every string and object key of a JSON value.
    pub(super) fn json(&self, value: &mut Value) {
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
                let text = n.to_string();
                if self.finds(&text) {
                    *value = Value::String(self.marker(&text, &self.spans(&text), 0));
                }
            }
            Value::Number(_) | Value::Bool(_) | Value::Null => {}
        }
    }
}

/// `key`, or when `taken` (two keys scrubbed to the same text) `key` with
/// ` #2`, ` #3`, ... appended: no member is lost to a collision.
pub(super) fn unique_key(key: String, taken: impl Fn(&str) -> bool) -> String {
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

//! Secret-named keys: a key's words (split at `_`, `-`, `.`, spaces and
//! camelCase humps) against the rules' words, quantities kept.

/// Calls `each` with every word of `key`, as a slice of `key` (not yet
/// lower-cased): words are split at `_`, `-`, `.`, spaces, `/` and before an
/// upper-case letter that follows a lower-case letter or a digit.
pub(super) fn split_words<'k>(key: &'k str, mut each: impl FnMut(&'k str)) {
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
pub(super) fn words(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    split_words(key, |w| {
        out.push(w.chars().flat_map(char::to_lowercase).collect())
    });
    out
}

/// True when the word `word` (a slice of a key), lower-cased, is `rule`
/// (a lower-case rule word). Allocation-free.
#[inline]
pub(super) fn word_is(word: &str, rule: &str) -> bool {
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

/// Words that, right before a rule's words in a key, make it name a
/// protocol's correlation id rather than a credential: MCP's
/// `progressToken` is chosen by the client (a number or a short string)
/// to match progress notifications to a request, and is sent back in
/// each of them. *Why:* learned as a secret, a token `3` scrubbed every
/// later `3` of the run (a result "genuine 3", a version "0.1.3"), and
/// each call's token rebuilt the run's scrubber.
pub const ID_BEFORE: &[&str] = &["progress"];

/// Keys with at most this many words are matched without allocating.
pub(super) const STACK_WORDS: usize = 16;

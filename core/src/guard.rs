//! The seam of the last line of redaction: what the crates that only know
//! the fact model (the archive's tape export, the OTLP export) need of a
//! tripwire. `reel::tripwire::Tripwire` (Aho-Corasick over every encoded
//! form of every secret) implements [`Guard`]; the host (the `reel`
//! binary) builds it and passes it in, so those crates never link the
//! matcher nor know where the secrets came from.

use crate::tape::Tape;

/// How a secret value was encoded where the tripwire found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Encoding {
    /// As it is.
    Raw,
    /// JSON-escaped.
    Json,
    /// Rust `{:?}`-escaped.
    Debug,
    /// Percent-encoded.
    Percent,
    /// Base64, standard alphabet (padded or not, at any alignment).
    Base64,
    /// Base64, url-safe alphabet (padded or not, at any alignment).
    Base64Url,
    /// Hex digits of the bytes, lower or upper case.
    Hex,
    /// Every character `\uXXXX`-escaped (JSON or JavaScript text from an
    /// escape-everything encoder), hex digits in lower or upper case.
    UnicodeEscape,
    /// UTF-16 little-endian bytes (in an artifact's bytes).
    Utf16Le,
    /// UTF-16 big-endian bytes (in an artifact's bytes).
    Utf16Be,
}

impl Encoding {
    /// The name recorded in `redaction.tripped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Json => "json",
            Encoding::Debug => "debug",
            Encoding::Percent => "percent",
            Encoding::Base64 => "base64",
            Encoding::Base64Url => "base64url",
            Encoding::Hex => "hex",
            Encoding::UnicodeEscape => "unicode-escape",
            Encoding::Utf16Le => "utf16le",
            Encoding::Utf16Be => "utf16be",
        }
    }
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tripwire: the values it holds are searched for, raw and encoded, and
/// scrubbed to [`MARKER`](crate::marker::MARKER) where found. Fail closed:
/// a hit is scrubbed and named, never passed on.
pub trait Guard {
    /// True when it holds no value (nothing can hit: callers skip work).
    fn is_empty(&self) -> bool;
    /// The first encoding of a held value found in `bytes`, if any.
    fn scan(&self, bytes: &[u8]) -> Option<Encoding>;
    /// Scrubs every held value from `text` (every encoding); the first
    /// encoding found, if any.
    fn scrub_str(&self, text: &mut String) -> Option<Encoding>;
    /// Guards a whole tape: scrubs every hit in its facts and artifacts
    /// and adds a `redaction.tripped` fact per field hit (`point`, `rule`
    /// name where and why); how many it added.
    fn guard_tape(&self, tape: &mut Tape, point: &str, rule: &str) -> usize;
}

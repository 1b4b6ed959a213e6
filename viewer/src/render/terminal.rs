//! What reaches the operator's terminal: every string taken from a
//! recording, a tape, a file name or an argument goes through [`escape`]
//! before it is printed, and every JSON document the CLI prints goes through
//! [`JsonSafe`].
//!
//! A recorded string is untrusted: an escape sequence in a run id could
//! retitle the terminal, clear the screen or fake lines (`ESC ] 0 ; … BEL`,
//! `ESC [ 2 J`), a C1 control (U+009B is CSI on its own) does the same on
//! terminals that honour C1, and a bidi override (U+202E) makes text read in
//! another order than it is. [`needs_escape`] names these characters once;
//! ordinary Unicode (accents, CJK, emoji with their joiners) passes as is.
//!
//! The text rendering is `\u{HEX}` (lowercase hex, no leading zeros), the
//! same for every escaped character, including newline and tab, so that a
//! recorded string always stays on its line. It is injective: a backslash
//! is doubled where the text after it would otherwise read as an escape
//! (before `u{`, before another backslash, before an escaped character), so
//! distinct strings are shown distinctly and a literal `\u{1b}` in a run id
//! never looks like an ESC. A backslash anywhere else is shown once, so
//! JSON's own escapes (`\"`, `\n`) read as usual.
//!
//! ```
//! use reel_viewer::render::terminal::escape;
//!
//! assert_eq!(escape("\u{1b}]0;PWNED\u{7}"), r"\u{1b}]0;PWNED\u{7}");
//! assert_eq!(escape("abc\u{202e}def"), r"abc\u{202e}def");
//! assert_eq!(escape(r"literal \u{1b}"), r"literal \\u{1b}");
//! assert_eq!(escape("café 中文 😀"), "café 中文 😀");
//! ```

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

/// True for the characters that never reach a terminal raw: C0 controls,
/// DEL, C1 controls (U+0080..U+009F), the bidi controls (U+061C, U+200E,
/// U+200F, U+202A..U+202E, U+2066..U+2069) and the line and paragraph
/// separators (U+2028, U+2029).
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// `text` as it may be shown on a terminal: each character of
/// [`needs_escape`] as `\u{HEX}`, a backslash doubled where it would
/// otherwise start what reads as an escape, everything else unchanged.
/// Borrows when nothing needs escaping.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_where(text, needs_escape)
}

/// [`escape`], keeping line feeds and tabs: for a page, where they lay out
/// a block of text and can neither move a cursor nor reorder what is read.
pub fn escape_keeping_lines(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| needs_escape(c) && c != '\n' && c != '\t')
}

fn escape_where(text: &str, needs_escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    let changes = |(i, c): (usize, char)| {
        needs_escape(c) || (c == '\\' && backslash_needs_doubling(&text[i + 1..]))
    };
    if !text.char_indices().any(changes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, c) in text.char_indices() {
        if needs_escape(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else if c == '\\' && backslash_needs_doubling(&text[i + 1..]) {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether a backslash followed by `rest` must be shown doubled: when
/// `rest` begins with what would read as the rest of an escape.
fn backslash_needs_doubling(rest: &str) -> bool {
    rest.starts_with("u{")
        || rest
            .chars()
            .next()
            .is_some_and(|c| c == '\\' || needs_escape(c))
}

/// A writer for JSON text on its way to a terminal: every character of
/// [`needs_escape`] that JSON leaves raw (DEL, C1, bidi controls, U+2028,
/// U+2029) becomes a `\uXXXX` escape. The document stays valid JSON and
/// parses back to the same strings: outside its strings JSON text is ASCII,
/// so these characters can only stand inside a string, where the escape
/// means the character itself. C0 controls are left alone: a JSON encoder
/// escapes them inside strings, and outside strings they are its newlines.
///
/// Writes may split a character's UTF-8 bytes; the first bytes wait for
/// the rest. Bytes that are not UTF-8 are written as U+FFFD.
pub struct JsonSafe<W: Write> {
    inner: W,
    /// The first bytes of a character whose last bytes have not come yet.
    pending: Vec<u8>,
}

impl<W: Write> JsonSafe<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> JsonSafe<W> {
        JsonSafe {
            inner,
            pending: Vec::new(),
        }
    }

    /// The wrapped writer (bytes of a character cut by the last write are
    /// dropped: a JSON encoder never leaves one).
    pub fn into_inner(self) -> W {
        self.inner
    }

    fn write_str(&mut self, text: &str) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in text.char_indices() {
            if c != '\u{7f}' && (c.is_ascii() || !needs_escape(c)) {
                continue;
            }
            self.inner.write_all(&text.as_bytes()[start..i])?;
            write!(self.inner, "\\u{:04x}", c as u32)?;
            start = i + c.len_utf8();
        }
        self.inner.write_all(&text.as_bytes()[start..])
    }
}

impl<W: Write> Write for JsonSafe<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.pending.is_empty() && buf.iter().all(|&b| b < 0x7f) {
            self.inner.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut bytes = std::mem::take(&mut self.pending);
        bytes.extend_from_slice(buf);
        let mut rest = &bytes[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    self.write_str(text)?;
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // Checked by from_utf8 up to valid_up_to.
                    self.write_str(std::str::from_utf8(valid).unwrap_or_default())?;
                    match e.error_len() {
                        None => {
                            // A character cut by the end of this write.
                            self.pending = after.to_vec();
                            break;
                        }
                        Some(n) => {
                            self.inner.write_all("\u{fffd}".as_bytes())?;
                            rest = &after[n..];
                        }
                    }
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Sizing lines to a terminal's width. Widths count characters (one
/// column each: wide characters are not measured as two); the colours
/// reel paints (`ESC [ ... m`, the only escape sequences in its output:
/// recorded strings go through [`escape`]) count for nothing.
pub mod width {
    /// The characters of `line` a terminal shows.
    pub fn visible(line: &str) -> usize {
        let mut n = 0;
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                // A colour: up to its final `m`.
                for c in chars.by_ref() {
                    if c == 'm' {
                        break;
                    }
                }
            } else {
                n += 1;
            }
        }
        n
    }

    /// `line` cut to `width` visible characters, the last one `…` when
    /// something was cut. Every colour sequence is kept (a reset after the
    /// cut too), and a line whose last colour is never reset is reset.
    pub fn fit(line: &str, width: usize) -> String {
        if visible(line) <= width {
            return line.to_owned();
        }
        let keep = width.saturating_sub(1);
        let mut out = String::with_capacity(line.len().min(width * 4));
        let (mut n, mut painted) = (0, false);
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                let mut seq = String::from(c);
                for c in chars.by_ref() {
                    seq.push(c);
                    if c == 'm' {
                        break;
                    }
                }
                painted = seq != "\x1b[0m";
                out.push_str(&seq);
            } else if n < keep {
                out.push(c);
                n += 1;
            }
        }
        out.push('…');
        if painted {
            out.push_str("\x1b[0m");
        }
        out
    }

    /// `line` wrapped to `width` visible characters, each continuation
    /// line starting with `indent`. It breaks between the parts a double
    /// space separates (columns) when it can, else between words; a word
    /// longer than a line is cut. A line that fits is kept as it is.
    pub fn wrap(line: &str, width: usize, indent: &str) -> String {
        if visible(line) <= width {
            return line.to_owned();
        }
        let lead = line.len() - line.trim_start_matches(' ').len();
        let mut out = String::new();
        let mut current = line[..lead].to_owned();
        let mut filled = false;
        let mut flush = |current: &mut String, filled: &mut bool| {
            out.push_str(current);
            out.push('\n');
            *current = indent.to_owned();
            *filled = false;
        };
        for part in line[lead..].split("  ").filter(|p| !p.is_empty()) {
            if filled && visible(current.as_str()) + 2 + visible(part) <= width {
                current.push_str("  ");
                current.push_str(part);
                continue;
            }
            if filled {
                flush(&mut current, &mut filled);
            }
            if visible(&current) + visible(part) <= width {
                current.push_str(part);
                filled = true;
                continue;
            }
            // A part wider than a line: its words.
            for word in part.split(' ') {
                if filled && visible(&current) + 1 + visible(word) <= width {
                    current.push(' ');
                    current.push_str(word);
                    continue;
                }
                if filled {
                    flush(&mut current, &mut filled);
                }
                let room = width.saturating_sub(visible(&current)).max(1);
                current.push_str(&fit(word, room));
                filled = true;
            }
        }
        out.push_str(&current);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(input: &str, expected: &str) {
        assert_eq!(escape(input), expected, "escape({input:?})");
    }

    #[test]
    fn escapes_what_moves_the_cursor_and_nothing_else() {
        for (input, expected) in [
            ("", ""),
            ("plain run-1", "plain run-1"),
            // ESC, CSI, OSC terminated by BEL and by ST.
            ("\u{1b}", r"\u{1b}"),
            ("\u{1b}[2J\u{1b}[H", r"\u{1b}[2J\u{1b}[H"),
            ("\u{1b}]0;PWNED\u{7}", r"\u{1b}]0;PWNED\u{7}"),
            ("\u{1b}]0;PWNED\u{1b}\\", r"\u{1b}]0;PWNED\u{1b}\"),
            ("\u{1b}[31mred\u{1b}[0m", r"\u{1b}[31mred\u{1b}[0m"),
            // Other C0 controls and DEL; newline and tab keep a line a line.
            ("two\nlines", r"two\u{a}lines"),
            ("tab\there", r"tab\u{9}here"),
            ("cr\rlf", r"cr\u{d}lf"),
            ("nul\0", r"nul\u{0}"),
            ("del\u{7f}", r"del\u{7f}"),
            // C1: CSI and OSC as single code points, and the range's ends.
            ("\u{9b}2J", r"\u{9b}2J"),
            ("\u{9d}0;t\u{9c}", r"\u{9d}0;t\u{9c}"),
            ("\u{80}\u{9f}", r"\u{80}\u{9f}"),
            // Bidi controls and the line and paragraph separators.
            ("abc\u{202e}fed", r"abc\u{202e}fed"),
            ("\u{2067}x\u{2069}", r"\u{2067}x\u{2069}"),
            (
                "\u{202a}\u{202b}\u{202c}\u{202d}",
                r"\u{202a}\u{202b}\u{202c}\u{202d}",
            ),
            ("\u{2066}\u{2068}", r"\u{2066}\u{2068}"),
            ("\u{200e}\u{200f}\u{61c}", r"\u{200e}\u{200f}\u{61c}"),
            ("a\u{2028}b\u{2029}", r"a\u{2028}b\u{2029}"),
            // Ordinary Unicode is untouched, joiners and all.
            ("café naïve", "café naïve"),
            ("中文 日本語 한국어", "中文 日本語 한국어"),
            (
                "\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}",
                "\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}",
            ),
            ("\u{a0}nbsp", "\u{a0}nbsp"),
            ("العربية", "العربية"),
            // Backslashes: once where nothing reads as an escape.
            (r#"{"m":"say \"hi\"\n"}"#, r#"{"m":"say \"hi\"\n"}"#),
            (r"C:\temp\x", r"C:\temp\x"),
            ("trailing\\", "trailing\\"),
            (r"\u", r"\u"),
            (r"\u1b", r"\u1b"),
            // ... and doubled where they would.
            (r"\u{1b}", r"\\u{1b}"),
            (r"\\", r"\\\"),
            ("\\\u{1b}", r"\\\u{1b}"),
            (r"\\u{7}", r"\\\\u{7}"),
        ] {
            check(input, expected);
        }
    }

    #[test]
    fn borrows_when_nothing_changes() {
        assert!(matches!(escape("run 中 \\n"), Cow::Borrowed(_)));
        assert!(matches!(escape("run\u{1b}"), Cow::Owned(_)));
    }

    /// Reads a shown string back (the inverse of [`escape`]): the proof
    /// that the rendering is unambiguous.
    fn unescape(shown: &str) -> Option<String> {
        let mut out = String::new();
        let mut rest = shown;
        while let Some(c) = rest.chars().next() {
            if let Some(after) = rest.strip_prefix("\\\\") {
                out.push('\\');
                rest = after;
            } else if let Some(after) = rest.strip_prefix("\\u{") {
                let end = after.find('}')?;
                let c = char::from_u32(u32::from_str_radix(&after[..end], 16).ok()?)?;
                if !needs_escape(c) {
                    return None;
                }
                out.push(c);
                rest = &after[end + 1..];
            } else {
                if needs_escape(c) {
                    return None;
                }
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        Some(out)
    }

    /// Strings dense in what matters: backslashes, `u{`, braces, hex
    /// digits, every escaped class, and ordinary Unicode.
    fn tricky() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("\\".to_owned()),
            Just("u{".to_owned()),
            Just("}".to_owned()),
            Just("1b".to_owned()),
            Just("\\u{1b}".to_owned()),
            Just("\u{1b}".to_owned()),
            Just("\u{9b}".to_owned()),
            Just("\u{202e}".to_owned()),
            Just("\u{2028}".to_owned()),
            Just("é中😀\u{200d}".to_owned()),
            any::<char>().prop_map(String::from),
            "[a-z]{1,3}",
        ];
        prop::collection::vec(piece, 0..12).prop_map(|p| p.concat())
    }

    fn arbitrary() -> impl Strategy<Value = String> {
        prop_oneof![any::<String>(), tricky()]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn shown_text_holds_no_control_or_bidi(s in arbitrary()) {
            let shown = escape(&s);
            prop_assert!(!shown.chars().any(needs_escape), "{:?} -> {:?}", s, shown);
        }

        #[test]
        fn shown_text_reads_back(s in arbitrary()) {
            prop_assert_eq!(unescape(&escape(&s)), Some(s));
        }

        #[test]
        fn distinct_strings_are_shown_distinctly(a in arbitrary(), b in arbitrary()) {
            if a != b {
                prop_assert_ne!(escape(&a), escape(&b));
            }
        }

        #[test]
        fn json_stays_json_and_holds_no_control_or_bidi(
            s in arbitrary(),
            key in arbitrary(),
            cuts in prop::collection::vec(0usize..64, 0..6),
        ) {
            let mut map = serde_json::Map::new();
            map.insert(key.clone(), serde_json::json!([s.clone(), {"n": 1}]));
            let value = serde_json::Value::Object(map);
            let raw = serde_json::to_vec_pretty(&value).unwrap();
            // Written in pieces cut anywhere, even inside a character.
            let mut safe = JsonSafe::new(Vec::new());
            let mut rest = &raw[..];
            for cut in cuts {
                let (a, b) = rest.split_at(cut.min(rest.len()));
                safe.write_all(a).unwrap();
                rest = b;
            }
            safe.write_all(rest).unwrap();
            let text = String::from_utf8(safe.inner).unwrap();
            prop_assert!(
                !text.chars().any(|c| needs_escape(c) && c != '\n'),
                "{:?}", text
            );
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&back[&key][0], &serde_json::Value::String(s));
        }
    }

    #[test]
    fn lines_sized_to_a_width() {
        use super::width::{fit, visible, wrap};
        let red = |t: &str| format!("\x1b[31m{t}\x1b[0m");
        assert_eq!(visible(&red("abc")), 3);
        let cases: &[(&str, usize, &str)] = &[
            ("short", 10, "short"),
            ("exactly10!", 10, "exactly10!"),
            ("eleven char", 10, "eleven ch…"),
            ("ünïcödé wörds", 8, "ünïcödé…"),
        ];
        for (line, w, expected) in cases {
            assert_eq!(fit(line, *w), *expected, "fit({line:?}, {w})");
            assert!(visible(&fit(line, *w)) <= *w);
        }
        // Colours are kept whole, their resets too, when the cut falls
        // inside one.
        let cut = fit(&format!("ab {}", red("cdefgh")), 5);
        assert_eq!(cut, "ab \x1b[31mc\x1b[0m…");
        assert_eq!(visible(&cut), 5);
        let wraps: &[(&str, usize, &str)] = &[
            ("fits as it is", 20, "fits as it is"),
            ("one two three four", 9, "one two\n  three\n  four"),
            (
                "  led by spaces and wrapped",
                15,
                "  led by spaces\n  and wrapped",
            ),
            ("averyveryverylongword x", 10, "averyvery…\n  x"),
            // Columns (parts a double space separates) stay whole.
            ("a b  c d  e", 5, "a b\n  c d\n  e"),
            (
                "run r  done  12 facts, 1 call",
                18,
                "run r  done\n  12 facts, 1 call",
            ),
        ];
        for (line, w, expected) in wraps {
            let got = wrap(line, *w, "  ");
            assert_eq!(got, *expected, "wrap({line:?}, {w})");
            assert!(got.lines().all(|l| visible(l) <= *w), "{got:?}");
        }
    }
}

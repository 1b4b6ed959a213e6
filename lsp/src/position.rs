//! Positions: LSP `character` offsets (in the negotiated encoding's code
//! units) to byte offsets in a line, and back.
//!
//! The LSP default is UTF-16: a character outside the Basic Multilingual
//! Plane (an emoji) counts 2, `é` counts 1, where it is 4 and 2 bytes in
//! the UTF-8 text. A client may offer UTF-8 or UTF-32 instead
//! (`general.positionEncodings`); the server then uses UTF-8 when offered
//! (no conversion at all), and UTF-16 otherwise.
//!
//! Two readings of a position:
//!
//! - [`Encoding::byte_exact`], for questions (hover, definition): a position
//!   past the end of the line or inside a character (the second half of a
//!   surrogate pair, the middle of a UTF-8 sequence) is no position: the
//!   answer is empty.
//! - [`Encoding::byte_clamped`], for edits: past the end means the end of the
//!   line (as the specification says), inside a character means before it.
//!
//! ```
//! use reel_lsp::position::Encoding;
//!
//! let line = "a😀b"; // 😀 is 4 bytes, 2 UTF-16 units
//! assert_eq!(Encoding::Utf16.byte_exact(line, 3), Some(5)); // before `b`
//! assert_eq!(Encoding::Utf16.byte_exact(line, 2), None); // inside the surrogate pair
//! assert_eq!(Encoding::Utf16.byte_exact(line, 9), None); // past the end
//! assert_eq!(Encoding::Utf16.byte_clamped(line, 9), 6);
//! assert_eq!(Encoding::Utf16.units(line, 5), 3);
//! ```

use tower_lsp_server::ls_types::PositionEncodingKind;

/// How `character` offsets count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// Bytes of UTF-8.
    Utf8,
    /// UTF-16 code units (the LSP default).
    #[default]
    Utf16,
    /// Unicode scalar values.
    Utf32,
}

impl Encoding {
    /// Picks the encoding from what the client offers: UTF-8 when offered,
    /// else UTF-16 (which every client supports).
    pub fn negotiate(offered: Option<&[PositionEncodingKind]>) -> Encoding {
        match offered {
            Some(kinds) if kinds.contains(&PositionEncodingKind::UTF8) => Encoding::Utf8,
            _ => Encoding::Utf16,
        }
    }

    /// The encoding's LSP name.
    pub fn kind(self) -> PositionEncodingKind {
        match self {
            Encoding::Utf8 => PositionEncodingKind::UTF8,
            Encoding::Utf16 => PositionEncodingKind::UTF16,
            Encoding::Utf32 => PositionEncodingKind::UTF32,
        }
    }

    fn width(self, c: char) -> usize {
        match self {
            Encoding::Utf8 => c.len_utf8(),
            Encoding::Utf16 => c.len_utf16(),
            Encoding::Utf32 => 1,
        }
    }

    /// The byte offset of `character` in `line`, or `None` when it is past
    /// the end of the line or inside a character.
    pub fn byte_exact(self, line: &str, character: u32) -> Option<usize> {
        let want = character as usize;
        if self == Encoding::Utf8 || line.is_ascii() {
            return (want <= line.len() && line.is_char_boundary(want)).then_some(want);
        }
        let mut units = 0;
        for (byte, c) in line.char_indices() {
            if units == want {
                return Some(byte);
            }
            if units > want {
                return None;
            }
            units += self.width(c);
        }
        (units == want).then_some(line.len())
    }

    /// The byte offset of `character` in `line`: past the end is the end,
    /// inside a character is before it.
    pub fn byte_clamped(self, line: &str, character: u32) -> usize {
        let want = character as usize;
        if self == Encoding::Utf8 || line.is_ascii() {
            let mut b = want.min(line.len());
            while !line.is_char_boundary(b) {
                b -= 1;
            }
            return b;
        }
        let mut units = 0;
        for (byte, c) in line.char_indices() {
            let next = units + self.width(c);
            if next > want {
                return byte;
            }
            units = next;
        }
        line.len()
    }

    /// The `character` offset of byte `byte` of `line` (a byte inside a
    /// character counts as that character's start; past the end is the end).
    pub fn units(self, line: &str, byte: usize) -> u32 {
        let mut b = byte.min(line.len());
        while !line.is_char_boundary(b) {
            b -= 1;
        }
        let head = &line[..b];
        let n = match self {
            Encoding::Utf8 => b,
            _ if head.is_ascii() => b,
            Encoding::Utf16 => head.chars().map(char::len_utf16).sum(),
            Encoding::Utf32 => head.chars().count(),
        };
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The length of `line` in this encoding's units.
    pub fn line_len(self, line: &str) -> u32 {
        self.units(line, line.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_boundary_round_trips() {
        let line = "é😀x\u{10FFFF}";
        for enc in [Encoding::Utf8, Encoding::Utf16, Encoding::Utf32] {
            for (byte, _) in line.char_indices().chain([(line.len(), ' ')]) {
                let u = enc.units(line, byte);
                assert_eq!(enc.byte_exact(line, u), Some(byte), "{enc:?} {byte}");
                assert_eq!(enc.byte_clamped(line, u), byte, "{enc:?} {byte}");
            }
            assert_eq!(enc.byte_exact(line, enc.line_len(line) + 1), None);
            assert_eq!(enc.byte_clamped(line, u32::MAX), line.len());
        }
        // Inside é (UTF-8) and inside 😀 (UTF-8 and UTF-16).
        assert_eq!(Encoding::Utf8.byte_exact(line, 1), None);
        assert_eq!(Encoding::Utf8.byte_clamped(line, 1), 0);
        assert_eq!(Encoding::Utf16.byte_exact(line, 2), None);
        assert_eq!(Encoding::Utf16.byte_clamped(line, 2), 2);
    }

    #[test]
    fn negotiation_prefers_utf8_and_defaults_to_utf16() {
        assert_eq!(Encoding::negotiate(None), Encoding::Utf16);
        assert_eq!(
            Encoding::negotiate(Some(&[PositionEncodingKind::UTF32])),
            Encoding::Utf16
        );
        assert_eq!(
            Encoding::negotiate(Some(&[
                PositionEncodingKind::UTF16,
                PositionEncodingKind::UTF8
            ])),
            Encoding::Utf8
        );
    }
}

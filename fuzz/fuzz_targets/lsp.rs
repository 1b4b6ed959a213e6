//! The language server's document: open a text, apply edits at arbitrary
//! ranges (as didChange sends them, in UTF-16 and UTF-8 positions), and
//! build the index every answer reads. Never a panic, and the text always
//! reflects the edits.
#![no_main]
use libfuzzer_sys::fuzz_target;
use reel_lsp::document::Document;
use reel_lsp::position::Encoding;
use tower_lsp_server::ls_types::{Position, Range};

fuzz_target!(|data: &[u8]| {
    // The first half is the document, the rest drives edits: 9 bytes each
    // (start line, start char, end line, end char, encoding, 4 bytes of text).
    let split = data.len() / 2;
    let text = String::from_utf8_lossy(&data[..split]);
    let mut doc = Document::new(&text);
    let _ = doc.view();
    for edit in data[split..].chunks_exact(9) {
        let range = Range::new(
            Position::new(u32::from(edit[0] % 8), u32::from(edit[1])),
            Position::new(u32::from(edit[2] % 8), u32::from(edit[3])),
        );
        let enc = if edit[4] % 2 == 0 { Encoding::Utf16 } else { Encoding::Utf8 };
        let insert = String::from_utf8_lossy(&edit[5..9]);
        doc.apply_change(Some(range), &insert, enc);
        let _ = doc.view();
    }
    let _ = doc.text();
});

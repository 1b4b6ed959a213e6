//! `Tape::read` (and so `parse_line` for every line) on arbitrary bytes:
//! an error naming a line, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(tape) = reel::tape::Tape::read(data) {
        // What was read writes back and reads again to the same tape.
        let mut out = Vec::new();
        tape.write(&mut out).expect("a tape read writes");
        let again = reel::tape::Tape::read(&out[..]).expect("a written tape reads");
        assert_eq!(again.facts.len(), tape.facts.len());
        let _ = tape.digest_matches();
    }
});

//! The stored fact encoding (`reel::codec::decode_fact`) on arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(fact) = reel::codec::decode_fact(data) {
        // A decoded fact encodes, and decodes to itself.
        let mut out = Vec::new();
        reel::codec::encode_fact(&fact, &mut out).expect("a fact encodes");
        assert_eq!(reel::codec::decode_fact(&out).expect("re-decodes"), fact);
    }
});

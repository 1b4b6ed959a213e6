//! A stored block (every version: plain, lz4 and zstd) on arbitrary bytes:
//! header, checksum, declared sizes, decompression, the facts.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = reel_archive::fuzzing::decode_block(data);
});

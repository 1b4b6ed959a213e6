//! `reel collect`'s decoding on arbitrary input: the bytes read as an OTLP
//! trace export request in protobuf and in OTLP/JSON, every trace
//! assembled and mapped to a run, whose facts must keep the stream rules.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    reel_collect::fuzzing::decode_and_map(data);
});

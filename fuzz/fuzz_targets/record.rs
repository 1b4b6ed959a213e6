//! A stored run record on arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(record) = reel_archive::fuzzing::decode_record(data) {
        let _ = record.flagged();
        let _ = record.describe();
        let again = reel_archive::fuzzing::decode_record(&reel_archive::fuzzing::encode_record(&record));
        assert_eq!(again.expect("re-decodes"), record);
    }
});

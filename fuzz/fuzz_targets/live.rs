//! The live socket's messages (one JSON line each way) on arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use reel_archive::live::{Reply, Request};

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = serde_json::from_slice::<Request>(data) {
        let line = serde_json::to_string(&request).expect("a request serialises");
        assert_eq!(serde_json::from_str::<Request>(&line).expect("re-parses"), request);
    }
    let _ = serde_json::from_slice::<Reply>(data);
});

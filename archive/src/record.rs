//! The stored run record: one version byte, then MessagePack with field
//! names.

use reel_core::run::RunRecord;

pub(crate) fn encode_record(record: &RunRecord) -> Vec<u8> {
    let mut out = vec![1u8];
    // A record is plain data: encoding it cannot fail.
    rmp_serde::encode::write_named(&mut out, record).expect("run record encodes");
    out
}

pub(crate) fn decode_record(bytes: &[u8]) -> Result<RunRecord, String> {
    match bytes.split_first() {
        Some((1, rest)) => {
            rmp_serde::from_slice(rest).map_err(|e| format!("run record does not decode: {e}"))
        }
        Some((v, _)) => Err(format!("run record version {v} is not supported")),
        None => Err("empty run record".into()),
    }
}

/// The stored run summary (format 6): one version byte, then MessagePack
/// with field names.
pub(crate) fn encode_summary(summary: &reel_core::summary::RunSummary) -> Vec<u8> {
    let mut out = vec![1u8];
    // A summary is plain data: encoding it cannot fail.
    rmp_serde::encode::write_named(&mut out, summary).expect("run summary encodes");
    out
}

pub(crate) fn decode_summary(bytes: &[u8]) -> Result<reel_core::summary::RunSummary, String> {
    match bytes.split_first() {
        Some((1, rest)) => {
            rmp_serde::from_slice(rest).map_err(|e| format!("run summary does not decode: {e}"))
        }
        Some((v, _)) => Err(format!("run summary version {v} is not supported")),
        None => Err("empty run summary".into()),
    }
}

//! A request's body as OTLP/HTTP sends it: within the size bound, and
//! inflated when it came compressed with gzip (`Content-Encoding: gzip`,
//! what `OTEL_EXPORTER_OTLP_COMPRESSION=gzip` makes an exporter send).
//! The bound holds for the inflated size: a small body that inflates past
//! it (a zip bomb) is refused with 413 once the bound's bytes have been
//! inflated, never more. Another encoding is refused with 415 naming it.

use std::io::Read as _;

use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode};
use bytes::Bytes;

/// Why a body is refused: the status and what to say.
pub(crate) type Refusal = (StatusCode, String);

/// The body to decode: `received` (as read within `max` bytes), inflated
/// when `encoding` says gzip.
pub(crate) fn read(
    encoding: Option<&HeaderValue>,
    received: Result<Bytes, BytesRejection>,
    max: usize,
) -> Result<Bytes, Refusal> {
    let received = received.map_err(|r| match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => too_large(max, "is"),
        status => (status, r.body_text()),
    })?;
    let encoding = match encoding.map(HeaderValue::to_str) {
        None => return Ok(received),
        Some(Ok(e)) => e.trim(),
        Some(Err(_)) => "(not text)",
    };
    if encoding.is_empty() || encoding.eq_ignore_ascii_case("identity") {
        Ok(received)
    } else if encoding.eq_ignore_ascii_case("gzip") || encoding.eq_ignore_ascii_case("x-gzip") {
        gunzip(&received, max).map(Bytes::from)
    } else {
        Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Encoding {encoding:?} is not supported: send the body gzip-compressed \
                 (OTEL_EXPORTER_OTLP_COMPRESSION=gzip) or uncompressed \
                 (OTEL_EXPORTER_OTLP_COMPRESSION=none)"
            ),
        ))
    }
}

/// `compressed` inflated, at most `max` bytes of it.
pub(crate) fn gunzip(compressed: &[u8], max: usize) -> Result<Vec<u8>, Refusal> {
    let mut out = Vec::new();
    // One byte past the bound tells "exactly the bound" from "more".
    let bound = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::MultiGzDecoder::new(compressed)
        .take(bound)
        .read_to_end(&mut out)
        .map_err(|e| {
            (
                StatusCode::BAD_REQUEST,
                format!("the body says Content-Encoding gzip but does not inflate as gzip: {e}"),
            )
        })?;
    if out.len() > max {
        return Err(too_large(max, "inflates to"));
    }
    Ok(out)
}

fn too_large(max: usize, what: &str) -> Refusal {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the body {what} more than the limit of {max} bytes: send smaller batches \
             (OTEL_BSP_MAX_EXPORT_BATCH_SIZE) or start reel collect with a larger --max-body"
        ),
    )
}

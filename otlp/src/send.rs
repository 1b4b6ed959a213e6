//! Sending an `ExportTraceServiceRequest` to a collector.
//!
//! `opentelemetry-otlp`'s exporters take the SDK's `SpanData` (spans the
//! SDK's tracer produced), not OTLP proto spans built from a record, so
//! this module sends the official proto request itself: protobuf over
//! HTTP with hyper's client, gRPC with the tonic client that
//! `opentelemetry-proto` generates. Plain `http://` only (no TLS).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

/// How the request travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `POST {endpoint}/v1/traces`, `Content-Type: application/x-protobuf`.
    #[default]
    Http,
    /// OTLP/gRPC (`TraceService/Export`).
    Grpc,
}

/// Why an export failed; every message names the endpoint.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The endpoint is not an `http://` URL this client can reach.
    #[error("{endpoint} is not a usable OTLP endpoint: {detail}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        detail: String,
    },
    /// No connection, or the transport failed.
    #[error("cannot reach the OTLP collector at {endpoint}: {detail}")]
    Unreachable {
        /// The endpoint as given.
        endpoint: String,
        /// The transport's error.
        detail: String,
    },
    /// The collector answered with an error.
    #[error("the OTLP collector at {endpoint} refused the spans: {detail}")]
    Refused {
        /// The endpoint as given.
        endpoint: String,
        /// The status and body, or the gRPC status.
        detail: String,
    },
    /// The collector accepted only part of the spans.
    #[error("the OTLP collector at {endpoint} rejected {rejected} spans: {detail}")]
    Partial {
        /// The endpoint as given.
        endpoint: String,
        /// How many spans it rejected.
        rejected: i64,
        /// Its message.
        detail: String,
    },
}

/// How long one export may take before it is given up.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The URL an HTTP export posts to: `endpoint` as given when it already
/// ends in `/v1/traces`, else `endpoint` + `/v1/traces` (the OTLP base
/// endpoint convention).
pub fn traces_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    if trimmed.ends_with("/v1/traces") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/v1/traces")
    }
}

/// Sends `request` to `endpoint` and waits for the collector's answer
/// (at most [`TIMEOUT`]). Blocking: it drives its own single-threaded
/// runtime, so call it from a thread that is not inside one.
pub fn send(
    endpoint: &str,
    protocol: Protocol,
    request: &ExportTraceServiceRequest,
) -> Result<(), ExportError> {
    let bad = |detail: String| ExportError::Endpoint {
        endpoint: endpoint.to_owned(),
        detail,
    };
    if !endpoint.starts_with("http://") {
        return Err(bad("use an http:// URL (TLS is not supported)".into()));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| bad(format!("cannot start a runtime: {e}")))?;
    runtime.block_on(async {
        match tokio::time::timeout(TIMEOUT, send_async(endpoint, protocol, request)).await {
            Ok(r) => r,
            Err(_) => Err(ExportError::Unreachable {
                endpoint: endpoint.to_owned(),
                detail: format!("no answer within {}s", TIMEOUT.as_secs()),
            }),
        }
    })
}

async fn send_async(
    endpoint: &str,
    protocol: Protocol,
    request: &ExportTraceServiceRequest,
) -> Result<(), ExportError> {
    let unreachable = |detail: String| ExportError::Unreachable {
        endpoint: endpoint.to_owned(),
        detail,
    };
    let refused = |detail: String| ExportError::Refused {
        endpoint: endpoint.to_owned(),
        detail,
    };
    let partial = match protocol {
        Protocol::Grpc => {
            let mut client = TraceServiceClient::connect(endpoint.to_owned())
                .await
                .map_err(|e| unreachable(error_chain(&e)))?;
            let answer = client.export(request.clone()).await.map_err(|s| {
                if s.code() == tonic::Code::Unavailable {
                    unreachable(format!("{}: {}", s.code(), s.message()))
                } else {
                    refused(format!("{}: {}", s.code(), s.message()))
                }
            })?;
            answer.into_inner().partial_success
        }
        Protocol::Http => {
            let url = traces_url(endpoint);
            let uri: http::Uri = url.parse().map_err(|e| ExportError::Endpoint {
                endpoint: endpoint.to_owned(),
                detail: format!("{e}"),
            })?;
            let body = Full::new(Bytes::from(request.encode_to_vec()));
            let post = http::Request::post(uri)
                .header(http::header::CONTENT_TYPE, "application/x-protobuf")
                .body(body)
                .map_err(|e| refused(e.to_string()))?;
            let client = Client::builder(TokioExecutor::new()).build_http();
            let response = client
                .request(post)
                .await
                .map_err(|e| unreachable(error_chain(&e)))?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| unreachable(error_chain(&e)))?
                .to_bytes();
            if !status.is_success() {
                let text = String::from_utf8_lossy(&bytes[..bytes.len().min(500)]).into_owned();
                return Err(refused(format!("HTTP {status} from {url}: {text}")));
            }
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse::decode(
                bytes,
            )
            .ok()
            .and_then(|r| r.partial_success)
        }
    };
    match partial {
        Some(p) if p.rejected_spans > 0 => Err(ExportError::Partial {
            endpoint: endpoint.to_owned(),
            rejected: p.rejected_spans,
            detail: p.error_message,
        }),
        _ => Ok(()),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_http_url_is_the_base_endpoint_plus_v1_traces() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
        assert_eq!(traces_url("http://c/otlp"), "http://c/otlp/v1/traces");
    }

    #[test]
    fn a_tls_endpoint_is_refused_by_name_before_anything_is_sent() {
        let err = send(
            "https://c:4318",
            Protocol::Http,
            &ExportTraceServiceRequest::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "https://c:4318 is not a usable OTLP endpoint: use an http:// URL (TLS is not supported)"
        );
    }
}

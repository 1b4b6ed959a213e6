//! Sending an `ExportTraceServiceRequest` to a collector.
//!
//! `opentelemetry-otlp`'s exporters take the SDK's `SpanData` (spans the
//! SDK's tracer produced), not OTLP proto spans built from a record, so
//! this module sends the official proto request itself: protobuf over
//! HTTP with hyper's client, gRPC with the tonic client that
//! `opentelemetry-proto` generates. `https://` goes over rustls, trusting
//! the system's roots and any CA the operator adds ([`Collector::ca_pem`]);
//! headers ([`Collector::header`], e.g. a backend's API key) ride every
//! request and are never shown.

use std::fmt;
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
    /// A header or CA the operator gave is not usable.
    #[error("OTLP {what} is not usable: {detail}")]
    Config {
        /// Which setting (never a header's value).
        what: String,
        /// What is wrong, and what to do.
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

/// Where spans go: an `http://` or `https://` endpoint, the protocol,
/// headers sent with every request, and CAs trusted beside the system's.
/// `Debug` shows header names, never their values.
#[derive(Clone)]
pub struct Collector {
    endpoint: String,
    protocol: Protocol,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Extra trust anchors (DER), from [`Collector::ca_pem`].
    roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// The same, as PEM (what tonic takes).
    roots_pem: Vec<u8>,
}

impl fmt::Debug for Collector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collector")
            .field("endpoint", &self.endpoint)
            .field("protocol", &self.protocol)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("extra_roots", &self.roots.len())
            .finish()
    }
}

impl Collector {
    /// A collector at `endpoint` (`http://` or `https://`), spoken to
    /// over `protocol`. `Err` names the endpoint and what is wrong.
    pub fn new(endpoint: &str, protocol: Protocol) -> Result<Collector, ExportError> {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(ExportError::Endpoint {
                endpoint: endpoint.to_owned(),
                detail: "use an http:// or https:// URL".into(),
            });
        }
        if let Err(e) = endpoint.parse::<http::Uri>() {
            return Err(ExportError::Endpoint {
                endpoint: endpoint.to_owned(),
                detail: e.to_string(),
            });
        }
        Ok(Collector {
            endpoint: endpoint.to_owned(),
            protocol,
            headers: Vec::new(),
            roots: Vec::new(),
            roots_pem: Vec::new(),
        })
    }

    /// The endpoint as given.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// A header sent with every export (a backend's API key, say). The
    /// value is marked sensitive and appears in no message; `Err` names
    /// the header, never the value.
    pub fn header(mut self, name: &str, value: &str) -> Result<Collector, ExportError> {
        let bad = |detail: &str| ExportError::Config {
            what: format!("header {name:?}"),
            detail: detail.to_owned(),
        };
        let name: http::HeaderName = name
            .trim()
            .to_ascii_lowercase()
            .parse()
            .map_err(|_| bad("not a header name"))?;
        let mut value: http::HeaderValue = value
            .trim()
            .parse()
            .map_err(|_| bad("its value is not a valid header value (control characters?)"))?;
        value.set_sensitive(true);
        self.headers.push((name, value));
        Ok(self)
    }

    /// The headers' values (for a tripwire that keeps them out of the
    /// spans; never to be shown).
    pub fn header_values(&self) -> impl Iterator<Item = &str> {
        self.headers.iter().filter_map(|(_, v)| v.to_str().ok())
    }

    /// Headers in the OpenTelemetry form of `OTEL_EXPORTER_OTLP_HEADERS`:
    /// `key=value,key2=value2`, values percent-decoded.
    pub fn headers_list(mut self, list: &str) -> Result<Collector, ExportError> {
        for pair in list.split(',').filter(|p| !p.trim().is_empty()) {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(ExportError::Config {
                    what: "headers".into(),
                    detail: format!(
                        "an entry has no '=' (the form is key=value,key2=value2); the entry starting {:?}",
                        pair.trim().chars().take(12).collect::<String>()
                    ),
                });
            };
            let v = percent_decode(v).ok_or_else(|| ExportError::Config {
                what: format!("header {:?}", k.trim()),
                detail: "its value's percent-encoding does not decode to UTF-8".into(),
            })?;
            self = self.header(k, &v)?;
        }
        Ok(self)
    }

    /// Trusts the CA certificates of `pem` (beside the system's roots),
    /// as `OTEL_EXPORTER_OTLP_CERTIFICATE` names them. `source` names the
    /// file in errors.
    pub fn ca_pem(mut self, pem: &[u8], source: &str) -> Result<Collector, ExportError> {
        use rustls::pki_types::pem::PemObject;
        let bad = |detail: String| ExportError::Config {
            what: format!("CA certificate file {source}"),
            detail,
        };
        let certs = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("does not read as PEM certificates ({e})")))?;
        if certs.is_empty() {
            return Err(bad(
                "holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)".into(),
            ));
        }
        self.roots.extend(certs);
        self.roots_pem.extend_from_slice(pem);
        self.roots_pem.push(b'\n');
        Ok(self)
    }

    /// Sends `request` and waits for the collector's answer (at most
    /// [`TIMEOUT`]). Blocking: it drives its own single-threaded runtime,
    /// so call it from a thread that is not inside one.
    pub fn send(&self, request: &ExportTraceServiceRequest) -> Result<(), ExportError> {
        let endpoint = &self.endpoint;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ExportError::Endpoint {
                endpoint: endpoint.clone(),
                detail: format!("cannot start a runtime: {e}"),
            })?;
        runtime.block_on(async {
            match tokio::time::timeout(TIMEOUT, self.send_async(request)).await {
                Ok(r) => r,
                Err(_) => Err(ExportError::Unreachable {
                    endpoint: endpoint.clone(),
                    detail: format!("no answer within {}s", TIMEOUT.as_secs()),
                }),
            }
        })
    }

    /// The rustls configuration of an `https://` endpoint: the system's
    /// roots (those that parse) and the operator's.
    fn tls(&self) -> Result<rustls::ClientConfig, ExportError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        for cert in &self.roots {
            roots.add(cert.clone()).map_err(|e| ExportError::Config {
                what: "CA certificate".into(),
                detail: format!("is not usable as a trust anchor: {e}"),
            })?;
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        Ok(rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ExportError::Config {
                what: "TLS".into(),
                detail: e.to_string(),
            })?
            .with_root_certificates(roots)
            .with_no_client_auth())
    }

    async fn send_async(&self, request: &ExportTraceServiceRequest) -> Result<(), ExportError> {
        let endpoint = self.endpoint.as_str();
        let protocol = self.protocol;
        let tls = endpoint.starts_with("https://");
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
                let mut channel = tonic::transport::Endpoint::from_shared(endpoint.to_owned())
                    .map_err(|e| ExportError::Endpoint {
                        endpoint: endpoint.to_owned(),
                        detail: error_chain(&e),
                    })?;
                if tls {
                    // tonic builds its rustls config from the process's
                    // default provider, which rustls cannot choose when a
                    // build links both of its providers (a dependency's
                    // features can turn on the second): name ring, the one
                    // reel uses, unless the host already chose one.
                    if rustls::crypto::CryptoProvider::get_default().is_none() {
                        let _ = rustls::crypto::ring::default_provider().install_default();
                    }
                    let mut config = tonic::transport::ClientTlsConfig::new().with_native_roots();
                    if !self.roots_pem.is_empty() {
                        config = config.ca_certificate(tonic::transport::Certificate::from_pem(
                            &self.roots_pem,
                        ));
                    }
                    channel = channel
                        .tls_config(config)
                        .map_err(|e| ExportError::Config {
                            what: "TLS".into(),
                            detail: error_chain(&e),
                        })?;
                }
                let channel = channel
                    .connect()
                    .await
                    .map_err(|e| unreachable(error_chain(&e)))?;
                let mut client = TraceServiceClient::new(channel);
                let mut grpc_request = tonic::Request::new(request.clone());
                for (name, value) in &self.headers {
                    let key = tonic::metadata::MetadataKey::from_bytes(name.as_str().as_bytes())
                        .map_err(|_| ExportError::Config {
                            what: format!("header {:?}", name.as_str()),
                            detail: "is not a gRPC metadata key".into(),
                        })?;
                    let value = tonic::metadata::MetadataValue::try_from(value.as_bytes())
                        .map_err(|_| ExportError::Config {
                            what: format!("header {:?}", name.as_str()),
                            detail: "its value is not valid gRPC metadata".into(),
                        })?;
                    grpc_request.metadata_mut().insert(key, value);
                }
                let answer = client.export(grpc_request).await.map_err(|s| {
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
                let mut post = http::Request::post(uri)
                    .header(http::header::CONTENT_TYPE, "application/x-protobuf")
                    .body(body)
                    .map_err(|e| refused(e.to_string()))?;
                for (name, value) in &self.headers {
                    post.headers_mut().append(name.clone(), value.clone());
                }
                let response = if tls {
                    let connector = hyper_rustls::HttpsConnectorBuilder::new()
                        .with_tls_config(self.tls()?)
                        .https_only()
                        .enable_http1()
                        .build();
                    Client::builder(TokioExecutor::new())
                        .build(connector)
                        .request(post)
                        .await
                } else {
                    Client::builder(TokioExecutor::new())
                        .build_http()
                        .request(post)
                        .await
                }
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
}

/// Sends `request` to `endpoint` over `protocol`, with no headers and the
/// system's roots only: [`Collector::send`].
pub fn send(
    endpoint: &str,
    protocol: Protocol,
    request: &ExportTraceServiceRequest,
) -> Result<(), ExportError> {
    Collector::new(endpoint, protocol)?.send(request)
}

/// `%XX` decoded (the form OpenTelemetry's header lists use); `None` when
/// the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
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
    fn an_endpoint_of_another_scheme_is_refused_by_name_before_anything_is_sent() {
        let err = send(
            "ftp://c:4318",
            Protocol::Http,
            &ExportTraceServiceRequest::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "ftp://c:4318 is not a usable OTLP endpoint: use an http:// or https:// URL"
        );
    }

    #[test]
    fn headers_read_the_opentelemetry_list_form_and_never_show_their_values() {
        let c = Collector::new("https://c:4318", Protocol::Http)
            .unwrap()
            .headers_list("x-api-key=s3cr%3Dt%2Cval , Authorization=Bearer tok-9f2e,")
            .unwrap();
        let got: Vec<(String, String)> = c
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            got,
            [
                ("x-api-key".to_owned(), "s3cr=t,val".to_owned()),
                ("authorization".to_owned(), "Bearer tok-9f2e".to_owned())
            ]
        );
        assert!(c.headers.iter().all(|(_, v)| v.is_sensitive()));
        let shown = format!("{c:?}");
        assert!(
            shown.contains("x-api-key") && !shown.contains("s3cr") && !shown.contains("tok-9f2e"),
            "{shown}"
        );
        for (list, what) in [
            ("novalue", "headers"),
            ("bad name=v", "header \"bad name\""),
            ("k=line%0Abreak-tok-9f2e", "header \"k\""),
        ] {
            let e = Collector::new("http://c", Protocol::Http)
                .unwrap()
                .headers_list(list)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(&format!("OTLP {what} is not usable")), "{e}");
            assert!(!e.contains("tok-9f2e") && !e.contains("break"), "{e}");
        }
    }

    #[test]
    fn a_ca_file_that_holds_no_certificate_is_named() {
        let e = Collector::new("https://c", Protocol::Http)
            .unwrap()
            .ca_pem(b"not a pem", "ca.pem")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("OTLP CA certificate file ca.pem is not usable: holds no certificate"),
            "{e}"
        );
    }
}

//! The HTTP proxy (`reel mcp record --listen`) against hostile peers: it
//! holds no message over its limit in memory. A client declaring, or
//! streaming, a request body over the limit gets `413` naming the limit
//! and the flag, and nothing reaches the server; a server answering with
//! a JSON body or a server-sent event over the limit is passed through to
//! the client byte for byte, unrecorded; the proxy keeps serving and
//! records what fits.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use reel_archive::FingerprintKey;
use reel_recorder::{Recorder, RecorderConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: usize = 64 * 1024;

/// What the hostile server answers: a JSON body of `big-json`'s size, an
/// event stream with one huge event then a small one, else a small body.
fn answer(method: &str) -> (&'static str, Vec<u8>) {
    let huge = "x".repeat(4 * LIMIT);
    match method {
        "big-json" => (
            "application/json",
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"blob":"{huge}"}}}}"#).into_bytes(),
        ),
        "big-sse" => (
            "text/event-stream",
            format!(
                "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"blob\":\"{huge}\"}}}}\n\n\
                 event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{{}}}}\n\n"
            )
            .into_bytes(),
        ),
        _ => (
            "application/json",
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec(),
        ),
    }
}

/// Serves [`answer`] on a port of its own; counts the requests it got.
async fn hostile_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let count = count.clone();
                        async move {
                            count.fetch_add(1, Ordering::SeqCst);
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let message: serde_json::Value =
                                serde_json::from_slice(&body).unwrap_or_default();
                            let (kind, bytes) = answer(message["method"].as_str().unwrap_or(""));
                            let mut response = Response::new(Full::new(Bytes::from(bytes)));
                            response
                                .headers_mut()
                                .insert("content-type", kind.parse().unwrap());
                            Ok::<_, Infallible>(response)
                        }
                    });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, seen)
}

/// Sends `head` (and `body`, as it is), half-closes nothing, reads the
/// whole response (the proxy closes or the body is complete).
async fn raw(addr: std::net::SocketAddr, head: String, body: &[u8]) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    loop {
        let n =
            match tokio::time::timeout(std::time::Duration::from_secs(30), stream.read(&mut buf))
                .await
            {
                Ok(Ok(n)) => n,
                Ok(Err(e)) => panic!("reading the proxy's answer: {e}"),
                Err(_) => panic!(
                    "the proxy did not answer in 30 s: {}",
                    String::from_utf8_lossy(&out)
                ),
            };
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if response_complete(&out) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&out);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:.200}"));
    let start = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    (status, dechunk(&out[..start], &out[start..]))
}

fn header<'a>(head: &'a [u8], name: &str) -> Option<&'a str> {
    std::str::from_utf8(head).ok()?.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn response_complete(out: &[u8]) -> bool {
    let Some(start) = out.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let (head, body) = (&out[..start + 4], &out[start + 4..]);
    if let Some(len) = header(head, "content-length") {
        return body.len() >= len.parse::<usize>().unwrap();
    }
    body.ends_with(b"0\r\n\r\n")
}

fn dechunk(head: &[u8], body: &[u8]) -> Vec<u8> {
    if header(head, "transfer-encoding") != Some("chunked") {
        return body.to_vec();
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        let line = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&rest[line + 2..line + 2 + size]);
        rest = &rest[line + 2 + size + 2..];
    }
}

fn post(method: &str) -> (String, Vec<u8>) {
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{}}}}"#).into_bytes();
    (
        format!(
            "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        ),
        body,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_proxy_holds_no_message_over_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, seen) = hostile_server().await;
    let recorder = Recorder::open(
        dir.path(),
        RecorderConfig {
            fingerprint_key: FingerprintKey::Key([7; 32]),
            serve_live: false,
            ..RecorderConfig::default()
        },
    )
    .await
    .unwrap();
    let bound = reel_mcp::proxy::HttpProxy::new(&upstream)
        .unwrap()
        .max_body(LIMIT)
        .bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = bound.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let recorder = recorder.clone();
        async move {
            bound
                .run(Some(&recorder), async {
                    let _ = stopped.await;
                })
                .await
        }
    });

    // A declared length of 1 GiB: refused before a byte of it is sent.
    let (status, text) = raw(
        addr,
        "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1073741824\r\n\r\n".into(),
        b"",
    )
    .await;
    let text = String::from_utf8_lossy(&text).into_owned();
    assert_eq!(status, 413, "{text}");
    assert!(text.contains(&format!("limit of {LIMIT} bytes")), "{text}");
    assert!(text.contains("--max-body"), "{text}");

    // A chunked body with no declared length, streamed past the limit
    // (and never ended): refused once it crosses it.
    let mut chunks = Vec::new();
    for _ in 0..(LIMIT / 1024 + 1) {
        chunks.extend_from_slice(b"400\r\n");
        chunks.extend_from_slice(&[b' '; 1024]);
        chunks.extend_from_slice(b"\r\n");
    }
    let (status, text) = raw(
        addr,
        "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".into(),
        &chunks,
    )
    .await;
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&text));
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "an oversized request reached the server"
    );

    // Answers over the limit reach the client whole, unchanged.
    for method in ["big-json", "big-sse"] {
        let (head, body) = post(method);
        let (status, got) = raw(addr, head, &body).await;
        assert_eq!(status, 200, "{method}");
        assert_eq!(
            got,
            answer(method).1,
            "{method}: the client got other bytes"
        );
    }
    // And the proxy still serves, and records, what fits.
    let (head, body) = post("small");
    let (status, got) = raw(addr, head, &body).await;
    assert_eq!((status, got), (200, answer("small").1));
    assert_eq!(seen.load(Ordering::SeqCst), 3);

    let _ = stop.send(());
    let outcome = running.await.unwrap().unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    assert!(archive.verify().unwrap().is_ok());
    assert_eq!(outcome.run_ids.len(), 1, "the sessionless run");
    // Nothing of the huge answers was recorded.
    let facts = serde_json::to_string(
        &archive
            .facts(&outcome.run_ids[0], ..)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap(),
    )
    .unwrap();
    assert!(
        !facts.contains(&"x".repeat(1024)),
        "an oversized answer was recorded"
    );
}

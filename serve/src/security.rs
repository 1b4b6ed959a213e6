//! What stands between the console and a browser that should not read it.
//!
//! - **Where it listens.** Loopback by default; any other address only with
//!   a token ([`check_listen`]).
//! - **Who asks.** With a token, every request presents it: `Authorization:
//!   Bearer TOKEN`, or the `reel_token` cookie, which `/login?token=TOKEN`
//!   sets (`HttpOnly`, `SameSite=Strict`) and then sends the browser to `/`
//!   without the token in its address. Compared in constant time.
//! - **DNS rebinding.** The `Host` header must name a loopback name
//!   (`localhost`, `127.0.0.1`, `[::1]`), the listen address's IP, or a name
//!   given with `--allow-host`; an `Origin` header, when sent, the same with
//!   `http://`. Anything else is 403 before any route runs: a page of
//!   another site that rebinds its name to 127.0.0.1 reaches nothing.
//! - **What a page may do.** Every response carries a Content-Security-Policy
//!   with no inline script (`script-src 'self'`: the one embedded
//!   `/assets/console.js`), nothing from elsewhere (`default-src 'none'`),
//!   no framing, no referrer; the waterfall's bars are placed with `style`
//!   attributes, the one inline thing allowed (`style-src-attr`), which
//!   runs no code.
//! - **What a page says.** Every recorded string is escaped with the
//!   viewer's `escape` where it lands in HTML; the script writes only with
//!   `textContent`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Router;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::{Console, ServeConfig, ServeError};

/// The policy every response carries.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; style-src-attr 'unsafe-inline'; img-src 'self'; connect-src 'self'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The cookie that carries the token.
pub const TOKEN_COOKIE: &str = "reel_token";

/// The shortest token accepted.
pub const MIN_TOKEN_LEN: usize = 16;

/// Refuses an address off loopback unless a token is given.
pub fn check_listen(addr: SocketAddr, token: Option<&str>) -> Result<(), ServeError> {
    if let Some(t) = token {
        if t.chars().count() < MIN_TOKEN_LEN {
            return Err(ServeError::WeakToken {
                len: t.chars().count(),
            });
        }
    }
    if addr.ip().is_loopback() || token.is_some() {
        Ok(())
    } else {
        Err(ServeError::NeedsToken { addr })
    }
}

/// The settings the checks read.
pub(crate) struct Security {
    token: Option<String>,
    hosts: Vec<String>,
}

impl Security {
    pub(crate) fn new(config: &ServeConfig) -> Result<Security, ServeError> {
        check_listen(config.listen, config.token.as_deref())?;
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| h.to_string())
            .collect();
        let ip = config.listen.ip();
        if !ip.is_unspecified() && !ip.is_loopback() {
            hosts.push(match ip {
                std::net::IpAddr::V4(v4) => v4.to_string(),
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            });
        }
        hosts.extend(config.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
        Ok(Security {
            token: config.token.clone(),
            hosts,
        })
    }

    /// Whether `authority` (a `Host` value: name or IP, maybe a port)
    /// names this console.
    fn host_allowed(&self, authority: &str) -> bool {
        let authority = authority.trim().to_ascii_lowercase();
        let name = match authority.rfind(':') {
            // `[::1]:7777` or `name:7777`; a bare `[::1]` keeps its colons.
            Some(i) if !authority[i..].contains(']') => &authority[..i],
            _ => authority.as_str(),
        };
        self.hosts.iter().any(|h| h == name)
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        origin
            .strip_prefix("http://")
            .is_some_and(|rest| !rest.contains('/') && self.host_allowed(rest))
    }

    fn token_presented(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if bearer.is_some_and(|b| same(b.trim(), token)) {
            return true;
        }
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .any(|(name, value)| name == TOKEN_COOKIE && same(value, token))
    }
}

/// Equality that takes as long for every value of the same length.
fn same(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{why}\n"),
    )
        .into_response()
}

async fn guard(State(console): State<Arc<Console>>, request: Request, next: Next) -> Response {
    let s = &console.security;
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    match host {
        Some(h) if s.host_allowed(h) => {}
        _ => {
            return refuse(
                StatusCode::FORBIDDEN,
                "this console answers only to the names it serves (Host not allowed): \
                 open it as http://127.0.0.1:PORT/ or start it with --allow-host NAME",
            )
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        if !origin.to_str().is_ok_and(|o| s.origin_allowed(o)) {
            return refuse(StatusCode::FORBIDDEN, "cross-origin request refused");
        }
    }
    if request.uri().path() != "/login" && !s.token_presented(headers) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "this console needs its token: open /login?token=TOKEN once, or send \
             Authorization: Bearer TOKEN",
        );
    }
    next.run(request).await
}

/// The query of `/login`.
#[derive(serde::Deserialize)]
pub(crate) struct Login {
    token: Option<String>,
}

/// `/login?token=TOKEN`: sets the token's cookie and sends the browser to
/// `/` (so the token leaves the address bar and the history).
pub(crate) async fn login(
    State(console): State<Arc<Console>>,
    Query(login): Query<Login>,
) -> Response {
    let Some(token) = &console.security.token else {
        return Redirect::to("/").into_response();
    };
    match login.token {
        Some(given) if same(&given, token) => {
            let cookie = format!("{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
            let mut response = Redirect::to("/").into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, v);
            }
            response
        }
        _ => refuse(StatusCode::UNAUTHORIZED, "wrong or missing token"),
    }
}

/// The checks and the response headers around `routes`.
pub(crate) fn layers(routes: Router, console: Arc<Console>) -> Router {
    let set = |name: header::HeaderName, value: &'static str| {
        SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value))
    };
    routes
        .layer(middleware::from_fn_with_state(console, guard))
        .layer(set(
            header::CONTENT_SECURITY_POLICY,
            CONTENT_SECURITY_POLICY,
        ))
        .layer(set(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(set(header::REFERRER_POLICY, "no-referrer"))
        .layer(set(header::X_FRAME_OPTIONS, "DENY"))
        .layer(set(
            header::HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ))
        .layer(set(
            header::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn security(listen: &str, token: Option<&str>, allow: &[&str]) -> Security {
        let mut c = ServeConfig::new("a".into(), listen.parse().unwrap());
        c.token = token.map(Into::into);
        c.allowed_hosts = allow.iter().map(|h| h.to_string()).collect();
        Security::new(&c).unwrap()
    }

    #[test]
    fn hosts() {
        let s = security("127.0.0.1:7777", None, &[]);
        for ok in [
            "127.0.0.1:7777",
            "localhost",
            "LOCALHOST:1",
            "[::1]:7777",
            "[::1]",
        ] {
            assert!(s.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.example.com",
            "evil.example.com:7777",
            "127.0.0.1.evil.com",
            "localhost.evil",
            "",
            "[::2]",
        ] {
            assert!(!s.host_allowed(bad), "{bad}");
        }
        assert!(s.origin_allowed("http://127.0.0.1:7777"));
        assert!(!s.origin_allowed("null"));
        assert!(!s.origin_allowed("http://evil.example.com"));
        assert!(!s.origin_allowed("https://127.0.0.1.evil.com"));
        let s = security("10.1.2.3:80", Some("0123456789abcdef"), &["reel.lan"]);
        assert!(s.host_allowed("10.1.2.3") && s.host_allowed("reel.lan:80"));
    }

    #[test]
    fn listen_rules() {
        let any: SocketAddr = "0.0.0.0:7777".parse().unwrap();
        assert!(matches!(
            check_listen(any, None),
            Err(ServeError::NeedsToken { .. })
        ));
        assert!(check_listen(any, Some("0123456789abcdef")).is_ok());
        assert!(matches!(
            check_listen(any, Some("short")),
            Err(ServeError::WeakToken { len: 5 })
        ));
        assert!(check_listen("[::1]:1".parse().unwrap(), None).is_ok());
        let msg = check_listen(any, None).unwrap_err().to_string();
        assert!(msg.contains("--token-file"), "{msg}");
    }

    #[test]
    fn tokens() {
        let s = security("127.0.0.1:1", Some("0123456789abcdef"), &[]);
        let mut h = HeaderMap::new();
        assert!(!s.token_presented(&h));
        h.insert(
            header::COOKIE,
            "a=b; reel_token=0123456789abcdeX".parse().unwrap(),
        );
        assert!(!s.token_presented(&h));
        h.insert(
            header::COOKIE,
            "a=b; reel_token=0123456789abcdef".parse().unwrap(),
        );
        assert!(s.token_presented(&h));
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            "Bearer 0123456789abcdef".parse().unwrap(),
        );
        assert!(s.token_presented(&h));
    }
}

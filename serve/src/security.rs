//! What stands between the console and a browser that should not read it.
//!
//! - **Where it listens.** Loopback by default; any other address only with
//!   a token ([`check_listen`]).
//! - **Who asks.** With tokens, every request presents one: `Authorization:
//!   Bearer TOKEN`, or the `reel_token` cookie, which `/login?token=TOKEN`
//!   sets (`HttpOnly`, `SameSite=Strict`) and then sends the browser to `/`
//!   without the token in its address. Compared in constant time.
//! - **What it may read.** A token may be limited to one tenant
//!   ([`Token::tenant`]; the token file's `TOKEN tenant=NAME` lines,
//!   [`parse_tokens`]): the guard hands the request a grant naming it,
//!   and the one data-access point, `source::Access` (every handler that
//!   reads a run gets its data through it), answers another tenant's run
//!   exactly as a missing one (404), and lists, counts, searches and
//!   announces (SSE) only that tenant's runs.
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

/// A secret a client may present, and what it may read.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The secret (at least [`MIN_TOKEN_LEN`] characters).
    pub secret: String,
    /// The one tenant whose runs it reaches; `None`: every run.
    pub tenant: Option<String>,
}

impl std::fmt::Debug for Token {
    // Never the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("secret", &"<redacted>")
            .field("tenant", &self.tenant)
            .finish()
    }
}

/// Reads a token file: one token per line, `TOKEN` (every run) or
/// `TOKEN tenant=NAME` (only that tenant's runs); blank lines and lines
/// starting with `#` are skipped. The error names the line (never its
/// secret) and says what is wrong.
pub fn parse_tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens: Vec<Token> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n = i + 1;
        let mut words = line.split_whitespace();
        let secret = words.next().unwrap_or_default().to_owned();
        let mut tenant = None;
        for word in words {
            match word.split_once('=') {
                Some(("tenant", name)) if !name.is_empty() && tenant.is_none() => {
                    tenant = Some(name.to_owned())
                }
                _ => {
                    return Err(format!(
                        "line {n}: expected `TOKEN` or `TOKEN tenant=NAME`, with one tenant \
                         (found another word after the token)"
                    ))
                }
            }
        }
        let len = secret.chars().count();
        if len < MIN_TOKEN_LEN {
            return Err(format!(
                "line {n}: the token is {len} characters long: use at least {MIN_TOKEN_LEN} \
                 (e.g. `openssl rand -hex 32`)"
            ));
        }
        if tokens.iter().any(|t| t.secret == secret) {
            return Err(format!("line {n}: the same token is given twice"));
        }
        tokens.push(Token { secret, tenant });
    }
    Ok(tokens)
}

/// Refuses an address off loopback unless a token is given, and a token
/// too short to be a secret.
pub fn check_listen(addr: SocketAddr, tokens: &[Token]) -> Result<(), ServeError> {
    if let Some(t) = tokens
        .iter()
        .find(|t| t.secret.chars().count() < MIN_TOKEN_LEN)
    {
        return Err(ServeError::WeakToken {
            len: t.secret.chars().count(),
        });
    }
    if addr.ip().is_loopback() || !tokens.is_empty() {
        Ok(())
    } else {
        Err(ServeError::NeedsToken { addr })
    }
}

/// What a request may read, set by the guard on every request it lets
/// through and read by `source::Access` (a request without one reads
/// nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// The one tenant whose runs it reaches; `None`: every run.
    pub(crate) tenant: Option<String>,
}

/// The settings the checks read.
pub(crate) struct Security {
    tokens: Vec<Token>,
    hosts: Vec<String>,
}

impl Security {
    pub(crate) fn new(config: &ServeConfig) -> Result<Security, ServeError> {
        check_listen(config.listen, &config.tokens)?;
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
            tokens: config.tokens.clone(),
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

    /// The grant of the token the request presents (bearer first, then
    /// the cookie); every run when no token is configured; `None` when a
    /// token is needed and none matches.
    fn grant(&self, headers: &HeaderMap) -> Option<Grant> {
        if self.tokens.is_empty() {
            return Some(Grant { tenant: None });
        }
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let cookies = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .filter(|(name, _)| *name == TOKEN_COOKIE)
            .map(|(_, value)| value);
        bearer
            .into_iter()
            .chain(cookies)
            .find_map(|given| self.matching(given))
            .map(|t| Grant {
                tenant: t.tenant.clone(),
            })
    }

    /// The token `given` is, compared with every token in constant time.
    fn matching(&self, given: &str) -> Option<&Token> {
        let mut found = None;
        for t in &self.tokens {
            if same(given, &t.secret) && found.is_none() {
                found = Some(t);
            }
        }
        found
    }

    #[cfg(test)]
    fn token_presented(&self, headers: &HeaderMap) -> bool {
        self.grant(headers).is_some()
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
    match admit(&console.security, request, true) {
        Ok(request) => next.run(request).await,
        Err((status, why)) => refuse(status, why),
    }
}

/// The checks every request passes (`Host`, `Origin`, the token), the
/// console's and [`gated`]'s alike: the request with its grant, or the
/// refusal. `login_open`: `/login` is reached without a token.
fn admit(
    s: &Security,
    mut request: Request,
    login_open: bool,
) -> Result<Request, (StatusCode, &'static str)> {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    match host {
        Some(h) if s.host_allowed(h) => {}
        _ => {
            return Err((
                StatusCode::FORBIDDEN,
                "this server answers only to the names it serves (Host not allowed): \
                 use http://127.0.0.1:PORT/ or start it with --allow-host NAME",
            ))
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        if !origin.to_str().is_ok_and(|o| s.origin_allowed(o)) {
            return Err((StatusCode::FORBIDDEN, "cross-origin request refused"));
        }
    }
    match s.grant(headers) {
        Some(grant) => {
            request.extensions_mut().insert(grant);
        }
        None if login_open && request.uri().path() == "/login" => {}
        None => {
            return Err((
                StatusCode::UNAUTHORIZED,
                "this server needs its token: send Authorization: Bearer TOKEN \
                 (in a browser, open /login?token=TOKEN once)",
            ))
        }
    }
    Ok(request)
}

/// `routes` behind the console's checks, for another server of reel's
/// (`reel collect`): refused unless `listen` is loopback or `tokens` are
/// given ([`check_listen`]); every request then passes the `Host` and
/// `Origin` checks (DNS rebinding) and, with tokens, presents one as
/// `Authorization: Bearer TOKEN` (compared in constant time). A token's
/// tenant limit is the console's alone: here every token admits alike.
pub fn gated(
    routes: Router,
    listen: SocketAddr,
    tokens: Vec<Token>,
    allowed_hosts: Vec<String>,
) -> Result<Router, ServeError> {
    let config = ServeConfig {
        tokens,
        allowed_hosts,
        ..ServeConfig::new(std::path::PathBuf::new(), listen)
    };
    let security = Arc::new(Security::new(&config)?);
    Ok(routes.layer(middleware::from_fn_with_state(
        security,
        |State(s): State<Arc<Security>>, request: Request, next: Next| async move {
            match admit(&s, request, false) {
                Ok(request) => next.run(request).await,
                Err((status, why)) => refuse(status, why),
            }
        },
    )))
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
    if console.security.tokens.is_empty() {
        return Redirect::to("/").into_response();
    }
    match login
        .token
        .as_deref()
        .and_then(|given| console.security.matching(given))
    {
        Some(token) => {
            let cookie = format!(
                "{TOKEN_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                token.secret
            );
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
        c.tokens = token
            .map(|t| Token {
                secret: t.into(),
                tenant: None,
            })
            .into_iter()
            .collect();
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
        let token = |s: &str| {
            vec![Token {
                secret: s.into(),
                tenant: None,
            }]
        };
        assert!(matches!(
            check_listen(any, &[]),
            Err(ServeError::NeedsToken { .. })
        ));
        assert!(check_listen(any, &token("0123456789abcdef")).is_ok());
        assert!(matches!(
            check_listen(any, &token("short")),
            Err(ServeError::WeakToken { len: 5 })
        ));
        assert!(check_listen("[::1]:1".parse().unwrap(), &[]).is_ok());
        let msg = check_listen(any, &[]).unwrap_err().to_string();
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

    #[test]
    fn token_files() {
        let parsed =
            parse_tokens("# operators\n0123456789abcdef\n\n  fedcba9876543210 tenant=acme  \n")
                .unwrap();
        assert_eq!(
            parsed,
            vec![
                Token {
                    secret: "0123456789abcdef".into(),
                    tenant: None
                },
                Token {
                    secret: "fedcba9876543210".into(),
                    tenant: Some("acme".into())
                },
            ]
        );
        for (bad, says) in [
            ("short tenant=a", "line 1: the token is 5 characters long"),
            ("0123456789abcdef tenant=", "line 1: expected"),
            ("0123456789abcdef tenant=a tenant=b", "line 1: expected"),
            ("0123456789abcdef other=a", "line 1: expected"),
            (
                "\n0123456789abcdef\n0123456789abcdef",
                "line 3: the same token",
            ),
        ] {
            let e = parse_tokens(bad).unwrap_err();
            assert!(e.starts_with(says), "{bad:?}: {e}");
            assert!(!e.contains("0123456789abcdef"), "a secret in {e}");
        }
        assert_eq!(parse_tokens("# none\n").unwrap(), vec![]);
        let shown = format!("{:?}", parsed[0]);
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
    }

    #[test]
    fn grants() {
        let mut c = ServeConfig::new("a".into(), "127.0.0.1:1".parse().unwrap());
        c.tokens = parse_tokens("0123456789abcdef\nfedcba9876543210 tenant=acme").unwrap();
        let s = Security::new(&c).unwrap();
        let with = |name, value: &str| {
            let mut h = HeaderMap::new();
            h.insert(name, value.parse().unwrap());
            s.grant(&h)
        };
        assert_eq!(
            with(header::AUTHORIZATION, "Bearer fedcba9876543210"),
            Some(Grant {
                tenant: Some("acme".into())
            })
        );
        assert_eq!(
            with(header::COOKIE, "reel_token=0123456789abcdef"),
            Some(Grant { tenant: None })
        );
        assert_eq!(with(header::COOKIE, "reel_token=fedcba987654321"), None);
        assert_eq!(s.grant(&HeaderMap::new()), None);
    }
}

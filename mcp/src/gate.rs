//! The door of reel's MCP HTTP listeners (`reel mcp record --listen`,
//! `reel mcp mock --listen`): which `Host` and `Origin` a request may
//! name, and the listener's own token off loopback.

use std::net::SocketAddr;

use http::{header, HeaderMap, HeaderValue, Uri};
use reel::context::Secret;

/// The header a client presents the listener's own token in
/// ([`Gate::token`]). Not `Authorization`: through the proxy that one
/// carries the upstream's bearer token, passed through untouched.
pub const TOKEN_HEADER: &str = "reel-token";

/// The shortest token a listener accepts.
pub const MIN_TOKEN_LEN: usize = 16;

/// The host names a listener answers for unless told more
/// ([`Gate::allow_host`]): the loopback names, any port.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A host name as compared: lower case, without IPv6 brackets.
fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// Who may use a listener: the host names a request's `Host` and `Origin`
/// may name (a guard against DNS rebinding), and the tokens it must
/// present when the listener has any.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    /// The listener's verb, as its messages name it (`reel mcp record`).
    verb: &'static str,
    /// What anyone reaching an open port off loopback could do.
    risk: &'static str,
    /// Normalized ([`normalize_host`]).
    allowed_hosts: Vec<String>,
    tokens: Vec<Secret>,
}

impl Gate {
    /// Loopback names only, no token; `verb` and `risk` for its messages.
    pub(crate) fn new(verb: &'static str, risk: &'static str) -> Gate {
        Gate {
            verb,
            risk,
            allowed_hosts: LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect(),
            tokens: Vec::new(),
        }
    }

    /// Also answers `name` (a host name or address, no port).
    pub(crate) fn allow_host(&mut self, name: &str) -> Result<(), String> {
        let host = normalize_host(name.trim());
        let parsed = http::uri::Authority::try_from(name.trim());
        let bare = match &parsed {
            Ok(a) => a.port().is_none() && normalize_host(a.host()) == host,
            // An IPv6 address without brackets is no authority, but a host.
            Err(_) => host.parse::<std::net::Ipv6Addr>().is_ok(),
        };
        if host.is_empty() || !bare {
            return Err(format!(
                "--allow-host {name:?} is not a host name; give a name or an address \
                 without scheme, port or path (e.g. --allow-host mcp.internal)"
            ));
        }
        if !self.allowed_hosts.contains(&host) {
            self.allowed_hosts.push(host);
        }
        Ok(())
    }

    /// Asks every request for `token` (or another one given).
    pub(crate) fn token(&mut self, token: Secret) {
        self.tokens.push(token);
    }

    /// Refuses `addr` off loopback without a token, and a short token.
    pub(crate) fn check_listen(&self, addr: SocketAddr) -> Result<(), String> {
        if let Some(short) = self
            .tokens
            .iter()
            .find(|t| t.expose().chars().count() < MIN_TOKEN_LEN)
        {
            return Err(format!(
                "the token is {} characters long: use at least {MIN_TOKEN_LEN} (e.g. `openssl rand -hex 32 > FILE`)",
                short.expose().chars().count()
            ));
        }
        if addr.ip().is_loopback() || !self.tokens.is_empty() {
            return Ok(());
        }
        Err(format!(
            "refusing to listen on {addr} without a token: anyone who can reach that address \
             could {}. Pass --token-file FILE (a file holding a secret of at least \
             {MIN_TOKEN_LEN} characters; clients send it as `Reel-Token: TOKEN`), or listen on \
             loopback (127.0.0.1:PORT)",
            self.risk
        ))
    }

    /// Why a request may not be answered (`Host` or `Origin` naming a
    /// host not allowed, no token), or `None`. The guard against DNS
    /// rebinding: a page a browser loaded from a name an attacker
    /// controls, rebound to this address, sends that name in `Host` and
    /// its origin in `Origin`.
    pub(crate) fn refusal(&self, headers: &HeaderMap) -> Option<String> {
        let verb = self.verb;
        let allowed = |host: &str| self.allowed_hosts.contains(&normalize_host(host));
        let hosts = self.allowed_hosts.join(", ");
        let advice = "start it with --allow-host NAME to accept another name";
        // (An HTTP/2 request's `:authority` was made its `Host` by then.)
        let host = headers.get(header::HOST).map(|v| {
            v.to_str()
                .ok()
                .and_then(|t| http::uri::Authority::try_from(t).ok())
        });
        match host {
            None => {
                return Some(format!(
                    "{verb}: the request has no Host header; this listener answers only \
                     requests naming {hosts} (any port) in Host, a guard against DNS rebinding\n"
                ))
            }
            Some(Some(a)) if allowed(a.host()) => {}
            Some(_) => {
                let shown = headers
                    .get(header::HOST)
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                    .unwrap_or_default();
                return Some(format!(
                    "{verb}: refused the Host {shown:?}: this listener answers only \
                     {hosts} (any port), a guard against DNS rebinding; {advice}\n"
                ));
            }
        }
        if !self.token_presented(headers) {
            return Some(format!(
                "{verb}: this listener needs its token: send it in the Reel-Token header \
                 (the one in the file given with --token-file)\n"
            ));
        }
        let origin = headers.get(header::ORIGIN)?;
        let origin_host = origin
            .to_str()
            .ok()
            .and_then(|t| t.parse::<Uri>().ok())
            .and_then(|u| u.host().map(str::to_owned));
        match origin_host {
            Some(h) if allowed(&h) => None,
            _ => Some(format!(
                "{verb}: refused the Origin {:?}: this listener answers only pages of \
                 {hosts} (any port), a guard against DNS rebinding; {advice}\n",
                String::from_utf8_lossy(origin.as_bytes())
            )),
        }
    }

    /// Whether `headers` present one of the tokens (compared in constant
    /// time); true when the gate asks for none.
    fn token_presented(&self, headers: &HeaderMap) -> bool {
        if self.tokens.is_empty() {
            return true;
        }
        let Some(given) = headers.get(TOKEN_HEADER).map(|v| v.as_bytes()) else {
            return false;
        };
        self.tokens.iter().fold(false, |found, t| {
            let want = t.expose().as_bytes();
            let same = want.len() == given.len()
                && want.iter().zip(given).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0;
            found | same
        })
    }
}

/// Gives a request that names its host in `:authority` (HTTP/2) the one
/// `Host` header HTTP/1.1 has, so the gate checks, and an upstream is
/// sent, one `Host`.
pub fn host_from_authority(parts: &mut http::request::Parts) {
    if !parts.headers.contains_key(header::HOST) {
        if let Some(host) = parts
            .uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        {
            parts.headers.insert(header::HOST, host);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn host_and_origin_name_an_allowed_host_or_are_refused() {
        let mut gate = Gate::new("reel mcp record", "use it");
        gate.allow_host("MCP.Internal").unwrap();
        let check = |host: Option<&str>, origin: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = host {
                h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
            }
            if let Some(v) = origin {
                h.insert(header::ORIGIN, HeaderValue::from_str(v).unwrap());
            }
            gate.refusal(&h).is_none()
        };
        for host in [
            "localhost",
            "localhost:1",
            "127.0.0.1:8765",
            "[::1]:80",
            "mcp.internal:9",
        ] {
            assert!(check(Some(host), None), "{host}");
        }
        for host in [
            "evil.test",
            "evil.test:8765",
            "127.0.0.2",
            "localhost.evil.test",
            "",
        ] {
            assert!(!check(Some(host), None), "{host}");
        }
        assert!(!check(None, None), "no Host");
        assert!(check(Some("localhost:1"), Some("http://localhost:3000")));
        assert!(check(Some("localhost:1"), Some("https://[::1]")));
        for origin in ["http://evil.test", "null", "file://", "garbage"] {
            assert!(!check(Some("localhost:1"), Some(origin)), "{origin}");
        }
        for bad in ["", "http://x", "x:80", "x/y"] {
            let e = Gate::new("v", "r").allow_host(bad).unwrap_err();
            assert!(e.contains("--allow-host"), "{e}");
        }
        assert!(Gate::new("v", "r").allow_host("::1").is_ok());
    }
}

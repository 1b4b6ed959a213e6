//! Subjects and keys: a run's (or an outside call's) stream key and tenant
//! as NATS subject tokens.

/// Escapes `text` into one NATS subject token (also a valid KV key part):
/// ASCII letters, digits and `-` stay; every other byte becomes `_` and two
/// lowercase hex digits. Injective, so [`token_of`] reverses it; the empty
/// text is `_`, which no escape produces.
pub fn subject_token(text: &str) -> String {
    if text.is_empty() {
        return "_".into();
    }
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("_{b:02x}"));
        }
    }
    out
}

/// Reverses [`subject_token`]; `None` for a token it cannot have made.
pub fn token_of(token: &str) -> Option<String> {
    if token == "_" {
        return Some(String::new());
    }
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'_' {
            let hex = token.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The subject of a stream: `<prefix>.<tenant>.run.<run id>` for a run,
/// `<prefix>.<tenant>.call.<key>` for a call outside any run.
pub fn subject_of(prefix: &str, tenant: Option<&str>, stream: &str, outside: bool) -> String {
    format!(
        "{prefix}.{}.{}.{}",
        subject_token(tenant.unwrap_or("")),
        if outside { "call" } else { "run" },
        subject_token(stream)
    )
}

/// The stream key a subject of [`subject_of`] names, and whether it is a
/// call outside any run; `None` for any other subject.
pub fn stream_of_subject(prefix: &str, subject: &str) -> Option<(String, bool)> {
    let rest = subject.strip_prefix(prefix)?.strip_prefix('.')?;
    let mut parts = rest.split('.');
    let (_tenant, kind, token) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let outside = match kind {
        "run" => false,
        "call" => true,
        _ => return None,
    };
    Some((token_of(token)?, outside))
}

/// The tenant token of a subject [`stream_of_subject`] accepts (as
/// escaped; `_` for a stream without a tenant): the third token from the
/// end, whatever the prefix (tokens hold no dots).
pub(crate) fn tenant_token_of_subject(subject: &str) -> Option<&str> {
    subject.rsplit('.').nth(2)
}

/// The KV key of a stream's claim and record.
pub(crate) fn kv_key(stream: &str, outside: bool) -> String {
    format!(
        "{}.{}",
        if outside { "call" } else { "run" },
        subject_token(stream)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_escape_what_subjects_cannot_hold_and_reverse() {
        for text in ["run-1", "a.b", "*", ">", "x y", "t_1", "_", "", "é~"] {
            let token = subject_token(text);
            assert!(!token.is_empty());
            assert!(token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            assert_eq!(token_of(&token).as_deref(), Some(text));
        }
        let subject = subject_of("reel", Some("acme.eu"), "run.1", false);
        assert_eq!(subject, "reel.acme_2eeu.run.run_2e1");
        assert_eq!(
            stream_of_subject("reel", &subject),
            Some(("run.1".into(), false))
        );
        assert_eq!(
            stream_of_subject("reel", &subject_of("reel", None, "k", true)),
            Some(("k".into(), true))
        );
        assert_eq!(stream_of_subject("reel", "reel.a.other.b"), None);
        assert_eq!(tenant_token_of_subject(&subject), Some("acme_2eeu"));
        assert_eq!(
            tenant_token_of_subject(&subject_of("org.reel", None, "k", true)),
            Some("_")
        );
        assert_eq!(tenant_token_of_subject("a.b"), None);
    }
}

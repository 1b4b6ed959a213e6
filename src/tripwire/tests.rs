use super::*;
use base64::Engine as _;

const S: &str = "sk-Live_9f8e7d6c5b4a/3+2=1 \"q\"";

fn forms(s: &str) -> Vec<(String, Encoding)> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    let b = s.as_bytes();
    let mut out = vec![
        (s.to_owned(), Encoding::Raw),
        (serde_json::to_string(s).unwrap(), Encoding::Json),
        (format!("{s:?}"), Encoding::Debug),
        (
            String::from_utf8(percent(b, true, false)).unwrap(),
            Encoding::Percent,
        ),
        (
            String::from_utf8(percent(b, false, true)).unwrap(),
            Encoding::Percent,
        ),
    ];
    for prefix in ["", "u:", "ann:", "a much longer prefix:"] {
        let mut whole = prefix.as_bytes().to_vec();
        whole.extend_from_slice(b);
        whole.extend_from_slice(b" tail");
        out.push((STANDARD.encode(&whole), Encoding::Base64));
        out.push((STANDARD_NO_PAD.encode(&whole), Encoding::Base64));
        out.push((URL_SAFE.encode(&whole), Encoding::Base64Url));
        out.push((URL_SAFE_NO_PAD.encode(&whole), Encoding::Base64Url));
    }
    out.push((STANDARD.encode(b), Encoding::Base64));
    out.push((hex::encode(b), Encoding::Hex));
    out.push((hex::encode_upper(b), Encoding::Hex));
    let escaped = |upper: bool| {
        s.encode_utf16()
            .map(|u| {
                if upper {
                    format!("\\u{u:04X}")
                } else {
                    format!("\\u{u:04x}")
                }
            })
            .collect::<String>()
    };
    out.push((escaped(false), Encoding::UnicodeEscape));
    out.push((escaped(true), Encoding::UnicodeEscape));
    // Escaped again, as JSON text inside a JSON string holds it.
    out.push((
        escaped(false).replace('\\', "\\\\"),
        Encoding::UnicodeEscape,
    ));
    out
}

/// A secret written as UTF-16 text (little- and big-endian), as a
/// Windows tool or a `.reg`/PowerShell export writes it, is found in
/// bytes: an artifact holding it is withheld.
#[test]
fn utf16_bytes_are_found() {
    let mut wire = Tripwire::new();
    wire.add(S);
    for (bytes, encoding) in [
        (
            S.encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect::<Vec<u8>>(),
            Encoding::Utf16Le,
        ),
        (
            S.encode_utf16().flat_map(u16::to_be_bytes).collect(),
            Encoding::Utf16Be,
        ),
    ] {
        let mut file = b"\xff\xfe".to_vec();
        file.extend_from_slice(&bytes);
        file.extend_from_slice(&[b'\n', 0]);
        assert_eq!(wire.scan(&file), Some(encoding));
    }
}

#[test]
fn every_form_is_found_and_scrubbed() {
    let mut wire = Tripwire::new();
    wire.add(S);
    for (form, encoding) in forms(S) {
        let mut text = format!("before {form} after");
        let found = wire.scrub_str(&mut text);
        assert!(found.is_some(), "{encoding}: not found in {form}");
        assert!(text.contains(MARKER));
        assert!(!text.contains(&form), "{encoding}: left in {text}");
        assert!(wire.scan(text.as_bytes()).is_none(), "{encoding}: {text}");
    }
}

#[test]
fn ordinary_text_and_short_values_pass() {
    let mut wire = Tripwire::new();
    wire.add("short");
    assert!(wire.is_empty());
    wire.add(S);
    let mut text = String::from("a progress report: step 5 of 9, aGVsbG8gd29ybGQ=");
    assert_eq!(wire.scrub_str(&mut text), None);
}

#[test]
fn a_fact_is_scrubbed_and_the_field_named() {
    use crate::fact::{Level, Log};
    let mut wire = Tripwire::new();
    wire.add(S);
    let enc = STANDARD_NO_PAD.encode(S);
    let mut facts = vec![NewFact {
        at: 1,
        offset: 2,
        call: Some("c1".into()),
        kind: FactKind::Log(Log {
            level: Level::Info,
            logger: None,
            subflow: None,
            data: serde_json::json!({"hdr": {"x/y": format!("Basic {enc}")}}),
            delivered: false,
            in_flight: Vec::new(),
        }),
    }];
    let added = wire.guard_batch("archive", "known-values", None, &mut facts, &mut Vec::new());
    assert_eq!(added, 1);
    let FactKind::RedactionTripped(t) = &facts[1].kind else {
        panic!("{:?}", facts[1].kind)
    };
    assert_eq!(
        (
            t.point.as_str(),
            t.fact.as_str(),
            t.field.as_str(),
            t.encoding.as_str()
        ),
        ("archive", "log", "/data/data/hdr/x~1y", "base64")
    );
    assert_eq!(facts[1].call.as_deref(), Some("c1"));
    let FactKind::Log(l) = &facts[0].kind else {
        panic!()
    };
    assert!(!l.data.to_string().contains(&enc[..12]));
}

use super::*;
use serde_json::json;

fn check(key: &str, secret: bool) {
    assert_eq!(
        Redactor::default().is_secret_key(key),
        secret,
        "key {key:?}"
    );
}

#[test]
fn key_rules() {
    for (key, secret) in [
        ("password", true),
        ("Password", true),
        ("user_password", true),
        ("access_token", true),
        ("refreshToken", true),
        ("x-api-key", true),
        ("API_KEY", true),
        ("apiKey", true),
        ("Authorization", true),
        ("client_secret", true),
        ("max_tokens", false),
        ("tokens_used", false),
        // Counts, usage and limits of tokens are quantities, not
        // tokens: a quantity word after the rule's words, or a
        // quantity word right before them, says so.
        ("token_count", false),
        ("promptTokenCount", false),
        ("cachedContentTokenCount", false),
        ("token_usage", false),
        ("TOKEN_LIMIT", false),
        ("max_token", false),
        ("num_token", false),
        ("password_length", false),
        ("token_type", true),
        ("session_token", true),
        ("x-auth-token", true),
        ("count_token", true),
        ("progressToken", false),
        ("progress_token", false),
        ("progress", false),
        ("progress_auth_token", true),
        ("token_progress", true),
        ("token_per_user", true),
        ("username", false),
        ("message", false),
        ("keyboard", false),
        ("secretary", false),
    ] {
        check(key, secret);
    }
}

/// The allocation-free matcher agrees with matching on the allocated
/// lower-case words, key by key.
#[test]
fn key_matching_agrees_with_the_word_lists() {
    let r = Redactor::new(&["session_cookie", "x-Ärger", "İd"]);
    let reference = |key: &str| {
        let w = words(key);
        r.rules.iter().any(|rule| {
            (0..w.len()).any(|i| {
                w[i..].starts_with(rule)
                    && !(i > 0
                        && (QUANTITY_BEFORE.contains(&w[i - 1].as_str())
                            || ID_BEFORE.contains(&w[i - 1].as_str())))
                    && !w[i + rule.len()..]
                        .iter()
                        .any(|x| QUANTITY_AFTER.contains(&x.as_str()))
            })
        })
    };
    let long = "a_".repeat(STACK_WORDS + 3) + "api_key";
    let keys = [
        "",
        "_",
        "__token__",
        "token",
        "TOKEN",
        "Token",
        "toKen",
        "maxTokens",
        "max_tokens",
        "apiKey",
        "APIKey",
        "api.key",
        "api key",
        "api/key",
        "x-api-key",
        "apikey",
        "ApiKeys",
        "session-cookie",
        "sessionCookie",
        "SESSION_COOKIE",
        "set-cookie",
        "client_secret",
        "clientSecret2",
        "secret2",
        "v2Token",
        "passwört",
        "PASSWÖRT",
        "x_ärger",
        "X-ÄRGER",
        "xÄrger",
        "İd",
        "id",
        "İD",
        "i\u{307}d",
        "ǅungla",
        "message",
        "done",
        "total",
        "privateKey",
        "private_key_id",
        "credentials",
        "authorizationHeader",
        long.as_str(),
        &"w".repeat(200),
        "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p_q",
        "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p",
        "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_token",
        "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p_token_count",
        "a_b_c_d_e_f_g_h_i_j_k_l_m_n_o_p_max_token",
        "token_count",
        "TokenCount",
        "promptTokenCount",
        "token_type",
        "maxToken",
        "max_api_key",
        "api_key_length",
        "count_token",
    ];
    for key in keys {
        assert_eq!(r.is_secret_key(key), reference(key), "key {key:?}");
    }
}

#[test]
fn deep_values_are_kept_whole_as_text() {
    let mut deep = json!("leaf");
    for _ in 0..(MAX_JSON_DEPTH + 30) {
        deep = json!([deep]);
    }
    let original = deep.clone();
    cap_depth(&mut deep);
    // Walk down to the cap and parse the kept text back.
    let mut v = &deep;
    for _ in 0..MAX_JSON_DEPTH {
        v = &v[0];
    }
    let text = v[NESTED].as_str().expect("capped subtree");
    let rest: Value = serde_json::from_str(text).unwrap();
    let mut o = &original;
    for _ in 0..MAX_JSON_DEPTH {
        o = &o[0];
    }
    assert_eq!(&rest, o);
}

/// `redact_fact` caps a payload only when it nests past the cap, and
/// then exactly as `cap_depth` does: at the boundary and on either side
/// of it, with and without a known secret.
#[test]
fn redact_fact_caps_where_cap_depth_does() {
    let r = Redactor::default();
    for n in [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1] {
        let mut v = json!({"leaf": 1, "token": "t-value-1234"});
        for _ in 0..n {
            v = json!([v, {"a": []}]);
        }
        for secrets in [KnownSecrets::new(), known(&["leaf"])] {
            let mut want = v.clone();
            let mut want_secrets = secrets.clone();
            r.redact_value(&mut want, &mut want_secrets);
            cap_depth(&mut want);
            let mut kind = FactKind::Progress(Progress {
                payload: v.clone(),
                count: 1,
                delivered: false,
            });
            let mut secrets = secrets;
            r.redact_fact(&mut kind, &mut secrets);
            assert_eq!(
                kind,
                FactKind::Progress(Progress {
                    payload: want,
                    count: 1,
                    delivered: false
                }),
                "{n} levels"
            );
            assert_eq!(secrets.len(), want_secrets.len());
        }
    }
}

fn known(values: &[&str]) -> KnownSecrets {
    let mut k = KnownSecrets::new();
    for v in values {
        k.add(Secret::new(*v));
    }
    k
}

/// `text` scrubbed with `values` added in the given order.
fn scrubbed(values: &[&str], text: &str) -> String {
    let mut t = text.to_owned();
    known(values).scrub(&mut t);
    t
}

#[test]
fn secrets_are_scrubbed_everywhere() {
    let r = Redactor::default();
    let mut v = json!({"note": "used ghp_abc123 to call", "list": ["ghp_abc123"], "ghp_abc123": 1});
    r.redact_value(&mut v, &mut known(&["ghp_abc123"]));
    let text = v.to_string();
    assert!(!text.contains("ghp_abc123"), "{text}");
    assert_eq!(v["note"], json!("used [REDACTED] to call"));
    assert_eq!(v[MARKER], json!(1), "the key is scrubbed too");
}

/// Secrets that overlap leave nothing behind, whatever the order they
/// became known in: a prefix, a suffix, one inside another, two that
/// overlap partly.
#[test]
fn overlapping_secrets_leave_nothing_whatever_their_order() {
    let a = "gho_16C7e42F292c6912E7710c83";
    let b = "gho_16C7e42F292c6912E7710c838347Ae178B4abWKZbByNYGnZwPxvmvkh";
    for (values, text, want) in [
        (vec![a, b], format!("using {b}"), "using [REDACTED]"),
        (vec![b, a], format!("using {b}"), "using [REDACTED]"),
        (
            vec![a, b],
            format!("{a} then {b}"),
            "[REDACTED] then [REDACTED]",
        ),
        // Suffix.
        (
            vec!["347Ae178B4abWKZb", "x9347Ae178B4abWKZb"],
            "k=x9347Ae178B4abWKZb.".into(),
            "k=[REDACTED].",
        ),
        // Contained in the middle.
        (
            vec!["MIDDLEPART", "headMIDDLEPARTtail"],
            "<headMIDDLEPARTtail>".into(),
            "<[REDACTED]>",
        ),
        // Partly overlapping: neither contains the other.
        (
            vec!["AAAABBBB", "BBBBCCCC"],
            "xAAAABBBBCCCCx".into(),
            "x[REDACTED]x",
        ),
        // Adjacent, not overlapping: two markers.
        (
            vec!["AAAABBBB", "CCCCDDDD"],
            "AAAABBBBCCCCDDDD".into(),
            "[REDACTED][REDACTED]",
        ),
    ] {
        let mut rev = values.clone();
        rev.reverse();
        assert_eq!(scrubbed(&values, &text), want, "{values:?} in {text:?}");
        assert_eq!(scrubbed(&rev, &text), want, "{rev:?} in {text:?}");
    }
}

/// Short values are scrubbed where they stand as whole tokens, and
/// only there; long ones everywhere.
#[test]
fn short_values_are_scrubbed_as_whole_tokens() {
    for (value, text, want) in [
        ("hzkQx", "bad password hzkQx", "bad password [REDACTED]"),
        ("hzkQx", "hzkQx", "[REDACTED]"),
        ("hzkQx", "(hzkQx)", "([REDACTED])"),
        ("hzkQx", "pw=hzkQx;", "pw=[REDACTED];"),
        ("hzkQx", "pw_hzkQx", "pw_[REDACTED]"),
        ("hzkQx", "hzkQxy", "hzkQxy"),
        ("hzkQx", "ahzkQx", "ahzkQx"),
        ("hzkQx", "é hzkQx", "é [REDACTED]"),
        ("hzkQx", "éhzkQx", "éhzkQx"),
        ("Q", "Q Q-Q QQ", "[REDACTED] [REDACTED]-[REDACTED] QQ"),
        // An edge that is not a letter or digit binds to nothing.
        ("-x", "a-x b", "a[REDACTED] b"),
        ("a\"b", "say a\"b!", "say [REDACTED]!"),
        // Seven characters: still a token; eight: everywhere.
        ("abcdefg", "xabcdefgx", "xabcdefgx"),
        ("abcdefgh", "xabcdefghx", "x[REDACTED]x"),
    ] {
        assert_eq!(scrubbed(&[value], text), want, "{value:?} in {text:?}");
    }
    // A short token inside a longer secret is covered by the longer.
    assert_eq!(
        scrubbed(&["ab", "xxabyyzzqq"], "xxabyyzzqq ab"),
        "[REDACTED] [REDACTED]"
    );
}

/// A value with quotes or backslashes is also scrubbed in the escaped
/// forms a message quoting it (`{:?}`) or JSON text embedding it holds.
#[test]
fn escaped_forms_of_a_secret_are_scrubbed() {
    let secret = "pa\"ss\\wörd\n1";
    let debug = format!("credential {secret:?} refused");
    let json = format!("body {}", json!({ "pw": secret }));
    for text in [debug, json] {
        assert!(!text.contains(secret), "the raw form is not in {text:?}");
        let out = scrubbed(&[secret], &text);
        assert!(
            out.contains(MARKER) && !out.contains("ss"),
            "{text:?} -> {out:?}"
        );
    }
    assert_eq!(
        known(&[secret]).len(),
        1,
        "escaped forms are not values of their own"
    );
}

/// A value under a secret-named key is redacted where it stands and
/// learned, whatever its length or JSON type; numbers are tokens.
#[test]
fn values_under_secret_keys_are_learned_whatever_their_type() {
    let r = Redactor::default();
    let mut secrets = KnownSecrets::new();
    let mut args = json!({
        "password": 73920938,
        "pin_token": "hzkQx",
        "api_key": [7.5, {"parts": ["k1", true, null, ""]}],
        "secret": false,
        "note": "seen hzkQx",
    });
    r.redact_value(&mut args, &mut secrets);
    assert_eq!(
        args,
        json!({"password": MARKER, "pin_token": MARKER, "api_key": MARKER,
               "secret": MARKER, "note": "seen [REDACTED]"}),
    );
    // 73920938, hzkQx, 7.5, k1: not true, null or "".
    assert_eq!(secrets.len(), 4, "{secrets:?}");
    for (text, want) in [
        ("wrong password 73920938", "wrong password [REDACTED]"),
        (
            "id 173920938 is another number",
            "id 173920938 is another number",
        ),
        ("v7.5 or 7.5", "v7.5 or [REDACTED]"),
        ("keys k1,k2", "keys [REDACTED],k2"),
        ("true false null", "true false null"),
    ] {
        let mut t = text.to_owned();
        secrets.scrub(&mut t);
        assert_eq!(t, want, "{text:?}");
    }
    // Echoed as JSON numbers: replaced whole where the text is one.
    let mut echo = json!({"n": 73920938, "other": 173920938, "f": 7.5, "count": 3});
    r.redact_value(&mut echo, &mut secrets);
    assert_eq!(
        echo,
        json!({"n": MARKER, "other": 173920938, "f": MARKER, "count": 3})
    );
}

/// A number is learned only from a secret-named key: inside an object
/// under one, a number under a non-secret key (an expiry, a count) is
/// redacted where it stands but not learned, while strings are (a
/// credential object's `value` holds the secret).
#[test]
fn numbers_are_learned_only_from_secret_named_keys() {
    let r = Redactor::default();
    let mut secrets = KnownSecrets::new();
    let mut v = json!({
        "credentials": {"value": "s3cr3t-v4lue", "expires_in": 3600, "pin_code": [4711],
                        "password": 9183, "extra": {"token": [55]}},
        "token_count": 1200,
        "usage": {"promptTokenCount": 17},
    });
    r.redact_value(&mut v, &mut secrets);
    assert_eq!(
        v,
        json!({"credentials": MARKER, "token_count": 1200, "usage": {"promptTokenCount": 17}})
    );
    // s3cr3t-v4lue, 9183 and 55; not 3600, 4711, 1200 or 17.
    assert_eq!(secrets.len(), 3, "{secrets:?}");
    let mut later = json!({"note": "3600 s, 1200 tokens, pin 4711, 17, 9183, 55",
                           "n": [3600, 1200, 4711, 17, 9183, 55]});
    r.redact_value(&mut later, &mut secrets);
    assert_eq!(
        later,
        json!({"note": "3600 s, 1200 tokens, pin 4711, 17, [REDACTED], [REDACTED]",
               "n": [3600, 1200, 4711, 17, MARKER, MARKER]})
    );
}

/// Every string of a fact is scrubbed and labels under secret-named
/// keys are redacted, learned from the fact itself.
#[test]
fn names_and_labels_are_redacted() {
    let r = Redactor::default();
    let mut secrets = KnownSecrets::new();
    let mut kind = FactKind::RunStarted(RunStarted {
        run_id: "run-s3cr3t".into(),
        session_id: Some("s3cr3t".into()),
        identity: None,
        producer: Producer {
            name: "host".into(),
            version: "1".into(),
        },
        labels: [
            ("api_key".to_owned(), "s3cr3t".to_owned()),
            ("note".to_owned(), "key s3cr3t".to_owned()),
            ("s3cr3t".to_owned(), "as a key".to_owned()),
        ]
        .into(),
        teardown_scopes: vec![],
    });
    r.redact_fact(&mut kind, &mut secrets);
    let FactKind::RunStarted(s) = &kind else {
        unreachable!()
    };
    assert_eq!(s.labels["api_key"], MARKER);
    assert_eq!(s.labels["note"], "key [REDACTED]");
    assert_eq!(s.labels[MARKER], "as a key");
    // The run's ids are the host's and stay as they are.
    assert_eq!(s.run_id, "run-s3cr3t");
    let mut effect = FactKind::Effect(Effect {
        name: "api.s3cr3t".into(),
        request: json!({}),
        outcome: EffectOutcome::Err("s3cr3t".into()),
    });
    r.redact_fact(&mut effect, &mut secrets);
    assert_eq!(
        effect,
        FactKind::Effect(Effect {
            name: "api.[REDACTED]".into(),
            request: json!({}),
            outcome: EffectOutcome::Err(MARKER.into()),
        })
    );
}

/// A tagger under a fixed key (a stand-in for the archive's HMAC: only
/// "same key, same value, same tag" matters here).
fn tagger(key: u8) -> Tagger {
    use sha2::Digest;
    Tagger::new(move |b| {
        sha2::Sha256::new()
            .chain_update([key])
            .chain_update(b)
            .finalize()
            .into()
    })
}

fn keyed_marker_of(v: &Value) -> &str {
    let s = v.as_str().unwrap();
    assert!(s.starts_with(KEYED_MARKER_PREFIX) && s.len() == 27, "{s}");
    s
}

#[test]
fn a_keyed_redactor_tags_the_same_value_alike_and_another_apart() {
    let r = Redactor::default().keyed(tagger(1));
    let mut a = json!({"api_key": "k-123456789", "b": {"api_key": "k-123456789"}, "c": {"token": "other-value"}});
    r.redact_value(&mut a, &mut KnownSecrets::new());
    let (x, y, z) = (&a["api_key"], &a["b"]["api_key"], &a["c"]["token"]);
    assert_eq!(keyed_marker_of(x), keyed_marker_of(y));
    assert_ne!(keyed_marker_of(x), keyed_marker_of(z));
    // Nothing of the value, and another key tags it apart.
    assert!(!a.to_string().contains("k-123456789"));
    let mut b = json!({"api_key": "k-123456789"});
    Redactor::default()
        .keyed(tagger(2))
        .redact_value(&mut b, &mut KnownSecrets::new());
    assert_ne!(keyed_marker_of(&b["api_key"]), x.as_str().unwrap());
    // Unkeyed, the marker stays bare.
    let mut c = json!({"api_key": "k-123456789"});
    Redactor::default().redact_value(&mut c, &mut KnownSecrets::new());
    assert_eq!(c["api_key"], MARKER);
}

#[test]
fn a_learned_value_scrubbed_from_text_is_tagged_as_where_it_was_learned() {
    let r = Redactor::default().keyed(tagger(1));
    let mut known = KnownSecrets::new();
    let mut v = json!({"password": "hunter2-long", "note": "said hunter2-long twice"});
    r.redact_value(&mut v, &mut known);
    let m = keyed_marker_of(&v["password"]).to_owned();
    assert_eq!(v["note"], format!("said {m} twice"));
}

#[test]
fn a_credential_is_marked_by_its_fingerprint_so_a_stand_in_with_it_marks_alike() {
    let fp = Fingerprint("hmac-sha256:00112233445566778899aabbccddeeff".into());
    let recorded = |secret: &str, key: u8| {
        let mut known = KnownSecrets::new();
        known.add_credential(Secret::new(secret), Some(&fp));
        let mut v = json!({"headers": {"authorization": format!("Bearer {secret}")},
                           "url": format!("https://x.test/?k={secret}")});
        Redactor::default()
            .keyed(tagger(key))
            .redact_value(&mut v, &mut known);
        v
    };
    // Recorded with the real secret; replayed with a stand-in carrying
    // the recorded fingerprint, under the same key: the same record.
    let live = recorded("s3cr3t-value-1", 1);
    let replayed = recorded("reel-replay-stand-in:x", 1);
    assert_eq!(live, replayed);
    assert_eq!(live["url"], "https://x.test/?k=[REDACTED:0011223344556677]");
    // The header was hidden whole, keyed with the credential marked.
    let h = keyed_marker_of(&live["headers"]["authorization"]);
    assert_ne!(h, "[REDACTED:0011223344556677]");
    // Without a key, the credential's place is still marked by it.
    let mut known = KnownSecrets::new();
    known.add_credential(Secret::new("s3cr3t-value-1"), Some(&fp));
    let mut t = "k=s3cr3t-value-1".to_owned();
    known.scrub(&mut t);
    assert_eq!(t, "k=[REDACTED:0011223344556677]");
}

#[test]
fn a_marker_is_never_marked_again() {
    let r = Redactor::default().keyed(tagger(1));
    let mut known = KnownSecrets::new();
    known.add(Secret::new("0011223344556677"));
    // A recorded marker handed back (the replay re-drives a tool with
    // the recorded arguments) stays as it was, under a secret key too.
    let mut v =
        json!({"password": "[REDACTED:0011223344556677]", "m": "[REDACTED:0011223344556677]"});
    let before = v.clone();
    r.redact_value(&mut v, &mut known);
    assert_eq!(v, before);
}

#[test]
fn a_webhook_secret_is_known_by_its_prefix_under_any_key() {
    let r = Redactor::default();
    let mut secrets = KnownSecrets::default();
    let mut v = json!({"hook": {"url": "https://x.test/h", "signing": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
        "note": "signed with whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw.", "bare": "whsec_"});
    r.redact_value(&mut v, &mut secrets);
    let text = v.to_string();
    assert!(!text.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "{text}");
    assert_eq!(v["note"], json!("signed with [REDACTED]."));
    assert_eq!(v["bare"], json!("whsec_"), "a prefix alone is no secret");
    // Learned: a later value that quotes it is scrubbed too.
    let mut later = json!(["again: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]);
    r.redact_value(&mut later, &mut secrets);
    assert_eq!(later, json!(["again: [REDACTED]"]));
}

#[test]
fn mcp_secure_arguments_name_secrets() {
    check("secureArguments", true);
    check("secure_arguments", true);
    check("secureInputSchema", false);
}

//! The progress display rule of seed 000, as a table of cases:
//! payload -> the line a person sees.
//!
//! A top-level string `message` is trimmed and shown verbatim, cut at 120
//! characters with the cut stated (`… (+N more)`); anything else shows
//! `` `tool` reported progress (N so far)… ``. Characters are Unicode scalar
//! values (what `str::chars` yields), not bytes: a cut never splits one. A
//! ZWJ emoji sequence such as 👩‍👩‍👧 is five scalar values (three emoji and
//! two joiners), so it counts as five characters and a cut may fall between
//! them (never inside one of them).

use reel_core::display::{progress_line, MESSAGE_LIMIT};
use serde_json::{json, Value};

/// The tool and count every case is reported under.
const TOOL: &str = "walk";
const COUNT: u64 = 3;
const GENERIC: &str = "`walk` reported progress (3 so far)…";

/// The family emoji: 👩 ZWJ 👩 ZWJ 👧, five scalar values, 18 bytes.
const FAMILY: &str = "\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}";

fn check(name: &str, payload: Value, expected: &str) {
    let got = progress_line(TOOL, &payload, COUNT);
    assert_eq!(
        got, expected,
        "case {name:?}: payload {payload} shows {got:?}, expected {expected:?}"
    );
    // Whatever the case, the line is valid text of at most the limit plus
    // the stated cut, counted in characters.
    if let Some((kept, _)) = got.split_once("… (+") {
        assert_eq!(kept.chars().count(), MESSAGE_LIMIT, "case {name:?}");
    }
}

fn msg(m: &str) -> Value {
    json!({ "message": m, "done": 3, "total": 12 })
}

fn a(n: usize) -> String {
    "a".repeat(n)
}

fn cut_line(kept: &str, more: usize) -> String {
    format!("{kept}… (+{more} more)")
}

#[test]
fn the_limit_is_120() {
    assert_eq!(MESSAGE_LIMIT, 120);
}

#[test]
fn top_level_string_messages() {
    let cases: Vec<(&str, Value, String)> = vec![
        ("plain", msg("Hop 3 of 12"), "Hop 3 of 12".into()),
        (
            "trimmed both ends",
            msg("  Hop 3 of 12 \n\t"),
            "Hop 3 of 12".into(),
        ),
        (
            "inner whitespace kept verbatim",
            msg("Hop  3\tof 12"),
            "Hop  3\tof 12".into(),
        ),
        (
            "unicode whitespace trimmed",
            msg("\u{a0}\u{3000}Hop 3\u{2003}"),
            "Hop 3".into(),
        ),
        (
            "the other fields are not read",
            json!({"message": "Hop 3", "done": 3, "total": 12, "hop": "h-17"}),
            "Hop 3".into(),
        ),
        (
            "markup is shown as written",
            msg("<b>Hop</b> `3` {\"x\":1}"),
            "<b>Hop</b> `3` {\"x\":1}".into(),
        ),
        ("a single character", msg("x"), "x".into()),
    ];
    for (name, payload, expected) in cases {
        check(name, payload, &expected);
    }
}

#[test]
fn the_120_character_boundary() {
    let cases: Vec<(&str, Value, String)> = vec![
        ("119 characters", msg(&a(119)), a(119)),
        ("exactly 120: no cut", msg(&a(120)), a(120)),
        ("121: one more", msg(&a(121)), cut_line(&a(120), 1)),
        ("250: 130 more", msg(&a(250)), cut_line(&a(120), 130)),
        (
            "120 after trimming: no cut",
            msg(&format!("   {}   ", a(120))),
            a(120),
        ),
        (
            "121 after trimming: the trailing spaces do not count",
            msg(&format!("  {}      ", a(121))),
            cut_line(&a(120), 1),
        ),
        (
            "inner spaces count",
            msg(&format!("{} {}", a(60), a(60))),
            cut_line(&format!("{} {}", a(60), a(59)), 1),
        ),
    ];
    for (name, payload, expected) in cases {
        check(name, payload, &expected);
    }
}

#[test]
fn characters_not_bytes() {
    let e_acute = "é"; // 2 bytes
    let zhong = "中"; // 3 bytes
    let grin = "😀"; // 4 bytes
    let cases: Vec<(&str, Value, String)> = vec![
        // é: 120 characters are 121+ bytes; still no cut.
        (
            "é as the 120th character",
            msg(&format!("{}{e_acute}", a(119))),
            format!("{}{e_acute}", a(119)),
        ),
        (
            "é as the 121st character",
            msg(&format!("{}{e_acute}", a(120))),
            cut_line(&a(120), 1),
        ),
        (
            "é across the boundary: 120th kept whole, 121st cut",
            msg(&format!("{}{e_acute}{e_acute}", a(119))),
            cut_line(&format!("{}{e_acute}", a(119)), 1),
        ),
        (
            "120 é (240 bytes): no cut",
            msg(&e_acute.repeat(120)),
            e_acute.repeat(120),
        ),
        (
            "121 é",
            msg(&e_acute.repeat(121)),
            cut_line(&e_acute.repeat(120), 1),
        ),
        // 中: 3 bytes each.
        (
            "120 中 (360 bytes): no cut",
            msg(&zhong.repeat(120)),
            zhong.repeat(120),
        ),
        (
            "121 中",
            msg(&zhong.repeat(121)),
            cut_line(&zhong.repeat(120), 1),
        ),
        (
            "中 straddling the byte 120 mark is never split",
            msg(&format!("{}{}", a(119), zhong.repeat(3))),
            cut_line(&format!("{}{zhong}", a(119)), 2),
        ),
        (
            "mixed widths, 200 characters",
            msg(&format!("{}{}", "é中".repeat(50), "😀a".repeat(50))),
            cut_line(&format!("{}{}", "é中".repeat(50), "😀a".repeat(10)), 80),
        ),
        // 4-byte emoji.
        (
            "😀 as the 120th character",
            msg(&format!("{}{grin}", a(119))),
            format!("{}{grin}", a(119)),
        ),
        (
            "😀 across the boundary",
            msg(&format!("{}{grin}{grin}", a(119))),
            cut_line(&format!("{}{grin}", a(119)), 1),
        ),
        // The ZWJ family: five scalar values.
        (
            "family ending exactly at 120",
            msg(&format!("{}{FAMILY}", a(115))),
            format!("{}{FAMILY}", a(115)),
        ),
        (
            "family starting at 120: four of its scalars are cut",
            msg(&format!("{}{FAMILY}", a(119))),
            cut_line(&format!("{}\u{1F469}", a(119)), 4),
        ),
        (
            "family across the boundary: cut between scalars, after the joiner",
            msg(&format!("{}{FAMILY}", a(117))),
            cut_line(&format!("{}\u{1F469}\u{200D}\u{1F469}", a(117)), 2),
        ),
        (
            "24 families are exactly 120 characters",
            msg(&FAMILY.repeat(24)),
            FAMILY.repeat(24),
        ),
        (
            "25 families: five more",
            msg(&FAMILY.repeat(25)),
            cut_line(&FAMILY.repeat(24), 5),
        ),
    ];
    for (name, payload, expected) in cases {
        check(name, payload, &expected);
    }
}

#[test]
fn everything_else_shows_the_generic_line() {
    let cases: Vec<(&str, Value)> = vec![
        ("no message", json!({"done": 3, "total": 12})),
        ("message is a number", json!({"message": 3})),
        ("message is a float", json!({"message": 0.5})),
        ("message is a bool", json!({"message": true})),
        (
            "message is an object",
            json!({"message": {"text": "Hop 3"}}),
        ),
        ("message is an array", json!({"message": ["Hop 3"]})),
        ("message is null", json!({"message": null})),
        ("message is empty", json!({"message": ""})),
        (
            "message is whitespace only",
            json!({"message": " \t\n\u{a0} "}),
        ),
        ("bare string payload", json!("Hop 3 of 12")),
        ("bare number payload", json!(3)),
        ("null payload", Value::Null),
        ("array payload", json!([{"message": "Hop 3"}])),
        ("empty object", json!({})),
        ("nested message", json!({"data": {"message": "Hop 3"}})),
        ("message under another case", json!({"Message": "Hop 3"})),
        (
            "MCP progress without a message",
            json!({"progress": 0.5, "total": 1.0}),
        ),
    ];
    for (name, payload) in cases {
        check(name, payload, GENERIC);
    }
}

#[test]
fn the_generic_line_names_the_tool_and_the_count() {
    let payload = json!({"done": 1});
    assert_eq!(
        progress_line("fetch", &payload, 1),
        "`fetch` reported progress (1 so far)…"
    );
    assert_eq!(
        progress_line("deploy.v2", &payload, 1_000_000),
        "`deploy.v2` reported progress (1000000 so far)…"
    );
    // The payload is never pretty-printed into the sentence.
    let line = progress_line("walk", &json!({"secret_plan": [1, 2, 3]}), 7);
    assert!(!line.contains("secret_plan"), "{line}");
}

/// Recorded strings never put a control character on the terminal.
#[test]
fn control_characters_are_shown_escaped() {
    use reel_viewer::render::terminal::escape;
    for (raw, shown) in [
        ("plain", "plain"),
        ("two\nlines", "two\\u{a}lines"),
        ("tab\there", "tab\\u{9}here"),
        (
            "\u{1b}[2J\u{1b}[Hfake prompt$ ",
            "\\u{1b}[2J\\u{1b}[Hfake prompt$ ",
        ),
        ("bell\u{7}", "bell\\u{7}"),
        ("é中😀", "é中😀"),
    ] {
        assert_eq!(escape(raw), shown, "{raw:?}");
    }
}

//! What an operator sees is what was recorded: a run whose id, tenant,
//! tool and payloads hold ESC sequences, C1 controls and a right-to-left
//! override is shown in the console with each of them escaped as the CLI
//! shows it (`\u{1b}`, `\u{9b}`, `\u{202e}`), in every view and in the page
//! title, in Debian's chromium. Before, 91 text nodes on 5 pages held them
//! raw: U+202E reversed what an operator read, and a raw ESC survived a copy
//! into a terminal.

use crate::console::*;

use serde_json::{json, Value};

/// Every text node of the page (and its title) holding a control other
/// than a line feed or a tab, or a bidi mark.
const RAW: &str = r#"
    var raw = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/;
    var found = [];
    var walk = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_TEXT);
    while (walk.nextNode()) {
        if (raw.test(walk.currentNode.data)) found.push(walk.currentNode.data);
    }
    if (raw.test(document.title)) found.push('title: ' + document.title);
    document.querySelectorAll('input, textarea, option').forEach(function (e) {
        if (raw.test(e.value)) found.push('value: ' + e.value);
    });
    return found;
"#;

fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controls_and_bidi_marks_are_shown_escaped_in_every_view() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    demo(&dir);
    controls_run(&dir);
    let served = serve(&dir);
    let driver = driver();
    let c = browser(&driver).await;
    let base = served.base.clone();
    let run = percent(CONTROLS_RUN);
    let pages = [
        format!("{base}/"),
        format!("{base}/?q=gpj"),
        format!("{base}/tools"),
        format!("{base}/runs/{run}"),
        format!("{base}/runs/{run}#seq-2"),
        format!("{base}/compare?a={run}&b=demo-deploy-failed"),
    ];
    for url in &pages {
        open(&c, url).await;
        no_alert(&c).await;
        let raw: Vec<Value> = serde_json::from_value(js(&c, RAW).await).unwrap();
        assert!(raw.is_empty(), "{url}: shown raw: {raw:?}");
        let text = js(&c, "return document.documentElement.textContent").await;
        let text = text.as_str().unwrap();
        assert!(
            text.contains(r"\u{202e}") && text.contains(r"\u{1b}"),
            "{url}: the marks are not shown escaped"
        );
    }
    // The run page's title names the run, escaped.
    open(&c, &pages[3]).await;
    let title = js(&c, "return document.title").await;
    assert!(
        title
            .as_str()
            .unwrap()
            .contains(r"ctl-\u{1b}[31m-\u{202e}-run"),
        "{title}"
    );
    // The inspector's raw JSON of a fact too.
    let raw = js(
        &c,
        "var d = document.querySelector('#seq-2 pre.raw'); return d && d.textContent",
    )
    .await;
    assert_ne!(raw, json!(null), "no inspector for #seq-2");
    assert!(raw.as_str().unwrap().contains(r"\u{202e}"), "{raw}");
    c.close().await.unwrap();
}

//! The console's layout in Debian's chromium at 1,280 and 800 px wide:
//! the runs table fits its card (every shown header cell's right edge is
//! within the card's, the table does not scroll), no card overflows, no
//! page scrolls sideways, and a timestamp is one line. The pages are
//! saved as screenshots under the target directory
//! (`target/tmp/console-layout/`) for people to look at; they are not
//! compared.

use crate::console::*;

use fantoccini::Client;
use serde_json::Value;

/// What is out of place on the open page, each as a sentence.
const MEASURE: &str = r#"
    var out = [];
    var vw = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth > vw) {
        out.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + vw);
    }
    document.querySelectorAll('.panel, header').forEach(function (card) {
        if (card.scrollWidth > card.clientWidth + 1) {
            out.push((card.id || card.tagName) + ' overflows: ' + card.scrollWidth + ' > ' + card.clientWidth);
        }
    });
    document.querySelectorAll('#runs, #tools').forEach(function (card) {
        var edge = card.getBoundingClientRect().right;
        var shown = 0;
        card.querySelectorAll('table.runs th').forEach(function (th) {
            if (th.offsetParent === null) return;
            shown++;
            var right = th.getBoundingClientRect().right;
            if (right > edge + 0.5) out.push('column ' + th.textContent + ' ends at ' + right + ', the card at ' + edge);
        });
        if (shown < 6) out.push(card.id + ': only ' + shown + ' columns shown');
        var wrap = card.querySelector('.table-wrap');
        if (wrap && wrap.scrollWidth > wrap.clientWidth + 1) {
            out.push('the table scrolls: ' + wrap.scrollWidth + ' > ' + wrap.clientWidth);
        }
        card.querySelectorAll('td.nowrap, td.num').forEach(function (v) {
            if (v.offsetParent === null) return;
            var range = document.createRange();
            range.selectNodeContents(v);
            var tall = range.getBoundingClientRect().height;
            if (tall > 24) out.push('the value ' + v.textContent + ' wraps (' + tall + ' px tall)');
        });
    });
    return out;
"#;

async fn measure(c: &Client) -> Vec<String> {
    let found: Value = js(c, MEASURE).await;
    serde_json::from_value(found).unwrap()
}

/// Runs with long values: a UUID-like id, a long tenant and tool name.
fn long_values(dir: &std::path::Path) {
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    record_runs(
        dir,
        &[RunShape {
            id: "0f9d6c7e-4b1a-4e52-9a3e-7c1d2b8f6a90".into(),
            tenant: Some("customer-success-emea-enterprise-tier".into()),
            principal: Some("operator@example.com".into()),
            session: Some("session-2f6b9c1d4e8a7f3b".into()),
            at,
            tool: "summarise_the_incident_report_for_the_on_call_engineer".into(),
            error: Some("timed out".into()),
            ..RunShape::default()
        }],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_table_fits_its_card_at_1280_and_800_px() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("archive");
    demo(&dir);
    hostile_run(&dir);
    controls_run(&dir);
    long_values(&dir);
    let served = serve(&dir);
    let driver = driver();
    let c = browser(&driver).await;
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-layout");
    std::fs::create_dir_all(&shots).unwrap();
    let mut failed = Vec::new();
    for width in [1280u32, 800] {
        c.set_window_size(width, 1000).await.unwrap();
        for (name, path) in [
            ("runs", "/"),
            ("runs-failed", "/?status=failed"),
            ("tools", "/tools"),
            ("run", "/runs/demo-search"),
        ] {
            open(&c, &format!("{}{path}", served.base)).await;
            let vw = js(&c, "return document.documentElement.clientWidth").await;
            assert!(
                vw.as_u64()
                    .is_some_and(|w| w + 40 >= width as u64 && w <= width as u64),
                "the window is {vw} px wide, not about {width}"
            );
            for problem in measure(&c).await {
                failed.push(format!("{path} at {width} px: {problem}"));
            }
            let png = c.screenshot().await.unwrap();
            std::fs::write(shots.join(format!("{name}-{width}.png")), png).unwrap();
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    c.close().await.unwrap();
}

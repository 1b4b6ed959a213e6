//! How a fact reads to a person, where every reader must agree: seed 000's
//! progress display rule ([`progress_line`]). The viewer's templates
//! override its wording; the OTLP export names spans with it.

use serde_json::Value;

/// The most characters of a progress `message` shown before the cut.
pub const MESSAGE_LIMIT: usize = 120;

/// The status line for a progress report (seed 000's display rule), in the
/// default wording: `reel_viewer::display::ProgressTemplates::line` of the default templates.
///
/// A top-level string `message` is shown verbatim, trimmed, cut at 120
/// characters with the cut stated (`… (+N more)`). Anything else (no
/// `message`, a non-string one, an empty one, a bare string payload) shows
/// the generic line `` `tool` reported progress (N so far)… ``. The payload is
/// never pretty-printed into the sentence. Characters, not bytes, are
/// counted, and a cut never splits a character.
///
/// ```
/// use reel_core::display::progress_line;
/// use serde_json::json;
///
/// assert_eq!(progress_line("walk", &json!({"message": "  Hop 3 of 12  "}), 3), "Hop 3 of 12");
/// assert_eq!(progress_line("walk", &json!({"done": 3}), 3), "`walk` reported progress (3 so far)…");
/// ```
pub fn progress_line(tool: &str, payload: &Value, count: u64) -> String {
    match shown_message(payload) {
        Some(m) => m,
        None => generic_line(tool, count),
    }
}

/// The message a person reads: a top-level string `message`, trimmed, not
/// empty, cut at [`MESSAGE_LIMIT`].
pub fn shown_message(payload: &Value) -> Option<String> {
    payload
        .as_object()
        .and_then(|m| m.get("message"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| cut(m, MESSAGE_LIMIT))
}

/// The generic line: `` `tool` reported progress (N so far)… ``.
pub fn generic_line(tool: &str, count: u64) -> String {
    format!("`{tool}` reported progress ({count} so far)…")
}

/// Cuts `text` to `limit` characters, stating how many were cut.
pub fn cut(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_owned(),
        Some((byte, _)) => {
            let more = text[byte..].chars().count();
            format!("{}… (+{more} more)", &text[..byte])
        }
    }
}

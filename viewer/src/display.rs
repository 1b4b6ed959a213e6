//! How facts read to a person.
//!
//! The progress line follows seed 000's display rule
//! ([`progress_line`](reel_core::display::progress_line));
//! its wording can be overridden by template key ([`ProgressTemplates`]):
//! "Consumers override the wording by template key (tool.progress,
//! tool.progress.generic, or per tool)".

use std::collections::BTreeMap;

use serde_json::Value;

use crate::render::terminal::needs_escape;

// The display rule itself (the default line, the message cut) is the
// core's (`reel_core::display`), so every reader of facts (this viewer, the
// OTLP export) shows a report the same way.
use reel_core::display::{generic_line, shown_message};

/// The key of the line shown when a report has a usable `message`.
pub const KEY_MESSAGE: &str = "tool.progress";
/// The key of the line shown otherwise (the generic line).
pub const KEY_GENERIC: &str = "tool.progress.generic";

/// The wording of progress lines, by template key (seed 000: "Consumers
/// override the wording by template key (tool.progress,
/// tool.progress.generic, or per tool)").
///
/// | key | the line shown | default |
/// |---|---|---|
/// | `tool.progress` | when the payload has a usable `message` | `{message}` |
/// | `tool.progress.generic` | otherwise | `` `{tool}` reported progress ({count} so far)… `` |
/// | `tool.progress.<tool>` | `tool.progress`, for that tool only | |
/// | `tool.progress.generic.<tool>` | `tool.progress.generic`, for that tool only | |
///
/// A tool's own key wins over the general one, which wins over the
/// default. The placeholders are `{tool}` (the tool's name), `{count}` (the
/// reports of the call so far, this one included) and `{message}` (the
/// message, trimmed and cut at [`MESSAGE_LIMIT`](reel_core::display::MESSAGE_LIMIT) characters as always);
/// `{{` and `}}` are literal braces. `{message}` exists only in the
/// message lines: a generic line is shown precisely when there is none.
/// `tool.progress.generic` always names the generic line, so a tool named
/// `generic` (or `generic.…`) can have its own generic line but not its
/// own message line.
///
/// Everything is checked when a template is set ([`TemplateError`] names
/// the key and what is wrong): an unknown key or placeholder, a `{{` left
/// open, a lone `}`, and control characters (a progress line is one line
/// of plain text; the tool name and message, which are recorded data, are
/// escaped by each renderer as before).
///
/// ```
/// use reel_viewer::display::ProgressTemplates;
/// use serde_json::json;
///
/// let t = ProgressTemplates::default()
///     .with("tool.progress", "{tool}: {message}")?
///     .with("tool.progress.generic.walk", "walking… ({count} hops)")?;
/// assert_eq!(t.line("walk", &json!({"message": " Hop 3 "}), 3), "walk: Hop 3");
/// assert_eq!(t.line("walk", &json!({"done": 3}), 3), "walking… (3 hops)");
/// // No template for another tool's generic line: the default.
/// assert_eq!(t.line("fetch", &json!({}), 1), "`fetch` reported progress (1 so far)…");
///
/// let err = ProgressTemplates::default().with("tool.progress", "{msg}").unwrap_err();
/// assert!(err.to_string().contains("tool.progress"));
/// assert!(err.to_string().contains("{msg}"));
/// # Ok::<(), reel_viewer::display::TemplateError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgressTemplates {
    message: Option<Template>,
    generic: Option<Template>,
    message_by_tool: BTreeMap<String, Template>,
    generic_by_tool: BTreeMap<String, Template>,
}

/// A template refused when it was set: each message names the key, says
/// what is wrong and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The key is none of the template keys.
    #[error("unknown template key {key:?}: the keys are tool.progress, tool.progress.generic, tool.progress.<tool> and tool.progress.generic.<tool>")]
    UnknownKey {
        /// The key given.
        key: String,
    },
    /// A placeholder the template's line does not have.
    #[error("template {key}: unknown placeholder {{{placeholder}}}; the placeholders are {}{}; write {{{{ and }}}} for literal braces", .allowed.join(", "), if .allowed.len() < 3 { " (there is no message in a generic line)" } else { "" })]
    UnknownPlaceholder {
        /// The template's key.
        key: String,
        /// The name between the braces.
        placeholder: String,
        /// The placeholders the key's line has.
        allowed: Vec<&'static str>,
    },
    /// A `{` with no `}` after it.
    #[error("template {key}: a {{ is never closed; close the placeholder ({{tool}}, {{count}}, {{message}}) or write {{{{ for a literal brace")]
    Unclosed {
        /// The template's key.
        key: String,
    },
    /// A `}` that closes nothing.
    #[error("template {key}: a }} closes nothing; write }}}} for a literal brace")]
    StrayBrace {
        /// The template's key.
        key: String,
    },
    /// A control character (newline, escape, ...) in the template.
    #[error("template {key}: contains the control character U+{:04X}; a progress line is one line of plain text", u32::from(*.character))]
    ControlCharacter {
        /// The template's key.
        key: String,
        /// The character.
        character: char,
    },
    /// A templates document that is not a JSON object of strings.
    #[error("not a JSON object of template key to text ({detail}); for example {{\"tool.progress\": \"{{tool}}: {{message}}\"}}")]
    NotAnObject {
        /// What the JSON parser said.
        detail: String,
    },
}

/// Which line a key sets, for whom.
enum Slot {
    Message(Option<String>),
    Generic(Option<String>),
}

impl Slot {
    fn of(key: &str) -> Result<Slot, TemplateError> {
        let unknown = || TemplateError::UnknownKey { key: key.into() };
        let tool = |rest: &str| match rest {
            "" => Err(unknown()),
            t => Ok(Some(t.to_owned())),
        };
        if key == KEY_MESSAGE {
            Ok(Slot::Message(None))
        } else if key == KEY_GENERIC {
            Ok(Slot::Generic(None))
        } else if let Some(rest) = key.strip_prefix("tool.progress.generic.") {
            tool(rest).map(Slot::Generic)
        } else if let Some(rest) = key.strip_prefix("tool.progress.") {
            tool(rest).map(Slot::Message)
        } else {
            Err(unknown())
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Tool,
    Count,
    Message,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Template(Vec<Part>);

/// Whether a template may say `{message}` (a message template may, a
/// generic one has no message to show).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MessagePlaceholder {
    Allowed,
    Refused,
}

impl Template {
    fn parse(
        key: &str,
        text: &str,
        message: MessagePlaceholder,
    ) -> Result<Template, TemplateError> {
        if let Some(character) = text.chars().find(|&c| needs_escape(c)) {
            return Err(TemplateError::ControlCharacter {
                key: key.into(),
                character,
            });
        }
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => return Err(TemplateError::StrayBrace { key: key.into() }),
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => name.push(c),
                            None => return Err(TemplateError::Unclosed { key: key.into() }),
                        }
                    }
                    let part = match name.as_str() {
                        "tool" => Part::Tool,
                        "count" => Part::Count,
                        "message" if message == MessagePlaceholder::Allowed => Part::Message,
                        _ => {
                            let mut allowed = vec!["{tool}", "{count}"];
                            if message == MessagePlaceholder::Allowed {
                                allowed.push("{message}");
                            }
                            return Err(TemplateError::UnknownPlaceholder {
                                key: key.into(),
                                placeholder: name,
                                allowed,
                            });
                        }
                    };
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(part);
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Template(parts))
    }

    fn render(&self, tool: &str, count: u64, message: &str) -> String {
        let mut out = String::new();
        for part in &self.0 {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Tool => out.push_str(tool),
                Part::Count => out.push_str(&count.to_string()),
                Part::Message => out.push_str(message),
            }
        }
        out
    }
}

impl ProgressTemplates {
    /// Sets the template of `key` (see the table above), replacing an
    /// earlier one of the same key.
    pub fn set(&mut self, key: &str, text: &str) -> Result<(), TemplateError> {
        match Slot::of(key)? {
            Slot::Message(tool) => {
                let t = Template::parse(key, text, MessagePlaceholder::Allowed)?;
                match tool {
                    None => self.message = Some(t),
                    Some(tool) => {
                        self.message_by_tool.insert(tool, t);
                    }
                }
            }
            Slot::Generic(tool) => {
                let t = Template::parse(key, text, MessagePlaceholder::Refused)?;
                match tool {
                    None => self.generic = Some(t),
                    Some(tool) => {
                        self.generic_by_tool.insert(tool, t);
                    }
                }
            }
        }
        Ok(())
    }

    /// [`ProgressTemplates::set`], by value.
    pub fn with(mut self, key: &str, text: &str) -> Result<ProgressTemplates, TemplateError> {
        self.set(key, text)?;
        Ok(self)
    }

    /// Sets every template of a JSON object of key → text, e.g.
    /// `{"tool.progress": "{tool}: {message}"}`.
    pub fn set_json(&mut self, json: &str) -> Result<(), TemplateError> {
        let map: BTreeMap<String, String> =
            serde_json::from_str(json).map_err(|e| TemplateError::NotAnObject {
                detail: e.to_string(),
            })?;
        for (key, text) in &map {
            self.set(key, text)?;
        }
        Ok(())
    }

    /// True when no template is set (every line is the default).
    pub fn is_default(&self) -> bool {
        *self == ProgressTemplates::default()
    }

    /// The status line for a progress report:
    /// [`progress_line`](reel_core::display::progress_line)'s rule,
    /// in these templates' wording.
    pub fn line(&self, tool: &str, payload: &Value, count: u64) -> String {
        match shown_message(payload) {
            Some(message) => match self.message_by_tool.get(tool).or(self.message.as_ref()) {
                Some(t) => t.render(tool, count, &message),
                None => message,
            },
            None => match self.generic_by_tool.get(tool).or(self.generic.as_ref()) {
                Some(t) => t.render(tool, count, ""),
                None => generic_line(tool, count),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_core::display::progress_line;
    use serde_json::json;

    fn line(t: &ProgressTemplates, tool: &str, payload: Value) -> String {
        t.line(tool, &payload, 3)
    }

    #[test]
    fn the_default_templates_are_the_seed_rule() {
        let t = ProgressTemplates::default();
        assert!(t.is_default());
        for payload in [
            json!({"message": "  Hop 3 of 12  "}),
            json!({"done": 3}),
            json!("bare"),
            json!({"message": ""}),
            json!({"message": "x".repeat(130)}),
        ] {
            assert_eq!(
                t.line("walk", &payload, 3),
                progress_line("walk", &payload, 3)
            );
        }
    }

    #[test]
    fn a_tools_own_key_wins_over_the_general_one_and_that_over_the_default() {
        let t = ProgressTemplates::default()
            .with("tool.progress", "[{tool}] {message}")
            .unwrap()
            .with("tool.progress.walk", "walk says: {message} (#{count})")
            .unwrap()
            .with("tool.progress.generic", "{tool} is busy ({count})")
            .unwrap()
            .with("tool.progress.generic.fetch", "fetching…")
            .unwrap();
        let msg = json!({"message": " Hop 3 "});
        let none = json!({"done": 3});
        assert_eq!(line(&t, "walk", msg.clone()), "walk says: Hop 3 (#3)");
        assert_eq!(line(&t, "deploy", msg.clone()), "[deploy] Hop 3");
        assert_eq!(line(&t, "walk", none.clone()), "walk is busy (3)");
        assert_eq!(line(&t, "fetch", none.clone()), "fetching…");
        assert_eq!(line(&t, "fetch", msg), "[fetch] Hop 3");
    }

    #[test]
    fn the_message_in_a_template_is_trimmed_and_cut_as_always() {
        let t = ProgressTemplates::default()
            .with("tool.progress", "> {message} <")
            .unwrap();
        let long = format!("  {}  ", "a".repeat(125));
        assert_eq!(
            line(&t, "walk", json!({ "message": long })),
            format!("> {}… (+5 more) <", "a".repeat(120))
        );
    }

    #[test]
    fn braces_double_for_literals() {
        let t = ProgressTemplates::default()
            .with("tool.progress.generic", "{{{tool}}} {{count}}={count}")
            .unwrap();
        assert_eq!(line(&t, "walk", json!({})), "{walk} {count}=3");
    }

    #[test]
    fn bad_templates_are_refused_naming_the_key_and_the_problem() {
        let refused = |key: &str, text: &str| {
            ProgressTemplates::default()
                .with(key, text)
                .unwrap_err()
                .to_string()
        };
        let e = refused("tool.progress", "{tool}: {msg}");
        assert!(
            e.contains("template tool.progress:") && e.contains("{msg}"),
            "{e}"
        );
        assert!(e.contains("{tool}, {count}, {message}"), "{e}");
        let e = refused("tool.progress.generic.walk", "{message}");
        assert!(
            e.contains("tool.progress.generic.walk") && e.contains("no message in a generic line"),
            "{e}"
        );
        assert!(refused("tool.progress", "{tool").contains("never closed"));
        assert!(refused("tool.progress", "a } b").contains("closes nothing"));
        let e = refused("tool.progress", "line\nbreak");
        assert!(e.contains("U+000A"), "{e}");
        assert!(refused("tool.progress", "\u{1b}[31m{message}").contains("U+001B"));
        for key in [
            "tool.progres",
            "tool.progress.",
            "tool.progress.generic.",
            "progress",
        ] {
            let e = refused(key, "x");
            assert!(e.contains("unknown template key"), "{key}: {e}");
            assert!(e.contains(&format!("{key:?}")), "{key}: {e}");
        }
    }

    #[test]
    fn a_json_document_sets_every_key_or_says_what_it_should_be() {
        let mut t = ProgressTemplates::default();
        t.set_json(
            r#"{"tool.progress": "{tool}: {message}", "tool.progress.generic": "{tool} …"}"#,
        )
        .unwrap();
        assert_eq!(line(&t, "walk", json!({"message": "m"})), "walk: m");
        assert_eq!(line(&t, "walk", json!(1)), "walk …");
        let e = t.set_json(r#"["tool.progress"]"#).unwrap_err().to_string();
        assert!(e.contains("not a JSON object"), "{e}");
        let e = t
            .set_json(r#"{"tool.progress": "{nope}"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("{nope}"), "{e}");
    }
}

//! Strict matching of a `tools/call` against the recorded calls: tool
//! name plus arguments, with the replayer's ignore rules by JSON pointer.

use reel::matching::{show, IgnoreRule};
use serde_json::Value;

use super::session::Interaction;

/// Parses an ignore rule as the replayer writes them: `KIND:POINTER` (the
/// rule holds for facts of that kind), `POINTER` (for every kind) or
/// `KIND` (that kind's facts are not compared at all, e.g. `log`). The
/// pointer is into the fact's data: a call's arguments are under `/args`
/// of `call.started`, its result under `/outcome/result` of `call.ended`.
pub fn parse_ignore(text: &str) -> Result<IgnoreRule, String> {
    let (kind, pointer) = match text.split_once(':') {
        Some((kind, pointer)) if !kind.starts_with('/') => (Some(kind.to_owned()), pointer),
        None if !text.is_empty() && !text.starts_with('/') => (Some(text.to_owned()), ""),
        _ => (None, text),
    };
    if pointer.is_empty() && kind.as_deref().is_some_and(|k| !k.is_empty()) {
        // A kind alone (`log`, `log:`): its facts are not compared.
        let known = reel::fact::FactKind::KNOWN;
        if !kind.as_deref().is_some_and(|k| known.contains(&k)) {
            return Err(format!(
                "ignore rule {text:?}: neither a fact kind ({}) nor a JSON pointer, which starts with `/` \
                 (e.g. `/args/request_id`, `call.ended:/outcome/result/_meta`)",
                known.join(", ")
            ));
        }
        return Ok(IgnoreRule {
            kind,
            pointer: String::new(),
        });
    }
    if !pointer.starts_with('/') {
        return Err(format!(
            "ignore rule {text:?}: a JSON pointer starts with `/` (e.g. `/args/request_id`, `call.ended:/outcome/result/_meta`)"
        ));
    }
    Ok(IgnoreRule {
        kind,
        pointer: pointer.to_owned(),
    })
}

/// One field that differs: where (a JSON pointer into the arguments), what
/// the record has and what came.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgDiff {
    /// JSON pointer into the arguments (`""`: the whole object).
    pub pointer: String,
    /// The recorded value (`None`: absent in the record).
    pub expected: Option<Value>,
    /// The request's value (`None`: absent in the request).
    pub got: Option<Value>,
}

impl std::fmt::Display for ArgDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(
            f,
            "{at}: expected {}, got {}",
            show(&self.expected),
            show(&self.got)
        )
    }
}

fn escape_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The argument pointers ignored: rules for `call.started` (or every kind)
/// under `/args`, made relative to the arguments.
pub fn arg_ignores(rules: &[IgnoreRule]) -> Vec<String> {
    rules
        .iter()
        .filter(|r| r.kind.as_deref().is_none_or(|k| k == "call.started"))
        .filter_map(|r| r.pointer.strip_prefix("/args").map(str::to_owned))
        .filter(|p| p.is_empty() || p.starts_with('/'))
        .collect()
}

/// Every differing field of two argument objects, in a stable order
/// (recorded keys first, then keys only the request has), skipping ignored
/// pointers.
pub fn diff_args(expected: &Value, got: &Value, ignored: &[String]) -> Vec<ArgDiff> {
    let mut out = Vec::new();
    walk("", Some(expected), Some(got), ignored, &mut out);
    out
}

fn walk(
    at: &str,
    e: Option<&Value>,
    g: Option<&Value>,
    ignored: &[String],
    out: &mut Vec<ArgDiff>,
) {
    if ignored.iter().any(|p| p == at) {
        return;
    }
    match (e, g) {
        (Some(Value::Object(em)), Some(Value::Object(gm))) => {
            for (k, ev) in em {
                walk(
                    &format!("{at}/{}", escape_token(k)),
                    Some(ev),
                    gm.get(k),
                    ignored,
                    out,
                );
            }
            for (k, gv) in gm {
                if !em.contains_key(k) {
                    walk(
                        &format!("{at}/{}", escape_token(k)),
                        None,
                        Some(gv),
                        ignored,
                        out,
                    );
                }
            }
        }
        (Some(Value::Array(ea)), Some(Value::Array(ga))) if ea.len() == ga.len() => {
            for (i, (ev, gv)) in ea.iter().zip(ga).enumerate() {
                walk(&format!("{at}/{i}"), Some(ev), Some(gv), ignored, out);
            }
        }
        (e, g) if e == g => {}
        (e, g) => out.push(ArgDiff {
            pointer: at.to_owned(),
            expected: e.cloned(),
            got: g.cloned(),
        }),
    }
}

/// What matching a request against the record found.
#[derive(Debug, Clone, PartialEq)]
pub enum Match {
    /// The recorded call at this index answers it.
    Hit(usize),
    /// Nothing answers it: the message names the closest recorded call and
    /// the first field that differs.
    Miss {
        /// The closest recorded call's index, when there is any call.
        closest: Option<usize>,
        /// The first differing field against it (`None` when it is another
        /// tool, or an identical call already answered).
        first: Option<ArgDiff>,
        /// One readable line.
        message: String,
    },
}

/// Whether `value` holds a redacted string (the record's marker, bare or
/// keyed) anywhere.
pub fn holds_redacted(value: &Value) -> bool {
    reel::marker::holds_marker(value)
}

/// Matches `tool` with `args` against `calls`, skipping those already
/// answered (`used`). Among identical recorded calls the first unanswered
/// one in recorded order answers; there is no first-in, first-out guess
/// across different arguments.
pub fn find(
    calls: &[Interaction],
    used: &[bool],
    tool: &str,
    args: &Value,
    ignored: &[String],
) -> Match {
    let mut best: Option<(usize, Vec<ArgDiff>)> = None;
    let mut exhausted: Option<usize> = None;
    for (i, call) in calls.iter().enumerate() {
        if call.tool != tool {
            continue;
        }
        let diffs = diff_args(&call.args, args, ignored);
        if diffs.is_empty() {
            if !used[i] {
                return Match::Hit(i);
            }
            exhausted.get_or_insert(i);
            continue;
        }
        if best.as_ref().is_none_or(|(_, b)| diffs.len() < b.len()) {
            best = Some((i, diffs));
        }
    }
    if let Some(i) = exhausted {
        let n = calls
            .iter()
            .filter(|c| c.tool == tool && diff_args(&c.args, args, ignored).is_empty())
            .count();
        return Match::Miss {
            closest: Some(i),
            first: None,
            message: format!(
                "reel mock: no recorded call left for `{tool}` {args}: the record has {n} such call{} (first: call {}), all already answered",
                if n == 1 { "" } else { "s" },
                calls[i].call_id
            ),
        };
    }
    if let Some((i, diffs)) = best {
        let first = diffs[0].clone();
        // A recorded value that was redacted never equals the real one:
        // the mock says so, and how to match it anyway.
        let redacted = match first.expected.as_ref().is_some_and(holds_redacted) {
            true => format!(
                "; the recorded value was redacted ({}): --ignore call.started:/args{} matches any",
                reel::marker::MARKER,
                first.pointer
            ),
            false => String::new(),
        };
        return Match::Miss {
            closest: Some(i),
            message: format!(
                "reel mock: no recorded call matches `{tool}` {args}: closest is call {} `{}` ({}), first difference {first}{redacted}",
                calls[i].call_id,
                calls[i].tool,
                if diffs.len() == 1 { "1 field differs".to_string() } else { format!("{} fields differ", diffs.len()) },
            ),
            first: Some(first),
        };
    }
    let nearest = calls
        .iter()
        .enumerate()
        .min_by_key(|(_, c)| strsim::levenshtein(&c.tool, tool));
    match nearest {
        Some((i, c)) => Match::Miss {
            closest: Some(i),
            first: None,
            message: format!(
                "reel mock: the record has no call of `{tool}`: nearest recorded tool is `{}` (call {})",
                c.tool, c.call_id
            ),
        },
        None => Match::Miss {
            closest: None,
            first: None,
            message: format!("reel mock: the record has no tool calls (asked for `{tool}`)"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, tool: &str, args: Value) -> Interaction {
        Interaction {
            call_id: id.into(),
            tool: tool.into(),
            args,
            events: vec![],
            event_seqs: vec![],
            outcome: None,
            ended_seq: None,
            task: Vec::new(),
        }
    }

    #[test]
    fn a_changed_argument_names_the_closest_call_and_the_pointer() {
        let calls = [
            call("c1", "add", json!({"a": 1, "b": 9, "c": 9})),
            call("c2", "add", json!({"a": 2, "b": 3, "c": 0})),
        ];
        let m = find(
            &calls,
            &[false, false],
            "add",
            &json!({"a": 2, "b": 4, "c": 0}),
            &[],
        );
        let Match::Miss {
            closest,
            first,
            message,
        } = m
        else {
            panic!("{m:?}")
        };
        assert_eq!(closest, Some(1));
        assert_eq!(first.unwrap().pointer, "/b");
        assert!(message.contains("closest is call c2 `add`"), "{message}");
        assert!(message.contains("/b: expected 3, got 4"), "{message}");
    }

    #[test]
    fn identical_calls_answer_in_recorded_order_then_miss() {
        let calls = [call("c1", "next", json!({})), call("c2", "next", json!({}))];
        assert_eq!(
            find(&calls, &[false, false], "next", &json!({}), &[]),
            Match::Hit(0)
        );
        assert_eq!(
            find(&calls, &[true, false], "next", &json!({}), &[]),
            Match::Hit(1)
        );
        let Match::Miss { message, .. } = find(&calls, &[true, true], "next", &json!({}), &[])
        else {
            panic!()
        };
        assert!(message.contains("all already answered"), "{message}");
    }

    #[test]
    fn ignored_pointers_and_nearest_names() {
        let calls = [call("c1", "search", json!({"q": "x", "nonce": 1}))];
        let rules = [parse_ignore("call.started:/args/nonce").unwrap()];
        let ignored = arg_ignores(&rules);
        assert_eq!(ignored, vec!["/nonce".to_string()]);
        assert_eq!(
            find(
                &calls,
                &[false],
                "search",
                &json!({"q": "x", "nonce": 7}),
                &ignored
            ),
            Match::Hit(0)
        );
        let Match::Miss { message, .. } = find(&calls, &[false], "serch", &json!({}), &ignored)
        else {
            panic!()
        };
        assert!(
            message.contains("nearest recorded tool is `search`"),
            "{message}"
        );
        assert!(parse_ignore("nonce").is_err());
        let whole = parse_ignore("log").unwrap();
        assert_eq!(
            (whole.kind.as_deref(), whole.pointer.as_str()),
            (Some("log"), "")
        );
        assert_eq!(parse_ignore("log:").unwrap(), whole);
    }
}

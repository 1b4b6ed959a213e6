//! A model (inference) span as a `model.called` fact: the current GenAI
//! names first, then the older ones, Vercel's and OpenInference's.

use reel::fact::ModelCalled;
use serde_json::{json, Value};

use super::{error_of, first, first_str, first_u64, json_text};
use crate::decode::SpanIn;

pub(super) fn model_called(span: &SpanIn) -> ModelCalled {
    let finish_reasons = match first(
        span,
        &["gen_ai.response.finish_reasons", "ai.response.finishReason"],
    ) {
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    };
    let messages = first(
        span,
        &[
            "gen_ai.input.messages",
            "gen_ai.prompt",
            "ai.prompt.messages",
        ],
    )
    .map(json_text);
    let input = match (first(span, &["gen_ai.system_instructions"]), messages) {
        (Some(system), messages) => Some(json!({
            "system_instructions": json_text(system),
            "messages": messages,
        })),
        (None, messages) => messages,
    };
    ModelCalled {
        operation: first_str(span, &["gen_ai.operation.name"]).unwrap_or_else(|| "chat".into()),
        provider: first_str(
            span,
            &[
                "gen_ai.provider.name",
                "gen_ai.system",
                "llm.provider",
                "llm.system",
            ],
        ),
        model: first_str(span, &["gen_ai.request.model", "llm.model_name"]),
        response_model: first_str(span, &["gen_ai.response.model"]),
        input_tokens: first_u64(
            span,
            &[
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.prompt_tokens",
                "ai.usage.promptTokens",
                "llm.token_count.prompt",
            ],
        ),
        output_tokens: first_u64(
            span,
            &[
                "gen_ai.usage.output_tokens",
                "gen_ai.usage.completion_tokens",
                "ai.usage.completionTokens",
                "llm.token_count.completion",
            ],
        ),
        finish_reasons,
        duration_ns: span.end - span.start,
        error: error_of(span),
        input,
        output: first(
            span,
            &[
                "gen_ai.output.messages",
                "gen_ai.completion",
                "ai.response.text",
            ],
        )
        .map(json_text),
        // Vercel's `ai.prompt.tools` is an array of JSON texts.
        tool_definitions: first(span, &["gen_ai.tool.definitions", "ai.prompt.tools"]).map(|v| {
            match json_text(v) {
                Value::Array(items) => Value::Array(items.iter().map(json_text).collect()),
                other => other,
            }
        }),
    }
}

//! The example server's tools: one or more for every capability of the
//! context (also compiled into the MCP test, which replays their calls).

use std::time::Duration;

use reel::context::{Elicitation, ToolContext, ToolError};
use reel::fact::{ElicitOutcome, Level};
use reel::spec::{Annotations, JsonSchema, ToolSpec, ToolSpecExt};
use reel::tools::Tools;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The arguments of `count`.
#[derive(Deserialize, JsonSchema)]
struct CountArgs {
    /// How many steps to count.
    steps: u32,
}

/// The result of `count`.
#[derive(Serialize, JsonSchema)]
struct Counted {
    /// The steps counted.
    counted: u32,
}

/// Counts steps, reporting progress with a message, then once without.
async fn count(ctx: ToolContext, args: CountArgs) -> Result<Counted, ToolError> {
    ctx.set_logger("count");
    ctx.log(Level::Debug, json!({ "steps": args.steps }));
    for step in 1..=args.steps {
        ctx.progress(
            json!({ "progress": step, "total": args.steps, "message": format!("step {step}") }),
        );
    }
    ctx.progress(json!({ "progress": args.steps + 1 }));
    ctx.notify(format!("counted {} steps", args.steps));
    Ok(Counted {
        counted: args.steps,
    })
}

/// One message at each of five levels, from the logger `levels`.
async fn levels(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    ctx.set_logger("levels");
    ctx.log(Level::Debug, "a debug line");
    ctx.notify("an info line");
    ctx.notify_at(Level::Notice, "a notice");
    ctx.log(Level::Warning, json!({ "warning": "disk at 90%" }));
    ctx.notify_at(Level::Error, "an error line");
    Ok("five levels".into())
}

/// The arguments of `confirm`.
#[derive(Deserialize, JsonSchema)]
struct ConfirmArgs {
    /// What to confirm.
    action: String,
}

fn outcome(answer: &ElicitOutcome) -> Value {
    match answer {
        ElicitOutcome::Accept { content } => json!({ "outcome": "accept", "content": content }),
        ElicitOutcome::Decline => json!({ "outcome": "decline" }),
        ElicitOutcome::Cancel => json!({ "outcome": "cancel" }),
        ElicitOutcome::Timeout => json!({ "outcome": "timeout" }),
        ElicitOutcome::Error { message } => json!({ "outcome": "error", "message": message }),
    }
}

/// Asks the user to confirm (a form elicitation).
async fn confirm(ctx: ToolContext, args: ConfirmArgs) -> Result<Value, ToolError> {
    let question = Elicitation::form(
        format!("Really {}?", args.action),
        json!({
            "type": "object",
            "properties": { "confirmed": { "type": "boolean" } },
            "required": ["confirmed"],
        }),
    );
    let answer = ctx.elicit(question).await?;
    // After the answer: over MRTR (2026-07-28) this goes to the request of
    // the round that brought the answer.
    ctx.progress(json!({ "progress": 1, "total": 1, "message": "answered" }));
    Ok(outcome(&answer.outcome))
}

/// Sends the user to a sign-in page (a URL elicitation).
async fn sign_in(ctx: ToolContext, _args: Value) -> Result<Value, ToolError> {
    let id = format!("el-{}", ctx.call_id());
    let question = Elicitation::url("Sign in to the registry", "https://registry.test/login", id);
    let answer = ctx.elicit(question).await?;
    Ok(outcome(&answer.outcome))
}

/// The arguments of `wait`.
#[derive(Deserialize, JsonSchema)]
struct WaitArgs {
    /// Milliseconds to wait at most; none waits until cancelled.
    #[serde(default)]
    ms: Option<u64>,
}

/// Waits, cancellably: reports progress once, then waits for the time
/// given (none: until cancelled).
async fn wait(ctx: ToolContext, args: WaitArgs) -> Result<String, ToolError> {
    ctx.progress(json!({ "progress": 0, "message": "waiting" }));
    match args.ms {
        Some(ms) => {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = ctx.cancelled() => {}
            }
        }
        None => ctx.cancelled().await,
    }
    ctx.check_cancel()?;
    Ok("waited".into())
}

/// Fails, as a tool does.
async fn fail(_ctx: ToolContext, _args: Value) -> Result<Value, ToolError> {
    Err(ToolError::msg("the disk is full"))
}

/// Says what the request told the context: client, platform, protocol,
/// run id (none), session.
async fn whoami(ctx: ToolContext, _args: Value) -> Result<Value, ToolError> {
    Ok(json!({
        "run_id": ctx.run_id(),
        "protocol": ctx.protocol(),
        "platform": ctx.platform().as_str(),
        "client": ctx.client_info().map(|c| c.name.clone()),
        "session": ctx.session_id(),
    }))
}

/// Echoes its arguments (registered without a spec).
async fn echo(_ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    Ok(args)
}

/// The registry the example serves.
pub fn tools() -> Tools {
    Tools::new()
        .tool(
            ToolSpec::new::<CountArgs, Counted>("count")
                .title("Count steps")
                .description("Counts steps, reporting progress for each.")
                .annotations(Annotations {
                    read_only_hint: Some(true),
                    idempotent_hint: Some(true),
                    ..Annotations::default()
                }),
            count,
        )
        .tool(
            ToolSpec::new::<Value, String>("levels")
                .description("Logs one message at each of five levels.")
                .input_schema(json!({ "type": "object" })),
            levels,
        )
        .tool(
            ToolSpec::new::<ConfirmArgs, Value>("confirm")
                .title("Confirm an action")
                .description("Asks the user to confirm an action (a form elicitation).")
                .annotations(Annotations {
                    destructive_hint: Some(true),
                    ..Annotations::default()
                }),
            confirm,
        )
        .tool(
            ToolSpec::new::<Value, Value>("sign_in")
                .description("Asks the user to sign in at a URL.")
                .input_schema(json!({ "type": "object" })),
            sign_in,
        )
        .tool(
            ToolSpec::new::<WaitArgs, String>("wait")
                .description("Waits until cancelled, or for `ms` milliseconds."),
            wait,
        )
        .tool(
            ToolSpec::new::<Value, Value>("fail")
                .description("Always fails.")
                .input_schema(json!({ "type": "object" })),
            fail,
        )
        .tool(
            ToolSpec::new::<Value, Value>("whoami")
                .description("What the context knows of the caller.")
                .input_schema(json!({ "type": "object" })),
            whoami,
        )
        .register("echo", echo)
}

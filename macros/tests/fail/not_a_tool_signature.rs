use reel::prelude::*;

#[reel::tool]
async fn no_context(service: String) -> Result<Value, ToolError> {
    Ok(json!(service))
}

#[reel::tool]
fn generic<T: ToString>(_ctx: ToolContext, t: T) -> Result<String, ToolError> {
    Ok(t.to_string())
}

#[reel::tool]
struct NotAFunction;

fn main() {}

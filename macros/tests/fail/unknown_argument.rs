use reel::prelude::*;

#[reel::tool(nmae = "deploy")]
async fn deploy(_ctx: ToolContext, service: String) -> Result<Value, ToolError> {
    Ok(json!(service))
}

#[reel::tool(needs = "github")]
async fn plan(_ctx: ToolContext, service: String) -> Result<Value, ToolError> {
    Ok(json!(service))
}

fn main() {}

use reel::prelude::*;

struct Args {
    service: String,
}

#[reel::tool]
async fn deploy(_ctx: ToolContext, args: Args) -> Result<Value, ToolError> {
    Ok(json!(args.service))
}

fn main() {}

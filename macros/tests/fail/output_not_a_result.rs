use reel::prelude::*;

#[reel::tool]
async fn deploy(_ctx: ToolContext, service: String) -> Value {
    json!(service)
}

fn main() {}

// Without the attribute: a typed tool's spec types are its function's.
use reel::prelude::*;

#[reel::schema]
struct Sum {
    a: i64,
    b: i64,
}

async fn concat(_ctx: ToolContext, parts: Vec<String>) -> Result<String, ToolError> {
    Ok(parts.concat())
}

fn main() {
    let _tool: TypedTool<Sum, i64> = TypedTool::new("add", concat);
}

// A tool crate's whole import: the prelude. Its types derive through
// `#[reel::schema]`, so it needs neither serde nor schemars.
use reel::prelude::*;

#[reel::schema]
struct DeployArgs {
    service: String,
    #[serde(default)]
    replicas: Option<u8>,
}

#[reel::schema]
struct Deployed {
    id: u64,
}

/// Deploys a service.
///
/// Waits for the rollout.
#[reel::tool(title = "Deploy", needs = ["github"], destructive, idempotent = false)]
async fn deploy(ctx: ToolContext, args: DeployArgs) -> Result<Deployed, ToolError> {
    ctx.progress(json!({ "message": format!("deploying {}", args.service) }));
    Ok(Deployed { id: u64::from(args.replicas.unwrap_or(1)) })
}

/// Doubles a number.
#[reel::tool(name = "double", id = "math.double")]
fn twice(_ctx: ToolContext, n: i64) -> Result<i64, ToolError> {
    Ok(2 * n)
}

fn main() {
    let tools = Tools::new().with(deploy_tool()).with(twice_tool());
    let spec = tools.get("deploy").unwrap().spec().unwrap();
    assert_eq!(spec.description.as_deref(), Some("Deploys a service.\n\nWaits for the rollout."));
    assert_eq!(spec.title.as_deref(), Some("Deploy"));
    assert_eq!(spec.needs, ["github"]);
    let hints = spec.annotations.unwrap();
    assert_eq!((hints.destructive_hint, hints.idempotent_hint), (Some(true), Some(false)));
    assert_eq!(spec.input_schema["required"], json!(["service"]));
    assert_eq!(spec.output_schema.as_ref().unwrap()["required"], json!(["id"]));
    let double = tools.get("double").unwrap();
    assert_eq!(double.mode(), reel::fact::CallMode::Sync);
    assert_eq!(double.spec().unwrap().tool_id(), "math.double");
}

//! Every option of the attribute, together.
use aaa_tools::{ToolContext, ToolError, tool};

fn payment_key(to: &str, amount_cents: &u64) -> String {
    format!("{to}:{amount_cents}")
}

/// Send money.
///
/// # Arguments
/// * `to` - The payee.
/// * `amount_cents` - The amount in cents.
#[tool(
    name = "pay",
    description = "Send money to a payee.",
    requires_approval = true,
    timeout_s = 30.5,
    pool = "payments",
    delivery = "at_most_once",
    idempotency_key = payment_key,
    guard(enabled = true, max_attempts = 1, lease_ttl_s = 30, heartbeat_s = 5.0, wait_poll_s = 0.25, fence_results = true, lost_lease = "finish"),
    annotations(title = "Pay", read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = true),
    require_descriptions = true,
    crate = ::aaa_tools
)]
async fn send_payment(ctx: ToolContext, to: String, amount_cents: u64) -> Result<String, ToolError> {
    Ok(format!("{} {to} {amount_cents}", ctx.idempotency_key()))
}

/// A tool with no parameters and no return value.
#[tool]
async fn ping() {}

fn main() {
    let tool = send_payment::tool();
    assert_eq!(tool.name(), "pay");
    assert!(tool.requires_approval());
    let _ = ping::tool();
}

//! The tools the conformance suite's Tasks scenarios (SEP-2663) call. Those the server
//! declares task-supporting (`main.rs`) become MCP tasks for a client that declared
//! the extension: engine calls recorded in the engine's store.

use std::time::Duration;

use aaa_mcp::McpReply;
use aaa_tools::{Tool, ToolContext, ToolError, tool, tools};
use serde_json::{Value, json};

use crate::tools::{answered_name, ask, elicitation, greet_by_name, request_of, text};

/// Greets someone (a plain call, never a task).
///
/// # Arguments
/// * `name` - Who to greet.
#[tool]
async fn greet(name: String) -> String {
    format!("Hello, {name}!")
}

/// Works for `seconds` seconds, then returns; stops when cancelled.
///
/// # Arguments
/// * `seconds` - How long to work.
/// * `label` - A label for the result.
#[tool]
async fn slow_compute(
    ctx: ToolContext,
    seconds: f64,
    label: Option<String>,
) -> Result<String, ToolError> {
    let label = label.unwrap_or_else(|| "compute".to_owned());
    work(&ctx, seconds).await?;
    Ok(format!("{label}: computed after {seconds}s"))
}

/// Fails after about a second, as a tool's error the model reads.
#[tool]
async fn failing_job(ctx: ToolContext) -> Result<String, ToolError> {
    work(&ctx, 1.0).await?;
    Err(ToolError::new("failing_job always fails"))
}

/// Panics: an internal failure, not a tool's error.
#[tool]
async fn protocol_error_job() -> String {
    panic!("protocol_error_job panics by design")
}

/// Asks the user to confirm deleting `filename`, then answers.
///
/// # Arguments
/// * `filename` - The file to delete.
#[tool]
async fn confirm_delete(ctx: ToolContext, filename: String) -> McpReply {
    match request_of(&ctx).input("confirm") {
        Some(answer) if confirmed(answer) => text(format!("Deleted {filename}")),
        Some(_) => text(format!("Kept {filename}")),
        None => ask(
            vec![(
                "confirm",
                elicitation(
                    &format!("Delete {filename}?"),
                    json!({"confirm": {"type": "boolean"}}),
                    json!(["confirm"]),
                ),
            )],
            None,
        ),
    }
}

/// Asks two questions at once, then answers with both.
#[tool]
async fn multi_input(ctx: ToolContext) -> McpReply {
    let request = request_of(&ctx);
    let name = |key| answered_name(&request, key);
    match (name("first"), name("second")) {
        (Some(first), Some(second)) => text(format!("Got {first} and {second}")),
        _ => {
            let question = |message| {
                elicitation(
                    message,
                    json!({"name": {"type": "string"}, "confirm": {"type": "boolean"}}),
                    json!(["name"]),
                )
            };
            ask(
                vec![
                    ("first", question("First name?")),
                    ("second", question("Second name?")),
                ],
                None,
            )
        }
    }
}

/// Asks for the user's name, then greets them (a task once the answer comes, for a
/// client that can have one).
#[tool]
async fn test_tool_with_task(ctx: ToolContext) -> McpReply {
    greet_by_name(&ctx)
}

/// Whether an elicitation answer accepted with `confirm: true`.
fn confirmed(answer: &serde_json::Map<String, Value>) -> bool {
    answer.get("action").and_then(Value::as_str) == Some("accept")
        && answer.get("content").and_then(|c| c.get("confirm")) == Some(&Value::Bool(true))
}

/// Waits `seconds`, or fails once the call is cancelled.
async fn work(ctx: &ToolContext, seconds: f64) -> Result<(), ToolError> {
    let pause = Duration::from_secs_f64(seconds.clamp(0.0, 3600.0));
    tokio::select! {
        () = tokio::time::sleep(pause) => Ok(()),
        () = ctx.cancelled() => Err(ToolError::new("cancelled")),
    }
}

/// Every task fixture tool.
pub(crate) fn all() -> Vec<Tool> {
    tools![
        greet,
        slow_compute,
        failing_job,
        protocol_error_job,
        confirm_delete,
        multi_input,
        test_tool_with_task
    ]
}

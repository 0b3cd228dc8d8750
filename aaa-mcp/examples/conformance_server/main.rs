//! The server the MCP conformance suite (`@modelcontextprotocol/conformance`) tests:
//! the suite's fixture tools as aaa-tools tools, each call going through an embedded
//! engine with a `ToolHandler` attached, and its resources, prompts and completions
//! beside them. `scripts/mcp-conformance` starts it and runs the suite once per
//! protocol version.
//!
//! ```sh
//! cargo run -p aaa-mcp --example conformance_server -- --port 8001
//! ```
//!
//! It prints `listening <url>` on stdout once it accepts connections, and serves until
//! interrupted.

mod fixtures;
mod task_tools;
mod tools;

use aaa_mcp::{HttpOptions, HttpServer, McpServer, TaskSupport};
use aaa_tools::{Engine, ToolHandler, ToolRegistry};
use rmcp::model::ClientCapabilities;

#[allow(deprecated)] // sampling: deprecated by SEP-2577, still checked
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut port = 0_u16;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => {
                port = args
                    .next()
                    .ok_or("--port needs a number")?
                    .parse()
                    .map_err(|e| format!("--port: {e}"))?;
            }
            other => return Err(format!("unknown argument {other:?} (use --port N)").into()),
        }
    }
    let mut all = tools::all();
    all.extend(task_tools::all());
    let registry = ToolRegistry::new(all)?;
    let engine = Engine::embedded();
    let worker = ToolHandler::new(registry.clone()).attach(&engine).await?;
    let server = McpServer::builder(registry, engine)
        .name("aaa-mcp-conformance", env!("CARGO_PKG_VERSION"))
        .share_sessions(true)
        .reports_progress("test_tool_with_progress")
        .instructions("The MCP conformance suite's fixtures, served through the aaa-tools engine.")
        .requires_capability(
            "test_missing_capability",
            ClientCapabilities::builder().enable_sampling().build(),
        )
        .task_support("slow_compute", TaskSupport::Optional)
        .task_support("failing_job", TaskSupport::Required)
        .task_support("protocol_error_job", TaskSupport::Optional)
        .task_support("confirm_delete", TaskSupport::Optional)
        .task_support("multi_input", TaskSupport::Optional)
        .task_support("test_tool_with_task", TaskSupport::AfterInput)
        .extras(fixtures::Fixtures::default())
        .build()?;
    let http = HttpServer::start(server, HttpOptions::new(port)).await?;
    println!("listening {}", http.url());
    tokio::signal::ctrl_c().await?;
    http.shutdown().await?;
    worker.shutdown(std::time::Duration::from_secs(5)).await;
    Ok(())
}

//! rmcp's own server with the tool `add(a, b)`: the baseline the `mcp_call` bench and
//! the `call_cost` example measure aaa-mcp against (one file, included by both).

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::{Json, Parameters};
use serde::Deserialize;

/// The arguments of rmcp's `add`.
#[derive(Deserialize, schemars::JsonSchema)]
pub(crate) struct AddArgs {
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
}

/// rmcp's server: the same tool as ours, on rmcp's router.
#[derive(Clone)]
pub(crate) struct RmcpAdder {
    tool_router: ToolRouter<Self>,
}

#[rmcp::tool_router]
impl RmcpAdder {
    /// The server.
    pub(crate) fn new() -> Self {
        RmcpAdder {
            tool_router: Self::tool_router(),
        }
    }

    /// Add two integers.
    #[rmcp::tool]
    async fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> Json<i64> {
        Json(a + b)
    }
}

#[rmcp::tool_handler(router = self.tool_router)]
impl rmcp::ServerHandler for RmcpAdder {}

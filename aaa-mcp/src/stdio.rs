//! stdio: the transport MCP hosts (Claude Desktop, Claude Code, Cursor, VS Code)
//! launch servers with. One client per process, newline-delimited JSON-RPC on stdin
//! and stdout; logs must go to stderr.

use rmcp::{ServerHandler, ServiceExt};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::http::ServeError;
use crate::server::McpServer;

/// Serves `server` on this process's stdin and stdout until the client closes them.
///
/// ```no_run
/// use aaa_mcp::{McpServer, serve_stdio};
/// use aaa_tools::{Engine, ToolRegistry};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = McpServer::builder(ToolRegistry::new([])?, Engine::embedded()).build()?;
/// serve_stdio(server).await?;
/// # Ok(()) }
/// ```
pub async fn serve_stdio<X: ServerHandler + Clone>(server: McpServer<X>) -> Result<(), ServeError> {
    serve_io(server, rmcp::transport::stdio_pipes()).await
}

/// Serves `server` on any byte stream pair (a pipe, a socket, an in-memory duplex)
/// until the other side closes it.
pub async fn serve_io<X, R, W>(
    server: McpServer<X>,
    (reader, writer): (R, W),
) -> Result<(), ServeError>
where
    X: ServerHandler + Clone,
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let running = server
        .serve((reader, writer))
        .await
        .map_err(|error| ServeError::Session(error.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|error| ServeError::Session(error.to_string()))?;
    Ok(())
}

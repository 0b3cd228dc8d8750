//! The agent of the README's "An agent loop" section, as a program (a test of this
//! crate checks that the README shows this code): a `#[tool]` fn, a model over HTTP,
//! and a loop that runs the model's calls through the engine.
//!
//! ```text
//! OPENAI_API_KEY=... cargo run --example agent_loop
//! OPENAI_BASE_URL=http://localhost:11434/v1 cargo run --example agent_loop   # a compatible server
//! ```

use aaa_loop::http::OpenAiChatModel;
use aaa_loop::{Message, ToolLoop};
use aaa_tools::{Engine, RunId, ToolHandler, ToolRegistry, tool, tools};

/// Add two integers.
#[tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::embedded(); // or NatsOptions::new(url).connect().await?
    let registry = ToolRegistry::new(tools![add])?;
    let _worker = ToolHandler::new(registry).attach(&engine).await?;
    // OPENAI_API_KEY, and OPENAI_BASE_URL for a compatible server (or AnthropicModel, GeminiModel).
    let model = OpenAiChatModel::from_env("gpt-4.1-mini").build()?;
    let agent = ToolLoop::new(model, tools![add]);
    // Each turn is a fact on the run: on NATS, running again with this id resumes.
    let run = engine.run(RunId::new("ticket-4711")?);
    let input = vec![Message::user("What is 2 + 3?")];
    let result = agent.run(&run, input).await?;
    println!("{:?}", result.end); // Final("2 + 3 = 5"), or the budget that ended it
    Ok(())
}

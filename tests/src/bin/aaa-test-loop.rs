//! An agent loop in its own process, for the NATS resume test: connects to the server
//! at `AAA_NATS_URL`, runs a `ToolLoop` on the run `AAA_RUN_ID` with a scripted model
//! and prints what happens, one line each, on stdout:
//!
//! - `asked <turn>` when the model is asked for a turn;
//! - `final <text>` and `resumed <turns>` when the loop ends with a final answer.
//!
//! The model calls the worker's `work` tool on turn 0 (`{"ms": 50, "tag":
//! "loop-resume"}`, call id `call_work`) and answers on turn 1 with `work <key> done
//! at attempt <attempt>`, read from the call's result. With `AAA_HANG_AT_TURN=<n>` it
//! never answers turn `n` instead (after saying `asked <n>`): the test kills the
//! process there, which is after the tool completed and before the next model turn,
//! and starts the binary again on the same run.
//!
//! The loop tells the model about no tools: a scripted model reads no specs, and the
//! tool runs in the worker process, which has it.

use std::io::Write;

use aaa_loop::{
    ArgumentsOrProblem, AssistantTurn, LoopEnd, Message, Model, ModelError, ModelFuture,
    ModelRequest, ProviderCall, ToolLoop,
};
use aaa_tools::RunId;
use aaa_tools_nats::NatsOptions;

/// The model: a fixed two-turn script that says on stdout when it is asked.
struct Script {
    hang_at: Option<u32>,
}

/// The line the test reads, written at once (stdout is a pipe, so it would be
/// buffered otherwise).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("stdout is writable");
    out.flush().expect("stdout is writable");
}

impl Model for Script {
    fn turn<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            say(&format!("asked {}", request.turn));
            if self.hang_at == Some(request.turn) {
                return std::future::pending().await;
            }
            match request.last_results() {
                None => {
                    let arguments =
                        ArgumentsOrProblem::from_text(r#"{"ms": 50, "tag": "loop-resume"}"#);
                    let call = ProviderCall::new("call_work", "work", arguments);
                    Ok(AssistantTurn::tool_calls([call]))
                }
                Some(results) => {
                    let result = results[0].outcome.result().ok_or_else(|| {
                        ModelError::Other(format!(
                            "the work failed: {}",
                            results[0].outcome.for_model()
                        ))
                    })?;
                    Ok(AssistantTurn::answer(format!(
                        "work {} done at attempt {}",
                        result["key"].as_str().unwrap_or_default(),
                        result["attempt"]
                    )))
                }
            }
        })
    }
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is required"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = env("AAA_NATS_URL")?;
    let run = RunId::new(env("AAA_RUN_ID")?)?;
    let hang_at = match std::env::var("AAA_HANG_AT_TURN") {
        Ok(turn) => Some(turn.parse()?),
        Err(_) => None,
    };
    let engine = NatsOptions::new(url).connect().await?;
    let agent = ToolLoop::new(Script { hang_at }, []);
    let input = vec![Message::user("Do the work, then say who did it.")];
    let result = agent.run(&engine.run(run), input).await?;
    match result.end {
        LoopEnd::Final(text) => {
            say(&format!("final {text}"));
            say(&format!("resumed {}", result.resumed_turns));
            Ok(())
        }
        other => Err(format!("the loop ended without an answer: {other:?}").into()),
    }
}

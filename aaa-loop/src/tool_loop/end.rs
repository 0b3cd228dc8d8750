//! How a loop ends ([`LoopEnd`], [`LoopResult`], [`LoopError`]) and what it tells a
//! UI on the way ([`LoopEvent`]).

use std::sync::Arc;

use aaa_tools::bus::BusError;
use aaa_tools::{CallId, EngineError, FactError, RunId};
use serde::{Deserialize, Serialize};

use crate::model::{Message, ModelError, ToolResult};
use crate::turn::{AssistantTurn, ProviderCall, Usage};

/// Why a loop ended (without an error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LoopEnd {
    /// The model answered without calling a tool: its text (empty when it wrote none,
    /// e.g. when it ran out of output tokens).
    Final(String),
    /// [`Limits::max_turns`](crate::Limits::max_turns) turns were taken.
    MaxTurns,
    /// The next turn's calls would pass [`Limits::max_tool_calls`](crate::Limits::max_tool_calls).
    MaxToolCalls,
    /// [`Limits::max_total_tokens`](crate::Limits::max_total_tokens) were spent.
    MaxTokens,
    /// [`Limits::wall_time`](crate::Limits::wall_time) passed.
    WallTime,
    /// The model (or the provider's safety system) declined; the reason. Calls of the
    /// refusing turn are not run.
    Refused(String),
}

impl LoopEnd {
    /// The final answer, when the loop ended with one.
    pub fn final_text(&self) -> Option<&str> {
        match self {
            LoopEnd::Final(text) => Some(text),
            _ => None,
        }
    }
}

/// What a loop came to: why it ended, the conversation, and what it cost.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LoopResult {
    /// Why it ended.
    pub end: LoopEnd,
    /// The whole conversation: the input, then each turn and its results.
    pub messages: Vec<Message>,
    /// Model turns in the run (those before a restart included).
    pub turns: u32,
    /// How many of them were found recorded when this run of the loop started.
    pub resumed_turns: u32,
    /// Tool calls answered in the run.
    pub tool_calls: u32,
    /// Tokens of every turn of the run.
    pub usage: Usage,
}

/// A failure that stopped a loop. The run keeps what was recorded: running the loop
/// again on the same run resumes from there.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LoopError {
    /// The model gave no turn.
    #[error("the model failed: {0}")]
    Model(#[from] ModelError),
    /// The engine failed (requesting a call, waiting for an outcome).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Recording a fact failed.
    #[error("could not record the loop's fact: {0}")]
    Bus(#[from] BusError),
    /// Reading the run's facts failed.
    #[error("could not read the run's facts: {0}")]
    Facts(#[from] FactError),
    /// The run's facts ended before the loop could read them up to now.
    #[error("the run's facts ended before the loop had read them")]
    FactsEnded,
    /// The run was started with other input than this loop was given: a run holds
    /// one conversation (start a new run for another).
    #[error(
        "run {0} was started with other input; resume it with the same messages, or start a new run"
    )]
    InputMismatch(RunId),
    /// A loop fact of the run cannot be read (written by an incompatible version, or
    /// partly removed).
    #[error("the run's loop facts cannot be read: {0}")]
    Unreadable(String),
}

/// What happens in a loop, as it happens: for a UI ([`ToolLoop::run_stream`](crate::ToolLoop::run_stream)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LoopEvent {
    /// The loop found `turns` turns recorded on the run and goes on from there.
    Resumed {
        /// Turns recorded before.
        turns: u32,
    },
    /// The model took a turn (recorded on the run already).
    Turn {
        /// Its number, from 0.
        turn: u32,
        /// What it said (the turn the conversation holds).
        assistant: Arc<AssistantTurn>,
    },
    /// A call was requested from the engine.
    CallRequested {
        /// The turn.
        turn: u32,
        /// The call as the model made it.
        call: ProviderCall,
        /// The engine's id for it ([`loop_call_id`](crate::loop_call_id)).
        call_id: CallId,
    },
    /// A call was answered (by the engine, or by the loop for arguments it could
    /// not read).
    Outcome {
        /// The turn.
        turn: u32,
        /// The engine's id for the call.
        call_id: CallId,
        /// The call and its outcome, as the model will read it.
        result: ToolResult,
    },
    /// The model gave its final answer.
    Final(String),
    /// The loop ended: the last event.
    Ended(Result<LoopResult, LoopError>),
}

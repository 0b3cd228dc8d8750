//! [`Outcome`]: how a tool call ended, as the caller and the model read it.

use serde_json::Value;

use crate::bus::Stored;
use crate::event::{Parsed, TOOL_COMPLETED, TOOL_FAILED, ToolCompleted, ToolFailed};
use crate::ids::CallId;

/// How a call ended: the fact the model reads.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Outcome {
    /// `aaa.tool.completed`.
    Completed(ToolCompleted),
    /// `aaa.tool.failed`.
    Failed(ToolFailed),
}

impl Outcome {
    /// The call.
    pub fn call_id(&self) -> &CallId {
        match self {
            Outcome::Completed(c) => &c.call_id,
            Outcome::Failed(f) => &f.call_id,
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        match self {
            Outcome::Completed(c) => &c.name,
            Outcome::Failed(f) => &f.name,
        }
    }

    /// The result, when the call completed.
    pub fn result(&self) -> Option<&Value> {
        match self {
            Outcome::Completed(c) => Some(&c.result),
            Outcome::Failed(_) => None,
        }
    }

    /// The failure, when the call failed.
    pub fn failure(&self) -> Option<&ToolFailed> {
        match self {
            Outcome::Failed(f) => Some(f),
            Outcome::Completed(_) => None,
        }
    }

    /// Whether the call completed.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Completed(_))
    }

    /// The text to put in the model's tool-result message: a string result as is,
    /// another result as JSON, a failure as `error (<kind>): <message>`.
    pub fn for_model(&self) -> String {
        match self {
            Outcome::Completed(c) => match &c.result {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            Outcome::Failed(f) => format!("error ({}): {}", f.kind, f.message),
        }
    }

    /// The outcome a stored fact carries, if it is one: its subject was read already
    /// as the subject of an outcome that `completed`, or failed
    /// (`crate::names::OutcomeSubject`); its type must say the same.
    pub(crate) fn from_stored(stored: &Stored, completed: bool) -> Option<Outcome> {
        let parsed = if completed {
            Parsed::<ToolCompleted>::from_payload(&stored.payload)
                .map(|p| (p.kind == TOOL_COMPLETED).then_some(Outcome::Completed(p.data)))
        } else {
            Parsed::<ToolFailed>::from_payload(&stored.payload)
                .map(|p| (p.kind == TOOL_FAILED).then_some(Outcome::Failed(p.data)))
        };
        parsed.unwrap_or_else(|error| {
            tracing::warn!(subject = %stored.subject, %error, "skipping a fact that is not a valid outcome");
            None
        })
    }
}

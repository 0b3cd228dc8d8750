//! [`ToolCall`]: one call a program or a model turn asks the engine for.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::new_call_id;
use crate::event::Attachment;
use crate::ids::CallId;

/// One tool call of a model turn.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The call id (the provider's, when it gave one); a fresh one when `None`.
    pub call_id: Option<CallId>,
    /// The tool's name as the model sent it.
    pub name: Arc<str>,
    /// The arguments: an object, or a string of JSON as providers send them. Shared:
    /// the request on the bus takes this allocation, so a caller that keeps the
    /// arguments too (an agent loop records them with the model's turn) copies none:
    /// 2 000 instructions less a turn in aaa-loop's `loop_overhead` bench, whose
    /// per-turn ratio to a direct call went from 1.088 to 1.049 in instructions.
    pub arguments: Arc<Value>,
    /// Metadata for the tool (`ToolContext::meta`).
    pub meta: Map<String, Value>,
    /// The caller's own record, stored in the request's message (see [`Attachment`]).
    pub attachment: Option<Attachment>,
    /// Whether `call_id` was made by [`with_new_id`](Self::with_new_id): no earlier
    /// call can have it.
    pub(super) fresh: bool,
}

impl ToolCall {
    /// A call of `name` with `arguments` (a [`Value`], or an `Arc<Value>` to share).
    pub fn new(name: impl Into<Arc<str>>, arguments: impl Into<Arc<Value>>) -> Self {
        ToolCall {
            call_id: None,
            name: name.into(),
            arguments: arguments.into(),
            meta: Map::new(),
            attachment: None,
            fresh: false,
        }
    }

    /// Uses the provider's call id. It may name a call requested before (a model turn
    /// replayed after a crash): the guard runs that call once, and waiting for the
    /// outcome finds the first one.
    pub fn with_id(mut self, call_id: CallId) -> Self {
        self.call_id = Some(call_id);
        self.fresh = false;
        self
    }

    /// Says that no call with this call's id was requested before: the caller knows,
    /// having read the run (as an agent loop that resumes does) or made the id itself.
    /// Waiting for the outcome then never asks the bus whether the call finished before
    /// (for an id given with [`with_id`](Self::with_id), it does: one lookup per call).
    /// Said wrongly, the outcome is still found, by the engine's periodic sweep.
    pub fn first_request(mut self) -> Self {
        self.fresh = true;
        self
    }

    /// Gives the call a fresh id now, to know it before the call is requested (the
    /// engine gives one when it is requested otherwise). Unlike an id given with
    /// [`with_id`](Self::with_id), no earlier call can have it, so waiting for its
    /// outcome never asks the bus whether the call finished before.
    pub fn with_new_id(mut self) -> Self {
        self.call_id = Some(new_call_id());
        self.fresh = true;
        self
    }

    /// Adds metadata.
    pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = meta;
        self
    }

    /// Stores `attachment` in the request's message: on the bus exactly when the
    /// request is. An agent loop records its model turn with the turn's first request
    /// this way (a turn must be durable before any of its calls is requested).
    ///
    /// ```
    /// use aaa_tools::ToolCall;
    /// use aaa_tools::event::Attachment;
    /// use serde_json::json;
    ///
    /// let call = ToolCall::new("add", json!({"a": 1, "b": 2}))
    ///     .with_attachment(Attachment::new("example.step", json!({"step": 1})));
    /// assert_eq!(call.attachment.unwrap().kind(), "example.step");
    /// ```
    pub fn with_attachment(mut self, attachment: Attachment) -> Self {
        self.attachment = Some(attachment);
        self
    }
}

//! From an engine [`Outcome`] to an MCP `tools/call` result, and [`McpReply`]: the
//! result a tool returns when it shapes its MCP answer itself. (A failure of the
//! engine itself, not of a tool, is a JSON-RPC internal error instead.)
//!
//! | outcome | MCP result |
//! |---|---|
//! | completed with a string | `content: [{type: text, text}]` |
//! | completed with any other value | `content: [{type: text, text: <the JSON>}]`, `structuredContent: <the value>` |
//! | completed with an [`McpReply`] | the reply's content (and structured content, `isError`), or an `input_required` result |
//! | failed (any [`FailureKind`](aaa_tools::FailureKind)) | `isError: true`, `content: [{type: text, text: "error (<kind>): <message>"}]` |
//!
//! Every failure carries `_meta["aaa-tools/call"]`: the run and call ids of the
//! engine's call, its failure kind and attempt, so an operator can find the call's
//! facts (an `outcome_unknown` call is reconciled through them). A success carries the
//! run and call ids when the request asked for them with
//! `_meta: {"aaa-tools/call": true}` (see [`CALL_META_KEY`]), and nothing otherwise:
//! every `_meta` entry is read again by the client for each result, and this one on
//! every success was 69 000 of the 302 000 instructions of a whole `tools/call` round
//! trip through rmcp's client (the `call_cost` example, `aaa` at 1 in flight), 23 %.
//!
//! A non-object `structuredContent` is what protocol `2026-07-28` allows; for older
//! clients rmcp leaves it out and the text carries the value.

use aaa_tools::{CallId, EngineError, Outcome, RunId};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, InputRequests, MetaObject};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The key under which an [`McpReply`] travels in a tool's result.
pub const REPLY_KEY: &str = "aaa-mcp/reply";

/// The `_meta` key naming the engine's call: in every failed result
/// (`{"run", "call", "kind", "attempt"}`), and in a successful one (`{"run", "call"}`)
/// when the `tools/call` request's `_meta` holds this key with the value `true`.
///
/// ```
/// use aaa_mcp::CALL_META_KEY;
/// use serde_json::json;
///
/// // A request's `params._meta` that asks for the ids of the engine's call:
/// let meta = json!({ CALL_META_KEY: true });
/// assert_eq!(meta, json!({"aaa-tools/call": true}));
/// ```
pub const CALL_META_KEY: &str = "aaa-tools/call";

/// The result of a tool that shapes its MCP answer itself: content blocks other than
/// text (images, audio, embedded resources), a custom error, or (protocol
/// `2026-07-28`) a request for input from the client.
///
/// A tool returns it like any value; it travels through the engine as JSON (an object
/// with the single key [`REPLY_KEY`]), so it works wherever the tool runs. The MCP
/// server turns it back into the result; any other caller of the engine sees the JSON.
///
/// ```
/// use aaa_mcp::McpReply;
/// use aaa_tools::{ToolError, tool};
/// use rmcp::model::ContentBlock;
///
/// /// A one-pixel picture.
/// #[tool]
/// async fn pixel() -> Result<McpReply, ToolError> {
///     Ok(McpReply::content(vec![ContentBlock::image("iVBORw0KGgo=", "image/png")]))
/// }
/// # let _ = pixel::tool();
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpReply {
    #[serde(rename = "aaa-mcp/reply")]
    body: ReplyBody,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum ReplyBody {
    Complete {
        content: Vec<ContentBlock>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        structured: Option<Value>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    InputRequired {
        requests: InputRequests,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<Value>,
    },
}

impl McpReply {
    /// A result made of `content`.
    pub fn content(content: Vec<ContentBlock>) -> McpReply {
        McpReply {
            body: ReplyBody::Complete {
                content,
                structured: None,
                is_error: false,
            },
        }
    }

    /// A failed result (`isError: true`) made of `content`: for a failure that is more
    /// than a message (a [`ToolError`](aaa_tools::ToolError) gives the message form).
    pub fn error(content: Vec<ContentBlock>) -> McpReply {
        McpReply {
            body: ReplyBody::Complete {
                content,
                structured: None,
                is_error: true,
            },
        }
    }

    /// Adds `structuredContent`.
    pub fn with_structured(mut self, value: Value) -> McpReply {
        if let ReplyBody::Complete { structured, .. } = &mut self.body {
            *structured = Some(value);
        }
        self
    }

    /// Asks the client for input before the call can finish (protocol `2026-07-28`,
    /// an `input_required` result): the client answers `requests` and calls the tool
    /// again, and the tool reads the answers and `state` from
    /// [`McpRequest`](crate::McpRequest). The server seals `state` (the client can
    /// neither read nor change it) and binds it to the tool and its arguments.
    ///
    /// A client on an older protocol cannot take this result: the call fails with a
    /// JSON-RPC error saying so.
    pub fn input_required(requests: InputRequests, state: Option<Value>) -> McpReply {
        McpReply {
            body: ReplyBody::InputRequired { requests, state },
        }
    }
}

/// What a completed call's result asks the server to send.
pub(crate) enum Shaped {
    /// A finished result.
    Complete(CallToolResult),
    /// An `input_required` result: the requests, and the tool's state to seal.
    InputRequired(InputRequests, Option<Value>),
}

/// Whether a `tools/call` request's `_meta` asks for the ids of the engine's call on
/// a successful result ([`CALL_META_KEY`] set to `true`); an error for any value but a
/// boolean.
pub(crate) fn ids_asked(meta: &serde_json::Map<String, Value>) -> Result<bool, String> {
    match meta.get(CALL_META_KEY) {
        None => Ok(false),
        Some(Value::Bool(asked)) => Ok(*asked),
        Some(other) => Err(format!(
            "`_meta[\"{CALL_META_KEY}\"]` must be `true` or `false`; got {other}"
        )),
    }
}

/// The MCP result of `outcome`, the call of `run`/`call`; a success names the call in
/// its `_meta` only when `name_success` (the request asked, see [`ids_asked`]).
pub(crate) fn shape(
    outcome: &Outcome,
    run: &RunId,
    call: &CallId,
    name_success: bool,
) -> Result<Shaped, String> {
    let mut meta = json!({"run": run.as_str(), "call": call.as_str()});
    let shaped = match outcome {
        Outcome::Completed(done) => match reply_of(&done.result)? {
            Some(ReplyBody::InputRequired { requests, state }) => {
                return Ok(Shaped::InputRequired(requests, state));
            }
            Some(ReplyBody::Complete {
                content,
                structured,
                is_error,
            }) => {
                let mut result = if is_error {
                    CallToolResult::error(content)
                } else {
                    CallToolResult::success(content)
                };
                result.structured_content = structured;
                result
            }
            None => {
                let mut result =
                    CallToolResult::success(vec![ContentBlock::text(outcome.for_model())]);
                if !done.result.is_string() {
                    result.structured_content = Some(done.result.clone());
                }
                result
            }
        },
        Outcome::Failed(failed) => {
            meta["kind"] = json!(failed.kind);
            meta["attempt"] = json!(failed.attempt);
            CallToolResult::error(vec![ContentBlock::text(outcome.for_model())])
        }
        // `Outcome` may grow; a kind this version does not know is still a failure
        // the model reads in its own words.
        _ => CallToolResult::error(vec![ContentBlock::text(outcome.for_model())]),
    };
    let mut result = shaped;
    if result.is_error != Some(true) && !name_success {
        return Ok(Shaped::Complete(result));
    }
    let mut object = MetaObject::new();
    object.insert(CALL_META_KEY.to_owned(), meta);
    result.meta = Some(object);
    Ok(Shaped::Complete(result))
}

/// The reply a result carries, if it is one; an error when it claims to be one and is
/// malformed.
fn reply_of(result: &Value) -> Result<Option<ReplyBody>, String> {
    let Some(object) = result.as_object().filter(|o| o.len() == 1) else {
        return Ok(None);
    };
    let Some(body) = object.get(REPLY_KEY) else {
        return Ok(None);
    };
    serde_json::from_value(body.clone())
        .map(Some)
        .map_err(|error| format!("the tool's `{REPLY_KEY}` result is malformed: {error}"))
}

/// An engine failure (not a tool's: those are outcomes) as a JSON-RPC error.
pub(crate) fn engine_error(error: EngineError) -> ErrorData {
    ErrorData::internal_error(format!("the engine failed: {error}"), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aaa_tools::event::{ToolCompleted, ToolFailed};

    fn ids() -> (RunId, CallId) {
        (RunId::new("r").unwrap(), CallId::new("c").unwrap())
    }

    fn completed(result: Value) -> Outcome {
        let done: ToolCompleted = serde_json::from_value(
            json!({"call_id": "c", "name": "t", "result": result, "attempt": 1}),
        )
        .unwrap();
        Outcome::Completed(done)
    }

    fn complete(shaped: Shaped) -> CallToolResult {
        match shaped {
            Shaped::Complete(result) => result,
            Shaped::InputRequired(..) => panic!("expected a complete result"),
        }
    }

    #[test]
    fn values_become_text_and_structured_content() {
        let (run, call) = ids();
        let result = complete(shape(&completed(json!({"sum": 5})), &run, &call, false).unwrap());
        assert_eq!(result.is_error, Some(false));
        assert_eq!(result.structured_content, Some(json!({"sum": 5})));
        let text = result.content[0].as_text().unwrap();
        assert_eq!(text.text, r#"{"sum":5}"#);
        assert_eq!(
            result.meta, None,
            "a success names its call only when asked"
        );
        let named = complete(shape(&completed(json!({"sum": 5})), &run, &call, true).unwrap());
        assert_eq!(
            named.meta.unwrap()[CALL_META_KEY],
            json!({"run": "r", "call": "c"})
        );

        let result = complete(shape(&completed(json!("plain")), &run, &call, false).unwrap());
        assert_eq!(result.content[0].as_text().unwrap().text, "plain");
        assert_eq!(result.structured_content, None);
    }

    #[test]
    fn failures_are_is_error_with_the_model_text() {
        let (run, call) = ids();
        let failed: ToolFailed = serde_json::from_value(json!({
            "call_id": "c", "name": "t", "kind": "outcome_unknown",
            "message": "the worker was lost", "attempt": 1
        }))
        .unwrap();
        let result = complete(shape(&Outcome::Failed(failed), &run, &call, false).unwrap());
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result.content[0].as_text().unwrap().text,
            "error (outcome_unknown): the worker was lost"
        );
        assert_eq!(
            result.meta.unwrap()[CALL_META_KEY]["kind"],
            json!("outcome_unknown")
        );
    }

    #[test]
    fn a_request_asks_for_the_ids_with_a_boolean() {
        let meta = |v: Value| json!({ CALL_META_KEY: v }).as_object().unwrap().clone();
        assert_eq!(ids_asked(&serde_json::Map::new()), Ok(false));
        assert_eq!(ids_asked(&meta(json!(true))), Ok(true));
        assert_eq!(ids_asked(&meta(json!(false))), Ok(false));
        let error = ids_asked(&meta(json!("yes"))).unwrap_err();
        assert!(error.contains("`true` or `false`"), "{error}");
    }

    #[test]
    fn replies_shape_their_own_result() {
        let (run, call) = ids();
        let reply = McpReply::content(vec![ContentBlock::image("AAAA", "image/png")])
            .with_structured(json!({"w": 1}));
        let value = serde_json::to_value(&reply).unwrap();
        let result = complete(shape(&completed(value), &run, &call, false).unwrap());
        assert_eq!(result.content.len(), 1);
        assert!(result.content[0].as_image().is_some());
        assert_eq!(result.structured_content, Some(json!({"w": 1})));

        let error = serde_json::to_value(McpReply::error(vec![ContentBlock::text("no")])).unwrap();
        let result = complete(shape(&completed(error), &run, &call, false).unwrap());
        assert_eq!(result.is_error, Some(true));

        let broken = json!({ REPLY_KEY: {"kind": "complete"} });
        let error = shape(&completed(broken), &run, &call, false).err().unwrap();
        assert!(error.contains("malformed"), "{error}");

        // A user's object that merely has the key among others is a plain value.
        let plain = json!({ REPLY_KEY: 1, "other": 2 });
        let result = complete(shape(&completed(plain.clone()), &run, &call, false).unwrap());
        assert_eq!(result.structured_content, Some(plain));
    }
}

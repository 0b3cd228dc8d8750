//! [`AnthropicModel`]: a [`Model`] over Anthropic Messages.

use std::fmt;

use aaa_tools::export::Format;
use reqwest::header::HeaderName;
use serde_json::{Map, Value, json};

use super::endpoint::{Endpoint, Reply};
use super::settings::{Settings, settings_setters};
use super::sse;
use super::{BuildError, export_tools};
use crate::anthropic;
use crate::model::{Message, Model, ModelError, ModelFuture, ModelRequest};
use crate::provider::Provider;
use crate::turn::AssistantTurn;

/// A [`Model`] that asks Anthropic Messages (`POST {base_url}/v1/messages`).
///
/// The request is `model`, `system` (the conversation's system messages, joined by
/// blank lines), `messages` (the rest, rendered below), `tools` (each tool exported
/// with [`Format::Anthropic`]) and `max_tokens`, which Anthropic requires: the
/// request's limit when it has one, else the builder's
/// ([`max_tokens`](AnthropicBuilder::max_tokens), 4096 by default). The headers are
/// `x-api-key` and `anthropic-version` (`2023-06-01` unless set). The answer is read
/// with [`anthropic::parse`] (or its `Assembler` when streaming).
///
/// The conversation: user messages as `user` messages; each assistant turn as an
/// `assistant` message of a `text` block and a `tool_use` block per call (a call whose
/// arguments were unreadable is echoed with `{}`: `input` must be an object; a turn
/// with neither is left out, since Anthropic refuses empty content); each turn's
/// results as one `user` message of `tool_result` blocks
/// ([`anthropic::render_outcomes`]). Extended thinking is turned on with
/// `.body_field("thinking", json!({"type": "enabled", "budget_tokens": 2048}))` (and a
/// `max_tokens` above the budget): a turn's `thinking` and `redacted_thinking` blocks
/// are kept ([`AssistantTurn::reasoning`]) and sent back unchanged, before its text
/// and `tool_use` blocks, as Anthropic requires of a turn that called tools.
///
/// ```no_run
/// use aaa_loop::http::AnthropicModel;
///
/// # fn main() -> Result<(), aaa_loop::http::BuildError> {
/// // The key from ANTHROPIC_API_KEY (and the base URL from ANTHROPIC_BASE_URL, when set):
/// let model = AnthropicModel::from_env("claude-sonnet-4-5").max_tokens(2048).build()?;
/// # drop(model); Ok(()) }
/// ```
#[derive(Clone)]
pub struct AnthropicModel {
    endpoint: Endpoint,
    model: String,
    max_tokens: u32,
    body: Map<String, Value>,
    streaming: bool,
}

impl AnthropicModel {
    /// The base URL used when none is set: Anthropic's.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";

    /// The `anthropic-version` sent unless another is set.
    pub const DEFAULT_VERSION: &'static str = "2023-06-01";

    /// A builder for a client of `model` at Anthropic's URL.
    pub fn builder(model: impl Into<String>) -> AnthropicBuilder {
        AnthropicBuilder {
            settings: Settings::new(Self::DEFAULT_BASE_URL),
            model: model.into(),
            max_tokens: 4096,
            version: Self::DEFAULT_VERSION.to_owned(),
        }
    }

    /// [`builder`](Self::builder), with the key from `ANTHROPIC_API_KEY` and the
    /// base URL from `ANTHROPIC_BASE_URL` when they are set.
    pub fn from_env(model: impl Into<String>) -> AnthropicBuilder {
        let mut builder = Self::builder(model);
        builder.settings =
            builder
                .settings
                .with_env("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", |name| {
                    std::env::var(name).ok()
                });
        builder
    }

    /// The model name sent with each request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The JSON body this client sends for `request`.
    ///
    /// ```
    /// use aaa_loop::http::AnthropicModel;
    /// use aaa_loop::{Message, ModelRequest};
    /// use aaa_tools::{tool, tools};
    ///
    /// /// Add two integers.
    /// #[tool]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// let model = AnthropicModel::builder("claude-sonnet-4-5").api_key("sk-ant-test").build()?;
    /// let request = ModelRequest::new(vec![Message::system("Be brief."), Message::user("2 + 3?")], tools![add]);
    /// let body = model.request_body(&request)?;
    /// assert_eq!(body["system"], "Be brief.");
    /// assert_eq!(body["messages"][0], serde_json::json!({"role": "user", "content": "2 + 3?"}));
    /// assert_eq!(body["tools"][0]["input_schema"]["required"], serde_json::json!(["a", "b"]));
    /// assert_eq!(body["max_tokens"], 4096);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn request_body(&self, request: &ModelRequest) -> Result<Value, ModelError> {
        let mut body = self.body.clone();
        body.insert("model".into(), json!(self.model));
        let (system, messages) = messages(&request.messages)?;
        if !system.is_empty() {
            body.insert("system".into(), json!(system.join("\n\n")));
        }
        body.insert("messages".into(), Value::Array(messages));
        let tools = export_tools(&request.tools, Format::Anthropic)?;
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        let max = request.max_output_tokens.unwrap_or(self.max_tokens);
        body.insert("max_tokens".into(), json!(max));
        if self.streaming {
            body.insert("stream".into(), json!(true));
        }
        Ok(Value::Object(body))
    }
}

impl Model for AnthropicModel {
    fn turn<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            let body = self.request_body(request)?;
            self.endpoint.post_turn(&body, decode).await
        })
    }
}

/// The turn in a successful reply, whole or streamed.
fn decode(reply: &Reply) -> Result<AssistantTurn, crate::CodecError> {
    if !reply.event_stream {
        return anthropic::parse_slice(&reply.body);
    }
    let mut stream = anthropic::Assembler::new();
    for data in sse::event_data(&reply.body) {
        stream.push_slice(&data)?;
    }
    stream.finish()
}

/// The system texts, and the rest of the conversation as Anthropic messages.
fn messages(conversation: &[Message]) -> Result<(Vec<&str>, Vec<Value>), ModelError> {
    let (mut system, mut out) = (Vec::new(), Vec::with_capacity(conversation.len()));
    for message in conversation {
        match message {
            Message::System(text) => system.push(text.as_str()),
            Message::User(text) => out.push(json!({"role": "user", "content": text})),
            Message::Assistant(turn) => out.extend(assistant(turn)),
            Message::ToolResults(results) => {
                let (calls, outcomes): (Vec<_>, Vec<_>) = results
                    .iter()
                    .map(|result| (result.call.clone(), result.outcome.clone()))
                    .unzip();
                out.extend(anthropic::render_outcomes(&calls, &outcomes)?);
            }
        }
    }
    Ok((system, out))
}

/// An assistant turn as the message that made it; none when it has no text and no
/// calls.
fn assistant(turn: &AssistantTurn) -> Option<Value> {
    let mut blocks = Vec::with_capacity(turn.reasoning.len() + turn.calls.len() + 1);
    // The model's thinking first, unchanged: Anthropic checks each block's signature,
    // and with extended thinking on refuses a turn whose tool use comes without it.
    blocks.extend(turn.reasoning.iter().cloned());
    if let Some(text) = turn.text.as_deref().filter(|text| !text.is_empty()) {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in &turn.calls {
        let input = call.arguments.arguments().cloned().unwrap_or_default();
        blocks.push(
            json!({"type": "tool_use", "id": call.answer_id(), "name": call.name, "input": input}),
        );
    }
    (!blocks.is_empty()).then(|| json!({"role": "assistant", "content": blocks}))
}

/// Builds an [`AnthropicModel`]; from [`AnthropicModel::builder`].
#[derive(Debug, Clone)]
pub struct AnthropicBuilder {
    settings: Settings,
    model: String,
    max_tokens: u32,
    version: String,
}

impl AnthropicBuilder {
    settings_setters!();

    /// Sets `max_tokens` for requests that set no output limit (4096 by default).
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Sets the `anthropic-version` header.
    pub fn anthropic_version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// The client. Fails when Anthropic's own URL is used without a key, when the
    /// base URL or a header is not usable, or when TLS cannot be set up.
    pub fn build(self) -> Result<AnthropicModel, BuildError> {
        let settings = self.settings;
        let mut auth = vec![(HeaderName::from_static("anthropic-version"), self.version)];
        match &settings.api_key {
            Some(key) => auth.push((HeaderName::from_static("x-api-key"), key.clone())),
            None if settings.base_url == AnthropicModel::DEFAULT_BASE_URL => {
                return Err(BuildError::MissingApiKey {
                    provider: Provider::Anthropic,
                    variable: "ANTHROPIC_API_KEY",
                });
            }
            None => {}
        }
        Ok(AnthropicModel {
            endpoint: settings.endpoint("/v1/messages", Provider::Anthropic, auth)?,
            model: self.model,
            max_tokens: self.max_tokens,
            body: settings.body,
            streaming: settings.streaming,
        })
    }
}

impl fmt::Debug for AnthropicModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicModel")
            .field("url", &self.endpoint.url.as_str())
            .field("model", &self.model)
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolResult;
    use crate::render::fixtures::failed;
    use crate::turn::{ArgumentsOrProblem, ProviderCall, StopReason};

    #[test]
    fn renders_system_apart_and_turns_as_blocks() {
        let call = ProviderCall::new("toolu_1", "add", ArgumentsOrProblem::from_text("[1]"));
        let refused = AssistantTurn::tool_calls([]).with_stop(StopReason::Refused("no".into()));
        let request = ModelRequest::new(
            vec![
                Message::system("Be brief."),
                Message::user("Add."),
                Message::system("Use tools."),
                Message::assistant(AssistantTurn::tool_calls([call.clone()]).with_text("Adding.")),
                Message::ToolResults(vec![ToolResult::new(
                    call,
                    failed("x", "add", "bad_args", "an array"),
                )]),
                Message::assistant(refused),
            ],
            vec![],
        )
        .with_max_output_tokens(10);
        let model = AnthropicModel::builder("claude")
            .base_url("http://127.0.0.1:9")
            .build()
            .unwrap();
        assert_eq!(
            model.request_body(&request).unwrap(),
            json!({
                "model": "claude",
                "system": "Be brief.\n\nUse tools.",
                "messages": [
                    {"role": "user", "content": "Add."},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Adding."},
                        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "error (bad_args): an array", "is_error": true},
                    ]},
                ],
                "max_tokens": 10,
            })
        );
        assert_eq!(
            AnthropicModel::builder("claude")
                .build()
                .unwrap_err()
                .to_string(),
            "no API key for Anthropic Messages: set one with `api_key`, or in ANTHROPIC_API_KEY"
        );
    }
}

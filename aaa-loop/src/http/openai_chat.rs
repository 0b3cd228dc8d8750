//! [`OpenAiChatModel`]: a [`Model`] over OpenAI Chat Completions, and every server
//! that speaks it.

use std::fmt;

use aaa_tools::export::Format;
use reqwest::header::AUTHORIZATION;
use serde_json::{Map, Value, json};

use super::endpoint::{Endpoint, Reply};
use super::settings::{Settings, settings_setters};
use super::sse;
use super::{BuildError, export_tools};
use crate::model::{Message, Model, ModelError, ModelFuture, ModelRequest};
use crate::openai_chat;
use crate::provider::Provider;
use crate::turn::{AssistantTurn, ProviderCall};

/// A [`Model`] that asks an OpenAI Chat Completions endpoint
/// (`POST {base_url}/chat/completions`): OpenAI itself, or a compatible server (vLLM,
/// llama.cpp's server, Ollama, LiteLLM, a hosted gateway) at its base URL.
///
/// The request is `model`, `messages` (the conversation, rendered below), `tools` (each
/// tool exported with [`Format::OpenAiChat`], strict when asked), and
/// `max_completion_tokens` when the request limits output (`max_tokens` with
/// [`legacy_max_tokens`](OpenAiChatBuilder::legacy_max_tokens), for servers that know
/// only that). The answer is read with [`openai_chat::parse`] (or its `Assembler` when
/// streaming). `Authorization: Bearer <key>` is sent when a key is set; a local
/// server needs none, OpenAI's default URL does.
///
/// The conversation: system and user messages as `system` and `user` messages; each
/// assistant turn as an `assistant` message with its text and `tool_calls` (a call
/// whose arguments were unreadable is echoed with `{}`: the original text is not kept,
/// and the call's result says what was wrong); each turn's results as `tool` messages
/// ([`openai_chat::render_outcomes`]).
///
/// ```no_run
/// use aaa_loop::http::OpenAiChatModel;
/// use aaa_loop::{Message, Model, ModelRequest};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // OpenAI, with OPENAI_API_KEY (and OPENAI_BASE_URL, when set) from the environment:
/// let openai = OpenAiChatModel::from_env("gpt-4.1-mini").build()?;
/// // A local Ollama, no key:
/// let ollama = OpenAiChatModel::builder("qwen3:8b").base_url("http://localhost:11434/v1").build()?;
///
/// let turn = ollama.turn(&ModelRequest::new(vec![Message::user("Hi!")], vec![])).await?;
/// println!("{:?}", turn.text);
/// # drop(openai); Ok(()) }
/// ```
#[derive(Clone)]
pub struct OpenAiChatModel {
    endpoint: Endpoint,
    model: String,
    strict: bool,
    legacy_max_tokens: bool,
    body: Map<String, Value>,
    streaming: bool,
}

impl OpenAiChatModel {
    /// The base URL used when none is set: OpenAI's.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A builder for a client of `model` at OpenAI's URL.
    pub fn builder(model: impl Into<String>) -> OpenAiChatBuilder {
        OpenAiChatBuilder {
            settings: Settings::new(Self::DEFAULT_BASE_URL),
            model: model.into(),
            strict: false,
            legacy_max_tokens: false,
        }
    }

    /// [`builder`](Self::builder), with the key from `OPENAI_API_KEY` and the base
    /// URL from `OPENAI_BASE_URL` when they are set.
    pub fn from_env(model: impl Into<String>) -> OpenAiChatBuilder {
        let mut builder = Self::builder(model);
        builder.settings = builder
            .settings
            .with_env("OPENAI_API_KEY", "OPENAI_BASE_URL", |name| {
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
    /// use aaa_loop::http::OpenAiChatModel;
    /// use aaa_loop::{Message, ModelRequest};
    /// use aaa_tools::{tool, tools};
    ///
    /// /// Add two integers.
    /// #[tool]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// let model = OpenAiChatModel::builder("gpt-4.1-mini").api_key("sk-test").build()?;
    /// let request = ModelRequest::new(vec![Message::system("Be brief."), Message::user("2 + 3?")], tools![add])
    ///     .with_max_output_tokens(200);
    /// let body = model.request_body(&request)?;
    /// assert_eq!(body["messages"][1], serde_json::json!({"role": "user", "content": "2 + 3?"}));
    /// assert_eq!(body["tools"][0]["function"]["name"], "add");
    /// assert_eq!(body["max_completion_tokens"], 200);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn request_body(&self, request: &ModelRequest) -> Result<Value, ModelError> {
        let mut body = self.body.clone();
        body.insert("model".into(), json!(self.model));
        body.insert(
            "messages".into(),
            Value::Array(messages(&request.messages)?),
        );
        let tools = export_tools(
            &request.tools,
            Format::OpenAiChat {
                strict: self.strict,
            },
        )?;
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(max) = request.max_output_tokens {
            let key = if self.legacy_max_tokens {
                "max_tokens"
            } else {
                "max_completion_tokens"
            };
            body.insert(key.into(), json!(max));
        }
        if self.streaming {
            body.insert("stream".into(), json!(true));
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        Ok(Value::Object(body))
    }
}

impl Model for OpenAiChatModel {
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
        return openai_chat::parse_slice(&reply.body);
    }
    let mut stream = openai_chat::Assembler::new();
    for data in sse::event_data(&reply.body) {
        stream.push_slice(&data)?;
    }
    stream.finish()
}

/// The conversation as Chat Completions messages.
fn messages(conversation: &[Message]) -> Result<Vec<Value>, ModelError> {
    let mut out = Vec::with_capacity(conversation.len());
    for message in conversation {
        match message {
            Message::System(text) => out.push(json!({"role": "system", "content": text})),
            Message::User(text) => out.push(json!({"role": "user", "content": text})),
            Message::Assistant(turn) => out.push(assistant(turn)),
            Message::ToolResults(results) => {
                let (calls, outcomes): (Vec<_>, Vec<_>) = results
                    .iter()
                    .map(|result| (result.call.clone(), result.outcome.clone()))
                    .unzip();
                out.extend(openai_chat::render_outcomes(&calls, &outcomes)?);
            }
        }
    }
    Ok(out)
}

/// An assistant turn as the `assistant` message that made it.
fn assistant(turn: &AssistantTurn) -> Value {
    let mut message =
        json!({"role": "assistant", "content": turn.text.clone().unwrap_or_default()});
    if turn.has_calls() {
        if turn.text.is_none() {
            message["content"] = Value::Null;
        }
        message["tool_calls"] = turn.calls.iter().map(echo_call).collect();
    }
    message
}

fn echo_call(call: &ProviderCall) -> Value {
    json!({
        "id": call.answer_id(),
        "type": "function",
        "function": {"name": call.name, "arguments": super::arguments_text(call)},
    })
}

/// Builds an [`OpenAiChatModel`]; from [`OpenAiChatModel::builder`].
#[derive(Debug, Clone)]
pub struct OpenAiChatBuilder {
    settings: Settings,
    model: String,
    strict: bool,
    legacy_max_tokens: bool,
}

impl OpenAiChatBuilder {
    settings_setters!();

    /// Exports the tools in strict mode (Structured Outputs: the model's arguments
    /// always match the schema). Off by default: strict mode makes every parameter
    /// required (optional ones nullable) and cannot express some schemas (a map, an
    /// arbitrary JSON value), and a tool it cannot express fails the turn.
    pub fn strict_tools(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Sends the output limit as `max_tokens` rather than `max_completion_tokens`,
    /// for compatible servers that know only the older name.
    pub fn legacy_max_tokens(mut self, legacy: bool) -> Self {
        self.legacy_max_tokens = legacy;
        self
    }

    /// The client. Fails when OpenAI's own URL is used without a key, when the base
    /// URL or a header is not usable, or when TLS cannot be set up.
    pub fn build(self) -> Result<OpenAiChatModel, BuildError> {
        let settings = self.settings;
        let auth = match &settings.api_key {
            Some(key) => vec![(AUTHORIZATION, format!("Bearer {key}"))],
            None if settings.base_url == OpenAiChatModel::DEFAULT_BASE_URL => {
                return Err(BuildError::MissingApiKey {
                    provider: Provider::OpenAiChat,
                    variable: "OPENAI_API_KEY",
                });
            }
            None => Vec::new(),
        };
        Ok(OpenAiChatModel {
            endpoint: settings.endpoint("/chat/completions", Provider::OpenAiChat, auth)?,
            model: self.model,
            strict: self.strict,
            legacy_max_tokens: self.legacy_max_tokens,
            body: settings.body,
            streaming: settings.streaming,
        })
    }
}

impl fmt::Debug for OpenAiChatModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiChatModel")
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
    use crate::render::fixtures::{completed, failed};
    use crate::turn::ArgumentsOrProblem;

    fn model() -> OpenAiChatModel {
        OpenAiChatModel::builder("m")
            .base_url("http://127.0.0.1:9")
            .body_field("temperature", json!(0))
            .body_field("model", json!("overridden"))
            .legacy_max_tokens(true)
            .streaming(true)
            .build()
            .unwrap()
    }

    #[test]
    fn renders_a_conversation_with_calls_and_results() {
        let good = ProviderCall::new("call_a", "add", ArgumentsOrProblem::from_text(r#"{"a":2}"#));
        let bad = ProviderCall::new("call.b", "add", ArgumentsOrProblem::from_text("{oops"));
        let turn = AssistantTurn::tool_calls([good.clone(), bad.clone()]);
        let results = vec![
            ToolResult::new(good, completed("call_a", "add", json!(5))),
            ToolResult::new(bad, failed("x", "add", "bad_args", "not JSON")),
        ];
        let request = ModelRequest::new(
            vec![
                Message::system("Be brief."),
                Message::user("Add."),
                Message::assistant(turn),
                Message::ToolResults(results),
                Message::assistant(AssistantTurn::answer("5")),
            ],
            vec![],
        )
        .with_max_output_tokens(50);
        let body = model().request_body(&request).unwrap();
        assert_eq!(
            body,
            json!({
                "temperature": 0, "model": "m",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Add."},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": "{\"a\":2}"}},
                        {"id": "call.b", "type": "function", "function": {"name": "add", "arguments": "{}"}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_a", "content": "5"},
                    {"role": "tool", "tool_call_id": "call.b", "content": "error (bad_args): not JSON"},
                    {"role": "assistant", "content": "5"},
                ],
                "max_tokens": 50,
                "stream": true, "stream_options": {"include_usage": true},
            })
        );
    }

    #[test]
    fn openai_itself_needs_a_key() {
        assert_eq!(
            OpenAiChatModel::builder("gpt-4.1")
                .build()
                .unwrap_err()
                .to_string(),
            "no API key for OpenAI Chat Completions: set one with `api_key`, or in OPENAI_API_KEY"
        );
        let debug = format!(
            "{:?}",
            OpenAiChatModel::builder("gpt-4.1")
                .api_key("sk-secret")
                .build()
                .unwrap()
        );
        assert!(!debug.contains("sk-secret"), "{debug}");
    }
}

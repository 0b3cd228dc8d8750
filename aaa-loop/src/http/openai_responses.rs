//! [`OpenAiResponsesModel`]: a [`Model`] over OpenAI Responses.

use std::fmt;

use aaa_tools::export::Format;
use reqwest::header::AUTHORIZATION;
use serde_json::{Map, Value, json};

use super::endpoint::{Endpoint, Reply};
use super::settings::{Settings, settings_setters};
use super::sse;
use super::{BuildError, export_tools};
use crate::model::{Message, Model, ModelError, ModelFuture, ModelRequest};
use crate::openai_responses;
use crate::provider::Provider;
use crate::turn::AssistantTurn;

/// A [`Model`] that asks an OpenAI Responses endpoint (`POST {base_url}/responses`).
///
/// The request is `model`, `input` (the whole conversation as input items, rendered
/// below), `tools` (each tool exported with [`Format::OpenAiResponses`]), and
/// `max_output_tokens` when the request limits output. The answer is read with
/// [`openai_responses::parse`] (or its `Assembler` when streaming).
/// `Authorization: Bearer <key>` is sent when a key is set; OpenAI's default URL
/// needs one.
///
/// The client is stateless: each turn sends the whole conversation, so a loop that
/// resumes on another machine asks the same thing, and no `previous_response_id` is
/// kept anywhere. Input items: system and user messages as messages of those roles;
/// each assistant turn as an `assistant` message (its text) and a `function_call`
/// item per call (a call whose arguments were unreadable is echoed with `{}`); each
/// turn's results as `function_call_output` items
/// ([`openai_responses::render_outcomes`]). A reasoning model's `reasoning` items are
/// kept with their turn ([`AssistantTurn::reasoning`]) and sent back as they came,
/// before the turn's message and calls, so the model keeps its reasoning across tool
/// calls. OpenAI stores responses unless told otherwise: to opt out, add
/// `.body_field("store", false.into())` and
/// `.body_field("include", json!(["reasoning.encrypted_content"]))`, so that the
/// reasoning comes back encrypted and can be sent back without the stored copy.
///
/// ```no_run
/// use aaa_loop::http::OpenAiResponsesModel;
///
/// # fn main() -> Result<(), aaa_loop::http::BuildError> {
/// let model = OpenAiResponsesModel::from_env("gpt-4.1-mini")
///     .body_field("store", false.into())
///     .build()?;
/// # drop(model); Ok(()) }
/// ```
#[derive(Clone)]
pub struct OpenAiResponsesModel {
    endpoint: Endpoint,
    model: String,
    strict: bool,
    body: Map<String, Value>,
    streaming: bool,
}

impl OpenAiResponsesModel {
    /// The base URL used when none is set: OpenAI's.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A builder for a client of `model` at OpenAI's URL.
    pub fn builder(model: impl Into<String>) -> OpenAiResponsesBuilder {
        OpenAiResponsesBuilder {
            settings: Settings::new(Self::DEFAULT_BASE_URL),
            model: model.into(),
            strict: false,
        }
    }

    /// [`builder`](Self::builder), with the key from `OPENAI_API_KEY` and the base
    /// URL from `OPENAI_BASE_URL` when they are set.
    pub fn from_env(model: impl Into<String>) -> OpenAiResponsesBuilder {
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
    /// use aaa_loop::http::OpenAiResponsesModel;
    /// use aaa_loop::{Message, ModelRequest};
    /// use aaa_tools::{tool, tools};
    ///
    /// /// Add two integers.
    /// #[tool]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// let model = OpenAiResponsesModel::builder("gpt-4.1-mini").api_key("sk-test").build()?;
    /// let body = model.request_body(&ModelRequest::new(vec![Message::user("2 + 3?")], tools![add]))?;
    /// assert_eq!(body["input"][0], serde_json::json!({"role": "user", "content": "2 + 3?"}));
    /// assert_eq!((body["tools"][0]["type"].as_str(), body["tools"][0]["name"].as_str()), (Some("function"), Some("add")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn request_body(&self, request: &ModelRequest) -> Result<Value, ModelError> {
        let mut body = self.body.clone();
        body.insert("model".into(), json!(self.model));
        body.insert("input".into(), Value::Array(input(&request.messages)?));
        let tools = export_tools(
            &request.tools,
            Format::OpenAiResponses {
                strict: self.strict,
            },
        )?;
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(max) = request.max_output_tokens {
            body.insert("max_output_tokens".into(), json!(max));
        }
        if self.streaming {
            body.insert("stream".into(), json!(true));
        }
        Ok(Value::Object(body))
    }
}

impl Model for OpenAiResponsesModel {
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
        return openai_responses::parse_slice(&reply.body);
    }
    let mut stream = openai_responses::Assembler::new();
    for data in sse::event_data(&reply.body) {
        stream.push_slice(&data)?;
    }
    stream.finish()
}

/// The conversation as Responses input items.
fn input(conversation: &[Message]) -> Result<Vec<Value>, ModelError> {
    let mut out = Vec::with_capacity(conversation.len());
    for message in conversation {
        match message {
            Message::System(text) => out.push(json!({"role": "system", "content": text})),
            Message::User(text) => out.push(json!({"role": "user", "content": text})),
            Message::Assistant(turn) => {
                out.extend(turn.reasoning.iter().cloned());
                if let Some(text) = &turn.text {
                    out.push(json!({"role": "assistant", "content": text}));
                }
                out.extend(turn.calls.iter().map(|call| {
                    json!({
                        "type": "function_call",
                        "call_id": call.answer_id(),
                        "name": call.name,
                        "arguments": super::arguments_text(call),
                    })
                }));
            }
            Message::ToolResults(results) => {
                let (calls, outcomes): (Vec<_>, Vec<_>) = results
                    .iter()
                    .map(|result| (result.call.clone(), result.outcome.clone()))
                    .unzip();
                out.extend(openai_responses::render_outcomes(&calls, &outcomes)?);
            }
        }
    }
    Ok(out)
}

/// Builds an [`OpenAiResponsesModel`]; from [`OpenAiResponsesModel::builder`].
#[derive(Debug, Clone)]
pub struct OpenAiResponsesBuilder {
    settings: Settings,
    model: String,
    strict: bool,
}

impl OpenAiResponsesBuilder {
    settings_setters!();

    /// Exports the tools in strict mode. Off by default (and written out as
    /// `"strict": false`, since the Responses API's own default is strict): strict
    /// mode makes every parameter required (optional ones nullable) and cannot
    /// express some schemas, and a tool it cannot express fails the turn.
    pub fn strict_tools(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// The client. Fails when OpenAI's own URL is used without a key, when the base
    /// URL or a header is not usable, or when TLS cannot be set up.
    pub fn build(self) -> Result<OpenAiResponsesModel, BuildError> {
        let settings = self.settings;
        let auth = match &settings.api_key {
            Some(key) => vec![(AUTHORIZATION, format!("Bearer {key}"))],
            None if settings.base_url == OpenAiResponsesModel::DEFAULT_BASE_URL => {
                return Err(BuildError::MissingApiKey {
                    provider: Provider::OpenAiResponses,
                    variable: "OPENAI_API_KEY",
                });
            }
            None => Vec::new(),
        };
        Ok(OpenAiResponsesModel {
            endpoint: settings.endpoint("/responses", Provider::OpenAiResponses, auth)?,
            model: self.model,
            strict: self.strict,
            body: settings.body,
            streaming: settings.streaming,
        })
    }
}

impl fmt::Debug for OpenAiResponsesModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiResponsesModel")
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
    use crate::render::fixtures::completed;
    use crate::turn::{ArgumentsOrProblem, ProviderCall};

    #[test]
    fn renders_a_conversation_as_input_items() {
        let call = ProviderCall::new("call_1", "add", ArgumentsOrProblem::from_text(r#"{"a":2}"#));
        let turn = AssistantTurn::tool_calls([call.clone()]).with_text("Adding.");
        let request = ModelRequest::new(
            vec![
                Message::system("Be brief."),
                Message::user("Add."),
                Message::assistant(turn),
                Message::ToolResults(vec![ToolResult::new(
                    call,
                    completed("call_1", "add", json!(2)),
                )]),
            ],
            vec![],
        )
        .with_max_output_tokens(64);
        let model = OpenAiResponsesModel::builder("m")
            .base_url("http://127.0.0.1:9/v1")
            .streaming(true)
            .build()
            .unwrap();
        assert_eq!(
            model.request_body(&request).unwrap(),
            json!({
                "model": "m",
                "input": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Add."},
                    {"role": "assistant", "content": "Adding."},
                    {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{\"a\":2}"},
                    {"type": "function_call_output", "call_id": "call_1", "output": "2"},
                ],
                "max_output_tokens": 64,
                "stream": true,
            })
        );
        assert_eq!(
            OpenAiResponsesModel::builder("m")
                .build()
                .unwrap_err()
                .to_string(),
            "no API key for OpenAI Responses: set one with `api_key`, or in OPENAI_API_KEY"
        );
    }
}

//! [`GeminiModel`]: a [`Model`] over Google's Gemini API (`generateContent`).

use std::fmt;

use aaa_tools::export::Format;
use reqwest::header::HeaderName;
use serde_json::{Map, Value, json};

use super::endpoint::{Endpoint, Reply};
use super::settings::{Settings, settings_setters};
use super::sse;
use super::{BuildError, export_tools};
use crate::error::CodecError;
use crate::gemini;
use crate::model::{Message, Model, ModelError, ModelFuture, ModelRequest};
use crate::provider::Provider;
use crate::turn::AssistantTurn;

/// The `thoughtSignature` sent on the first function call of an echoed model turn
/// whose call came without one: Google's documented value for a call whose real
/// signature the client does not have.
const SKIP_THOUGHT_SIGNATURE: &str = "skip_thought_signature_validator";

/// A [`Model`] that asks Google's Gemini API:
/// `POST {base_url}/v1beta/models/{model}:generateContent`, or
/// `:streamGenerateContent?alt=sse` when [streaming](GeminiBuilder::streaming).
///
/// The request is `contents` (the conversation, rendered below), `systemInstruction`
/// (the conversation's system messages, joined by blank lines, as one text part),
/// `tools: [{"functionDeclarations": [...]}]` (each tool exported with
/// [`Format::Gemini`]) and `generationConfig.maxOutputTokens` when the request limits
/// output. The key goes in the `x-goog-api-key` header. The answer is read with
/// [`gemini::parse`] (or its [`Assembler`](gemini::Assembler) when streaming), given
/// the request's [`turn`](ModelRequest::turn) so that calls Gemini sends without an
/// `id` get the same [positional ids](gemini::positional_call_id) whenever the turn is
/// read. A model name may be given with its `models/` or `tunedModels/` prefix, as
/// Google's SDKs accept it.
///
/// The conversation: user messages as `user` contents of one text part; each
/// assistant turn as a `model` content of a text part and a `functionCall` part per
/// call (`name`, `args`, and `id` when the call came with one; a call whose arguments
/// were unreadable is echoed with `{}`: `args` must be an object; a turn with neither
/// text nor calls is left out, since Gemini refuses a content without parts); each
/// turn's results as one `user` content of `functionResponse` parts
/// ([`gemini::render_outcomes`]). Thought parts are not sent back (an
/// [`AssistantTurn`] does not keep them).
///
/// Fields added with [`body_field`](GeminiBuilder::body_field) go into every body. Two
/// are merged rather than replaced: a `generationConfig` object (`temperature`,
/// `thinkingConfig`, ...) gets `maxOutputTokens` added when the request has a limit,
/// and a `tools` array (Google Search, code execution) gets the function declarations
/// appended. `contents` and `systemInstruction` (when the conversation has system
/// messages) are the client's.
///
/// # Tool schemas
///
/// Tools are declared with `parameters`, the OpenAPI 3.0 subset
/// [`aaa_tools::export`] writes for [`Format::Gemini`] (references inlined,
/// uppercase types, `nullable`, unsupported keywords dropped; a tool without
/// parameters has no `parameters`), not with `parametersJsonSchema`: `parameters` is
/// what every Gemini model and the Gemini-format gateways accept, and what the
/// export checks against Gemini's rules. What the subset drops is still enforced, by
/// the handler's check of the arguments against the tool's full schema. A tool the
/// subset cannot express (a recursive type, a map, arbitrary JSON) fails the turn with
/// [`ModelError::Other`] naming the tool and the reason, before anything is sent.
///
/// # Thought signatures
///
/// Thinking models (Gemini 2.5 and 3) sign their function calls (`thoughtSignature`)
/// and ask for the signature back with the conversation; Gemini 3 answers 400 when
/// the first call of a model turn comes back without one. The codec keeps each call's
/// signature ([`ProviderCall::signature`](crate::ProviderCall::signature)), the turn
/// is recorded with it, and the client sends it back on its call, so the model keeps
/// its reasoning across turns, a resumed loop included. A turn whose first call has
/// none (a turn from another provider, a scripted one, or one recorded before
/// signatures were kept) gets the value Google documents for a call whose signature
/// is not at hand, `skip_thought_signature_validator`, as Google's own Gemini CLI
/// does for histories it rebuilt: accepted by every model, at some cost in quality on
/// long tool chains.
///
/// # Errors and retries
///
/// Google's error body is `{"error": {"code", "message", "status"}}`, so a
/// [`ModelError::Status`] reads `"<status>: <message>"`: a bad key is
/// `400 INVALID_ARGUMENT: API key not valid. ...` (Google answers it with 400, not
/// 401, and like every 400 it is not retried); `429 RESOURCE_EXHAUSTED`,
/// `500 INTERNAL` and `503 UNAVAILABLE` are retried as the
/// [`RetryPolicy`](crate::http::RetryPolicy) says, after the wait the response asked
/// for (a `Retry-After` header, or the `RetryInfo.retryDelay` Google's 429s carry in
/// their body), else with exponential backoff. A finish reason such as `SAFETY`,
/// `RECITATION` or `PROHIBITED_CONTENT`, and a prompt blocked through
/// `promptFeedback.blockReason`, are a turn with
/// [`StopReason::Refused`](crate::StopReason::Refused), not an error.
///
/// ```no_run
/// use aaa_loop::http::GeminiModel;
///
/// # fn main() -> Result<(), aaa_loop::http::BuildError> {
/// // The key from GEMINI_API_KEY (else GOOGLE_API_KEY), the base URL from
/// // GEMINI_BASE_URL when set:
/// let model = GeminiModel::from_env("gemini-2.5-flash")
///     .body_field("generationConfig", serde_json::json!({"temperature": 0.2}))
///     .build()?;
/// # drop(model); Ok(()) }
/// ```
#[derive(Clone)]
pub struct GeminiModel {
    endpoint: Endpoint,
    model: String,
    body: Map<String, Value>,
}

impl GeminiModel {
    /// The base URL used when none is set: Google's.
    pub const DEFAULT_BASE_URL: &'static str = "https://generativelanguage.googleapis.com";

    /// The API version in the path unless another is set.
    pub const DEFAULT_API_VERSION: &'static str = "v1beta";

    /// A builder for a client of `model` (`gemini-2.5-flash`, or
    /// `models/gemini-2.5-flash`) at Google's URL.
    pub fn builder(model: impl Into<String>) -> GeminiBuilder {
        GeminiBuilder {
            settings: Settings::new(Self::DEFAULT_BASE_URL),
            model: model.into(),
            api_version: Self::DEFAULT_API_VERSION.to_owned(),
        }
    }

    /// [`builder`](Self::builder), with the key from `GEMINI_API_KEY` (else
    /// `GOOGLE_API_KEY`) and the base URL from `GEMINI_BASE_URL` (else
    /// `GOOGLE_GEMINI_BASE_URL`, the name Google's SDKs read) when they are set.
    ///
    /// Google's SDKs prefer `GOOGLE_API_KEY` when both keys are set; this client
    /// prefers `GEMINI_API_KEY`, the name Google's Gemini API docs ask users to set,
    /// and falls back to the other.
    pub fn from_env(model: impl Into<String>) -> GeminiBuilder {
        let mut builder = Self::builder(model);
        builder.settings = with_env(builder.settings, |name| std::env::var(name).ok());
        builder
    }

    /// The model name, as given to the builder.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The JSON body this client sends for `request`.
    ///
    /// ```
    /// use aaa_loop::http::GeminiModel;
    /// use aaa_loop::{Message, ModelRequest};
    /// use aaa_tools::{tool, tools};
    /// use serde_json::json;
    ///
    /// /// Add two integers.
    /// #[tool]
    /// async fn add(a: i64, b: i64) -> i64 { a + b }
    ///
    /// let model = GeminiModel::builder("gemini-2.5-flash").api_key("test-key").build()?;
    /// let request = ModelRequest::new(vec![Message::system("Be brief."), Message::user("2 + 3?")], tools![add])
    ///     .with_max_output_tokens(256);
    /// let body = model.request_body(&request)?;
    /// assert_eq!(body["systemInstruction"], json!({"parts": [{"text": "Be brief."}]}));
    /// assert_eq!(body["contents"][0], json!({"role": "user", "parts": [{"text": "2 + 3?"}]}));
    /// let add = &body["tools"][0]["functionDeclarations"][0];
    /// assert_eq!((add["name"].as_str(), add["parameters"]["type"].as_str()), (Some("add"), Some("OBJECT")));
    /// assert_eq!(body["generationConfig"]["maxOutputTokens"], 256);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn request_body(&self, request: &ModelRequest) -> Result<Value, ModelError> {
        let mut body = self.body.clone();
        let (system, contents) = contents(&request.messages)?;
        body.insert("contents".into(), Value::Array(contents));
        if !system.is_empty() {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system.join("\n\n")}]}),
            );
        }
        let declarations = export_tools(&request.tools, Format::Gemini)?;
        if !declarations.is_empty() {
            let entry = json!({ "functionDeclarations": declarations });
            match body.get_mut("tools") {
                Some(Value::Array(tools)) => tools.push(entry),
                _ => {
                    body.insert("tools".into(), json!([entry]));
                }
            }
        }
        if let Some(max) = request.max_output_tokens {
            match body.get_mut("generationConfig") {
                Some(Value::Object(config)) => {
                    config.insert("maxOutputTokens".into(), json!(max));
                }
                _ => {
                    body.insert("generationConfig".into(), json!({ "maxOutputTokens": max }));
                }
            }
        }
        Ok(Value::Object(body))
    }
}

impl Model for GeminiModel {
    fn turn<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            let body = self.request_body(request)?;
            self.endpoint
                .post_turn(&body, |reply| decode(reply, request.turn))
                .await
        })
    }
}

/// The settings with the key and base URL from the environment (`lookup` reads a
/// variable): Gemini's names first, Google's SDK names as the fallback.
fn with_env(settings: Settings, lookup: impl Fn(&str) -> Option<String>) -> Settings {
    settings
        .with_env("GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", &lookup)
        .with_env("GEMINI_API_KEY", "GEMINI_BASE_URL", &lookup)
}

/// The turn in a successful reply of turn `turn`: a whole response, server-sent
/// chunks, or a JSON array of chunks (what `streamGenerateContent` answers when a
/// proxy drops `alt=sse`).
fn decode(reply: &Reply, turn: u32) -> Result<AssistantTurn, CodecError> {
    let array = reply
        .body
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'[');
    if !reply.event_stream && !array {
        return gemini::parse_slice(&reply.body, turn);
    }
    let mut stream = gemini::Assembler::new(turn);
    if reply.event_stream {
        for data in sse::event_data(&reply.body) {
            stream.push_slice(&data)?;
        }
    } else {
        stream.push_slice(&reply.body)?;
    }
    stream.finish()
}

/// The system texts, and the rest of the conversation as Gemini contents.
fn contents(conversation: &[Message]) -> Result<(Vec<&str>, Vec<Value>), ModelError> {
    let (mut system, mut out) = (Vec::new(), Vec::with_capacity(conversation.len()));
    for message in conversation {
        match message {
            Message::System(text) => system.push(text.as_str()),
            Message::User(text) => out.push(json!({"role": "user", "parts": [{"text": text}]})),
            Message::Assistant(turn) => out.extend(model_content(turn)),
            Message::ToolResults(results) => {
                let (calls, outcomes): (Vec<_>, Vec<_>) = results
                    .iter()
                    .map(|result| (result.call.clone(), result.outcome.clone()))
                    .unzip();
                out.extend(gemini::render_outcomes(&calls, &outcomes)?);
            }
        }
    }
    Ok((system, out))
}

/// An assistant turn as the `model` content that made it; none when it has no text
/// and no calls.
fn model_content(turn: &AssistantTurn) -> Option<Value> {
    let mut parts = Vec::with_capacity(turn.calls.len() + 1);
    if let Some(text) = turn.text.as_deref().filter(|text| !text.is_empty()) {
        parts.push(json!({ "text": text }));
    }
    for (position, call) in turn.calls.iter().enumerate() {
        let args = call.arguments.arguments().cloned().unwrap_or_default();
        let mut function_call = json!({"name": call.name, "args": args});
        if let Some(id) = &call.provider_id {
            function_call["id"] = json!(id);
        }
        let mut part = json!({ "functionCall": function_call });
        match (&call.signature, position) {
            (Some(signature), _) => part["thoughtSignature"] = json!(signature),
            (None, 0) => part["thoughtSignature"] = json!(SKIP_THOUGHT_SIGNATURE),
            (None, _) => {}
        }
        parts.push(part);
    }
    (!parts.is_empty()).then(|| json!({"role": "model", "parts": parts}))
}

/// `models/<name>` for a bare name; a `models/` or `tunedModels/` name as it is. The
/// name must be one path segment of letters, digits, `-`, `.` and `_`.
fn model_path(model: &str) -> Result<String, BuildError> {
    let invalid = |reason: String| BuildError::InvalidModel {
        model: model.to_owned(),
        reason,
    };
    let (prefix, name) = match model.split_once('/') {
        Some((prefix @ ("models" | "tunedModels"), name)) => (prefix, name),
        Some((prefix, _)) => {
            return Err(invalid(format!(
                "`{prefix}/` is not a model collection (use a bare name, `models/...` or \
                 `tunedModels/...`)"
            )));
        }
        None => ("models", model),
    };
    if name.is_empty() {
        return Err(invalid("the name is empty".to_owned()));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
    {
        return Err(invalid(format!(
            "{bad:?} cannot be part of a model name in the URL (letters, digits, `-`, `.` \
             and `_`)"
        )));
    }
    Ok(format!("{prefix}/{name}"))
}

/// Builds a [`GeminiModel`]; from [`GeminiModel::builder`].
#[derive(Debug, Clone)]
pub struct GeminiBuilder {
    settings: Settings,
    model: String,
    api_version: String,
}

impl GeminiBuilder {
    settings_setters!();

    /// Sets the API version in the path (`v1beta` by default; `v1alpha` for
    /// preview features, `v1` for the stable subset).
    pub fn api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = version.into();
        self
    }

    /// The client. Fails when Google's own URL is used without a key, when the model
    /// name or the API version cannot go in the URL, when the base URL or a header is
    /// not usable, or when TLS cannot be set up.
    pub fn build(self) -> Result<GeminiModel, BuildError> {
        let settings = self.settings;
        let model = model_path(&self.model)?;
        let version = &self.api_version;
        if version.is_empty() || !version.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(BuildError::InvalidUrl {
                url: settings.base_url.clone(),
                reason: format!(
                    "the API version {version:?} is not a path segment of letters and digits \
                     (such as v1beta)"
                ),
            });
        }
        let auth = match &settings.api_key {
            Some(key) => vec![(HeaderName::from_static("x-goog-api-key"), key.clone())],
            None if settings.base_url == GeminiModel::DEFAULT_BASE_URL => {
                return Err(BuildError::MissingApiKey {
                    provider: Provider::Gemini,
                    variable: "GEMINI_API_KEY (or GOOGLE_API_KEY)",
                });
            }
            None => Vec::new(),
        };
        let method = if settings.streaming {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        let path = format!("/{version}/{model}:{method}");
        Ok(GeminiModel {
            endpoint: settings.endpoint(&path, Provider::Gemini, auth)?,
            model: self.model,
            body: settings.body,
        })
    }
}

impl fmt::Debug for GeminiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiModel")
            .field("url", &self.endpoint.url.as_str())
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolResult;
    use crate::render::fixtures::{completed, failed};
    use crate::turn::{ArgumentsOrProblem, ProviderCall, StopReason};

    fn local(model: &str) -> GeminiBuilder {
        GeminiModel::builder(model).base_url("http://127.0.0.1:9")
    }

    #[test]
    fn renders_system_apart_and_turns_as_model_contents() {
        let unnamed = gemini::parse(
            &json!({"candidates": [{"finishReason": "STOP", "content": {"parts": [
                {"functionCall": {"name": "add", "args": {"a": 2, "b": 3}}},
            ]}}]}),
            0,
        )
        .unwrap();
        let named = ProviderCall::new("fc-1", "add", ArgumentsOrProblem::from_text("[1]"));
        let second = ProviderCall::new("fc-2", "add", ArgumentsOrProblem::from_text("{}"))
            .with_signature("sig-2");
        let refused = AssistantTurn::tool_calls([]).with_stop(StopReason::Refused("no".into()));
        let request = ModelRequest::new(
            vec![
                Message::system("Be brief."),
                Message::user("Add."),
                Message::system("Use tools."),
                Message::assistant(unnamed.clone().with_text("Adding.")),
                Message::ToolResults(vec![ToolResult::new(
                    unnamed.calls[0].clone(),
                    completed("x--g0-0", "add", json!(5)),
                )]),
                Message::assistant(AssistantTurn::tool_calls([named.clone(), second.clone()])),
                Message::ToolResults(vec![
                    ToolResult::new(named, failed("x", "add", "bad_args", "an array")),
                    ToolResult::new(second, completed("fc-2", "add", json!({"sum": 0}))),
                ]),
                Message::assistant(refused),
            ],
            vec![],
        );
        let model = local("gemini-2.5-flash").build().unwrap();
        assert_eq!(
            model.request_body(&request).unwrap(),
            json!({
                "contents": [
                    {"role": "user", "parts": [{"text": "Add."}]},
                    {"role": "model", "parts": [
                        {"text": "Adding."},
                        {"functionCall": {"name": "add", "args": {"a": 2, "b": 3}},
                         "thoughtSignature": "skip_thought_signature_validator"},
                    ]},
                    {"role": "user", "parts": [
                        {"functionResponse": {"name": "add", "response": {"result": 5}}},
                    ]},
                    {"role": "model", "parts": [
                        {"functionCall": {"name": "add", "args": {}, "id": "fc-1"},
                         "thoughtSignature": "skip_thought_signature_validator"},
                        {"functionCall": {"name": "add", "args": {}, "id": "fc-2"},
                         "thoughtSignature": "sig-2"},
                    ]},
                    {"role": "user", "parts": [
                        {"functionResponse": {"name": "add", "response": {"error": "error (bad_args): an array"}, "id": "fc-1"}},
                        {"functionResponse": {"name": "add", "response": {"sum": 0}, "id": "fc-2"}},
                    ]},
                ],
                "systemInstruction": {"parts": [{"text": "Be brief.\n\nUse tools."}]},
            })
        );
    }

    #[test]
    fn generation_config_and_tools_set_by_the_user_are_merged() {
        /// Add two integers.
        #[aaa_tools::tool]
        async fn add(a: i64, b: i64) -> i64 {
            a + b
        }

        let request = ModelRequest::new(vec![Message::user("Hi")], aaa_tools::tools![add])
            .with_max_output_tokens(64);
        let model = local("gemini-2.5-flash")
            .body_field("generationConfig", json!({"temperature": 0}))
            .body_field("tools", json!([{"googleSearch": {}}]))
            .build()
            .unwrap();
        let body = model.request_body(&request).unwrap();
        assert_eq!(
            body["generationConfig"],
            json!({"temperature": 0, "maxOutputTokens": 64})
        );
        assert_eq!(body["tools"][0], json!({"googleSearch": {}}));
        assert_eq!(body["tools"][1]["functionDeclarations"][0]["name"], "add");
        // A field of another shape is replaced, and nothing is added without a limit.
        let model = local("m").body_field("generationConfig", json!(7)).build();
        let body = model.unwrap().request_body(&request).unwrap();
        assert_eq!(body["generationConfig"], json!({"maxOutputTokens": 64}));
        let body = local("m")
            .build()
            .unwrap()
            .request_body(&ModelRequest::new(vec![], vec![]))
            .unwrap();
        assert_eq!(body, json!({"contents": []}));
    }

    #[test]
    fn model_names_and_versions_go_in_the_path_or_are_refused() {
        let url = |builder: GeminiBuilder| builder.build().unwrap().endpoint.url.to_string();
        assert_eq!(
            url(local("gemini-2.5-flash")),
            "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert_eq!(
            url(local("models/gemini-2.0-flash-001").streaming(true)),
            "http://127.0.0.1:9/v1beta/models/gemini-2.0-flash-001:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            url(local("tunedModels/my_model-7").api_version("v1")),
            "http://127.0.0.1:9/v1/tunedModels/my_model-7:generateContent"
        );
        let refused = |builder: GeminiBuilder| builder.build().unwrap_err().to_string();
        assert_eq!(
            refused(local("gemini 2.5")),
            "the model name \"gemini 2.5\" is not usable: ' ' cannot be part of a model name \
             in the URL (letters, digits, `-`, `.` and `_`)"
        );
        assert_eq!(
            refused(local("gemini:generateContent?key=x")),
            "the model name \"gemini:generateContent?key=x\" is not usable: ':' cannot be part \
             of a model name in the URL (letters, digits, `-`, `.` and `_`)"
        );
        assert_eq!(
            refused(local("")),
            "the model name \"\" is not usable: the name is empty"
        );
        assert_eq!(
            refused(local("models/")),
            "the model name \"models/\" is not usable: the name is empty"
        );
        assert_eq!(
            refused(local("publishers/google/models/gemini")),
            "the model name \"publishers/google/models/gemini\" is not usable: `publishers/` is \
             not a model collection (use a bare name, `models/...` or `tunedModels/...`)"
        );
        assert_eq!(
            refused(local("models/a/b")),
            "the model name \"models/a/b\" is not usable: '/' cannot be part of a model name in \
             the URL (letters, digits, `-`, `.` and `_`)"
        );
        assert_eq!(
            refused(local("gemini").api_version("v1/../x")),
            "the base URL \"http://127.0.0.1:9\" is not usable: the API version \"v1/../x\" is \
             not a path segment of letters and digits (such as v1beta)"
        );
    }

    #[test]
    fn the_key_comes_from_gemini_api_key_else_google_api_key() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            with_env(Settings::new(GeminiModel::DEFAULT_BASE_URL), move |name| {
                vars.iter()
                    .find(|(var, _)| *var == name)
                    .map(|(_, value)| (*value).to_owned())
            })
        };
        let both = env(&[
            ("GEMINI_API_KEY", "gemini-key"),
            ("GOOGLE_API_KEY", "google-key"),
            ("GOOGLE_GEMINI_BASE_URL", "http://sdk-proxy"),
        ]);
        assert_eq!(
            (both.api_key.as_deref(), both.base_url.as_str()),
            (Some("gemini-key"), "http://sdk-proxy")
        );
        let google = env(&[
            ("GOOGLE_API_KEY", "google-key"),
            ("GEMINI_BASE_URL", "http://proxy"),
            ("GOOGLE_GEMINI_BASE_URL", "http://sdk-proxy"),
        ]);
        assert_eq!(
            (google.api_key.as_deref(), google.base_url.as_str()),
            (Some("google-key"), "http://proxy")
        );
        let none = env(&[("GEMINI_API_KEY", " ")]);
        assert_eq!(none.api_key, None);
    }

    #[test]
    fn google_itself_needs_a_key_and_debug_hides_it() {
        assert_eq!(
            GeminiModel::builder("gemini-2.5-flash")
                .build()
                .unwrap_err()
                .to_string(),
            "no API key for Gemini generateContent: set one with `api_key`, or in \
             GEMINI_API_KEY (or GOOGLE_API_KEY)"
        );
        let model = GeminiModel::builder("gemini-2.5-flash")
            .api_key("AIza-secret")
            .build()
            .unwrap();
        let debug = format!("{model:?}");
        assert!(
            !debug.contains("secret") && debug.contains("models/gemini-2.5-flash"),
            "{debug}"
        );
        assert_eq!(model.model(), "gemini-2.5-flash");
    }
}

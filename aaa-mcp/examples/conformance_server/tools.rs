//! The tools the MCP conformance suite calls, as aaa-tools tools: every call of them
//! goes through the engine (its pool, timeout, guard), like any tool's.

#![allow(deprecated)] // sampling and roots: deprecated by SEP-2577, still checked

use std::time::Duration;

use aaa_mcp::{McpCaller, McpReply, McpRequest};
use aaa_tools::{Progress, Tool, ToolContext, ToolError, tool, tools};
use rmcp::model::{
    ContentBlock, CreateMessageRequest, CreateMessageRequestParams, ElicitRequest,
    ElicitRequestParams, ElicitationSchema, InputRequest, InputRequests, ListRootsRequest,
    ResourceContents, SamplingMessage,
};
use serde_json::{Value, json};

/// A 1x1 red PNG.
pub(crate) const IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";
/// A silent WAV.
const AUDIO: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

/// Returns simple text content.
#[tool]
async fn test_simple_text() -> &'static str {
    "This is a simple text response for testing."
}

/// Returns image content.
#[tool]
async fn test_image_content() -> McpReply {
    McpReply::content(vec![ContentBlock::image(IMAGE, "image/png")])
}

/// Returns audio content.
#[tool]
async fn test_audio_content() -> McpReply {
    McpReply::content(vec![ContentBlock::audio(AUDIO, "audio/wav")])
}

/// Returns embedded resource content.
#[tool]
async fn test_embedded_resource() -> McpReply {
    McpReply::content(vec![ContentBlock::resource(text_resource(
        "test://embedded-resource",
        "text/plain",
        "This is an embedded resource content.",
    ))])
}

/// Returns multiple content types.
#[tool]
async fn test_multiple_content_types() -> McpReply {
    McpReply::content(vec![
        ContentBlock::text("Multiple content types test:"),
        ContentBlock::image(IMAGE, "image/png"),
        ContentBlock::resource(text_resource(
            "test://mixed-content-resource",
            "application/json",
            r#"{"test":"data","value":123}"#,
        )),
    ])
}

/// Sends logging notifications during execution.
#[tool]
async fn test_tool_with_logging(ctx: ToolContext) -> Result<&'static str, ToolError> {
    let caller = session(&ctx)?;
    for message in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ] {
        #[allow(deprecated)] // logging, still part of the protocols this serves
        let level = rmcp::model::LoggingLevel::Info;
        caller
            .log(level, "conformance-server", json!(message))
            .await
            .map_err(ToolError::internal)?;
        // Spread out, as the scenario expects messages during a running call.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok("Logging test completed")
}

/// Always returns an error.
#[tool]
async fn test_error_handling() -> Result<(), ToolError> {
    Err(ToolError::new(
        "This tool intentionally returns an error for testing",
    ))
}

/// Reports progress notifications.
#[tool]
async fn test_tool_with_progress(ctx: ToolContext) -> Result<&'static str, ToolError> {
    for (value, message) in [(0.0, "Starting"), (50.0, "Halfway"), (100.0, "Complete")] {
        ctx.report_progress(Progress::new(value).total(100.0).message(message))
            .await
            .map_err(ToolError::internal)?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok("Progress test completed")
}

/// Requests LLM sampling from client.
///
/// # Arguments
/// * `prompt` - The prompt to send.
#[tool]
async fn test_sampling(ctx: ToolContext, prompt: String) -> Result<String, ToolError> {
    let caller = session(&ctx)?;
    let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], 100);
    #[allow(deprecated)] // sampling, still part of the protocols this serves
    let result = caller.peer().create_message(params).await;
    let result = result.map_err(|e| ToolError::new(format!("Sampling error: {e}")))?;
    let value = serde_json::to_value(&result).map_err(ToolError::internal)?;
    let text = value
        .pointer("/content/text")
        .and_then(Value::as_str)
        .unwrap_or("No text response");
    Ok(format!("LLM response: {text}"))
}

/// Requests user input from client.
///
/// # Arguments
/// * `message` - The message to show.
#[tool]
async fn test_elicitation(ctx: ToolContext, message: String) -> Result<String, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    });
    let (action, content) = elicit(&ctx, &message, schema).await?;
    Ok(format!("User response: action={action}, content={content}"))
}

/// Tests elicitation with default values (SEP-1034).
#[tool]
async fn test_elicitation_sep1034_defaults(ctx: ToolContext) -> Result<String, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User's name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User's age", "default": 30},
            "score": {"type": "number", "description": "User's score", "default": 95.5},
            "status": {
                "type": "string", "description": "User's status",
                "enum": ["active", "inactive", "pending"], "default": "active"
            },
            "verified": {"type": "boolean", "description": "Whether user is verified", "default": true}
        }
    });
    let (action, content) =
        elicit(&ctx, "Please provide values (all have defaults)", schema).await?;
    Ok(format!(
        "Elicitation completed: action={action}, content={content}"
    ))
}

/// Tests enum schema improvements (SEP-1330).
#[tool]
async fn test_elicitation_sep1330_enums(ctx: ToolContext) -> Result<String, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"}
                ]
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
            },
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}
                    ]
                }
            }
        }
    });
    let (action, _) = elicit(&ctx, "Test enum schema improvements", schema).await?;
    Ok(format!("Enum elicitation completed: action={action}"))
}

/// Tests SSE reconnection behavior.
#[tool]
async fn test_reconnection() -> &'static str {
    tokio::time::sleep(Duration::from_millis(100)).await;
    "Reconnection test completed"
}

/// The session of the call, which these tools need (they run in the server's process).
fn session(ctx: &ToolContext) -> Result<McpCaller, ToolError> {
    McpCaller::of(ctx).ok_or_else(|| {
        ToolError::new("this tool talks to the MCP client, so it must be called over MCP")
    })
}

/// Asks the client's user to fill `schema`; the action and the content, as text.
async fn elicit(
    ctx: &ToolContext,
    message: &str,
    schema: Value,
) -> Result<(String, String), ToolError> {
    let caller = session(ctx)?;
    let schema: ElicitationSchema = serde_json::from_value(schema).map_err(ToolError::internal)?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.to_owned(),
        requested_schema: schema,
    };
    let result = caller
        .peer()
        .create_elicitation(params)
        .await
        .map_err(|e| ToolError::new(format!("Elicitation error: {e}")))?;
    let value = serde_json::to_value(&result).map_err(ToolError::internal)?;
    let action = value["action"].as_str().unwrap_or("unknown").to_owned();
    let content = value.get("content").cloned().unwrap_or(Value::Null);
    Ok((action, content.to_string()))
}

fn text_resource(uri: &str, mime: &str, text: &str) -> ResourceContents {
    ResourceContents::TextResourceContents {
        uri: uri.into(),
        mime_type: Some(mime.into()),
        text: text.into(),
        meta: None,
    }
}

// Protocol 2026-07-28: input asked for with `input_required` results (SEP-2322). The
// server seals each tool's state and checks it comes back unchanged.

pub(crate) fn elicitation(message: &str, properties: Value, required: Value) -> InputRequest {
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object", "properties": properties, "required": required,
    }))
    .expect("a valid elicitation schema");
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.into(),
            requested_schema: schema,
        },
    ))
}

fn sampling(prompt: &str) -> InputRequest {
    InputRequest::CreateMessage(CreateMessageRequest::new(CreateMessageRequestParams::new(
        vec![SamplingMessage::user_text(prompt)],
        100,
    )))
}

fn roots() -> InputRequest {
    InputRequest::ListRoots(ListRootsRequest::default())
}

fn name_request() -> InputRequest {
    elicitation(
        "What is your name?",
        json!({"name": {"type": "string"}}),
        json!(["name"]),
    )
}

pub(crate) fn ask(pairs: Vec<(&str, InputRequest)>, state: Option<Value>) -> McpReply {
    let requests: InputRequests = pairs
        .into_iter()
        .map(|(key, request)| (key.to_owned(), request))
        .collect();
    McpReply::input_required(requests, state)
}

pub(crate) fn request_of(ctx: &ToolContext) -> McpRequest {
    McpRequest::of(ctx).unwrap_or_default()
}

pub(crate) fn text(value: String) -> McpReply {
    McpReply::content(vec![ContentBlock::text(value)])
}

/// Requires an elicitation input via InputRequiredResult (SEP-2322).
#[tool]
async fn test_input_required_result_elicitation(ctx: ToolContext) -> McpReply {
    greet_by_name(&ctx)
}

/// Asks the user's name (`user_name`), then greets them by it: an `input_required`
/// exchange of two rounds.
pub(crate) fn greet_by_name(ctx: &ToolContext) -> McpReply {
    let request = request_of(ctx);
    match request.input("user_name") {
        Some(_) => {
            let name = answered_name(&request, "user_name");
            text(format!("Hello, {}!", name.as_deref().unwrap_or("friend")))
        }
        None => ask(vec![("user_name", name_request())], None),
    }
}

/// The `name` the user gave in their answer to the input request `key`.
pub(crate) fn answered_name(request: &McpRequest, key: &str) -> Option<String> {
    let name = request.input(key)?.get("content")?.get("name")?;
    name.as_str().map(str::to_owned)
}

/// Requires a sampling input via InputRequiredResult (SEP-2322).
#[tool]
async fn test_input_required_result_sampling(ctx: ToolContext) -> McpReply {
    let request = request_of(&ctx);
    match request.input("capital_question") {
        Some(answer) => {
            let reply = answer
                .get("content")
                .and_then(|c| c.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("(no sampling text)");
            text(format!("Sampling response: {reply}"))
        }
        None => ask(
            vec![(
                "capital_question",
                sampling("What is the capital of France?"),
            )],
            None,
        ),
    }
}

/// Requires a roots/list input via InputRequiredResult (SEP-2322).
#[tool]
async fn test_input_required_result_list_roots(ctx: ToolContext) -> McpReply {
    let request = request_of(&ctx);
    match request.input("client_roots") {
        Some(answer) => {
            let uris: Vec<&str> = answer
                .get("roots")
                .and_then(Value::as_array)
                .map(|roots| {
                    roots
                        .iter()
                        .filter_map(|r| r.get("uri").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            text(format!("Client roots: [{}]", uris.join(", ")))
        }
        None => ask(vec![("client_roots", roots())], None),
    }
}

fn confirm_request() -> InputRequest {
    elicitation(
        "Please confirm",
        json!({"ok": {"type": "boolean"}}),
        json!(["ok"]),
    )
}

/// Round-trips integrity-protected requestState (SEP-2322).
#[tool]
async fn test_input_required_result_request_state(ctx: ToolContext) -> McpReply {
    match request_of(&ctx).state {
        Some(_) => text("Confirmed: state-ok".into()),
        None => ask(
            vec![("confirm", confirm_request())],
            Some(json!({"stage": "confirm"})),
        ),
    }
}

/// Rejects tampered requestState with a JSON-RPC error (SEP-2322).
#[tool]
async fn test_input_required_result_tampered_state(ctx: ToolContext) -> McpReply {
    // The server refuses a state it did not seal before the tool runs.
    test_input_required_result_request_state(ctx).await
}

/// Requires elicitation + sampling + roots inputs in one round (SEP-2322).
#[tool]
async fn test_input_required_result_multiple_inputs(ctx: ToolContext) -> McpReply {
    let request = request_of(&ctx);
    let all = ["user_name", "greeting", "client_roots"]
        .iter()
        .all(|key| request.input(key).is_some());
    if all && request.state.is_some() {
        return text("All inputs received".into());
    }
    ask(
        vec![
            ("user_name", name_request()),
            ("greeting", sampling("Generate a greeting")),
            ("client_roots", roots()),
        ],
        Some(json!({"stage": "gather"})),
    )
}

/// Drives multiple input_required rounds with evolving requestState (SEP-2322).
#[tool]
async fn test_input_required_result_multi_round(ctx: ToolContext) -> McpReply {
    let round = request_of(&ctx)
        .state
        .and_then(|state| state.get("round").and_then(Value::as_i64))
        .unwrap_or(0);
    match round {
        0 => ask(
            vec![(
                "step1",
                elicitation(
                    "Step 1: What is your name?",
                    json!({"name": {"type": "string"}}),
                    json!(["name"]),
                ),
            )],
            Some(json!({"round": 1})),
        ),
        1 => ask(
            vec![(
                "step2",
                elicitation(
                    "Step 2: What is your favorite color?",
                    json!({"color": {"type": "string"}}),
                    json!(["color"]),
                ),
            )],
            Some(json!({"round": 2})),
        ),
        _ => text("Multi-round flow complete".into()),
    }
}

/// Only requests inputs for declared client capabilities (SEP-2322).
#[tool]
async fn test_input_required_result_capabilities(ctx: ToolContext) -> McpReply {
    let request = request_of(&ctx);
    if request.input_responses.is_some() {
        return text("Capability-aware flow complete".into());
    }
    let capabilities = request.client_capabilities.unwrap_or_default();
    let mut pairs = Vec::new();
    if capabilities.elicitation.is_some() {
        pairs.push(("user_name", name_request()));
    }
    if capabilities.sampling.is_some() {
        pairs.push(("greeting", sampling("Generate a greeting")));
    }
    if capabilities.roots.is_some() {
        pairs.push(("client_roots", roots()));
    }
    if pairs.is_empty() {
        text("Client declared no MRTR-capable capabilities".into())
    } else {
        ask(pairs, None)
    }
}

/// Requires the sampling client capability (the server refuses clients without it:
/// `McpServerBuilder::requires_capability`).
#[tool]
async fn test_missing_capability() -> &'static str {
    "Required capability declared"
}

/// Returns an input_required result containing an elicitation request.
#[tool]
async fn test_streaming_elicitation() -> McpReply {
    ask(
        vec![(
            "streaming_elicitation",
            elicitation(
                "Provide a value",
                json!({"value": {"type": "string"}}),
                json!(["value"]),
            ),
        )],
        None,
    )
}

/// Emits notifications/message only when logLevel is requested.
#[tool]
async fn test_logging_tool(ctx: ToolContext) -> Result<&'static str, ToolError> {
    let caller = session(&ctx)?;
    if let Some(level) = caller.log_level() {
        caller
            .log(level, "conformance-server", json!("logLevel was requested"))
            .await
            .map_err(ToolError::internal)?;
    }
    Ok("Logging tool completed")
}

/// A tool whose argument travels in an HTTP header too (SEP-2243): its schema marks
/// the property with `x-mcp-header`.
fn test_custom_header() -> Tool {
    Tool::from_json_fn(
        "test_custom_header",
        "Validates SEP-2243 custom parameter headers",
        json!({
            "type": "object",
            "properties": {"value": {"type": "string", "x-mcp-header": "Value"}},
            "required": ["value"]
        }),
        |_ctx, args: Value| async move {
            Ok::<_, ToolError>(args["value"].as_str().unwrap_or_default().to_owned())
        },
    )
    .expect("a valid tool")
}

/// The suite's JSON Schema 2020-12 fixture, served as written: `$schema`, `$defs`
/// with an `$anchor`, a root `allOf`/`anyOf`, `if`/`then`/`else` and
/// `additionalProperties` (the provider exports refuse a root composition; MCP serves
/// JSON Schema in full, and the handler enforces all of it).
fn json_schema_2020_12_tool() -> Tool {
    Tool::from_json_fn(
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                }
            },
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"}
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {
                "properties": {"contactMethod": {"const": "phone"}},
                "required": ["contactMethod"]
            },
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false
        }),
        |_ctx, args: Value| async move {
            let name = args["name"].as_str().unwrap_or("world").to_owned();
            Ok::<_, ToolError>(format!("Hello, {name}!"))
        },
    )
    .expect("a valid tool")
}

/// Every fixture tool.
pub(crate) fn all() -> Vec<Tool> {
    let mut all = tools![
        test_missing_capability,
        test_streaming_elicitation,
        test_logging_tool,
        test_simple_text,
        test_image_content,
        test_audio_content,
        test_embedded_resource,
        test_multiple_content_types,
        test_tool_with_logging,
        test_error_handling,
        test_tool_with_progress,
        test_sampling,
        test_elicitation,
        test_elicitation_sep1034_defaults,
        test_elicitation_sep1330_enums,
        test_reconnection,
        test_input_required_result_elicitation,
        test_input_required_result_sampling,
        test_input_required_result_list_roots,
        test_input_required_result_request_state,
        test_input_required_result_tampered_state,
        test_input_required_result_multiple_inputs,
        test_input_required_result_multi_round,
        test_input_required_result_capabilities,
    ];
    all.push(test_custom_header());
    all.push(json_schema_2020_12_tool());
    all
}

//! The resources, prompts and completions the conformance suite reads: not tools, so
//! not the engine's; an rmcp handler the MCP server answers them with
//! (`McpServerBuilder::extras`).

#![allow(deprecated)] // logging and resources/subscribe: legacy, still checked

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CacheScope, CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitationSchema, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, ImageContent, InputRequest, InputRequests, InputRequiredResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, LoggingLevel,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Reference, Resource, ResourceContents,
    ResourceTemplate, Role, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::tools::IMAGE;

/// How long listings may be cached (protocol `2026-07-28`).
const CACHE_TTL_MS: u64 = 60_000;

/// Resources, prompts, completions, the logging level and resource subscriptions.
#[derive(Clone, Default)]
pub(crate) struct Fixtures {
    subscriptions: Arc<Mutex<HashSet<String>>>,
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
}

impl ServerHandler for Fixtures {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_logging()
                .enable_completions()
                .build(),
        )
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new("test://static-text", "Static Text Resource")
                .with_description("A static text resource for testing")
                .with_mime_type("text/plain"),
            Resource::new("test://static-binary", "Static Binary Resource")
                .with_description("A static binary/blob resource for testing")
                .with_mime_type("image/png"),
        ])
        .with_ttl_ms(CACHE_TTL_MS)
        .with_cache_scope(CacheScope::Public))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("test://template/{id}/data", "Dynamic Resource")
                .with_description("A dynamic resource with parameter substitution")
                .with_mime_type("application/json"),
        ])
        .with_ttl_ms(CACHE_TTL_MS)
        .with_cache_scope(CacheScope::Public))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let contents = match uri {
            "test://static-text" => ResourceContents::TextResourceContents {
                uri: uri.into(),
                mime_type: Some("text/plain".into()),
                text: "This is the content of the static text resource.".into(),
                meta: None,
            },
            "test://static-binary" => ResourceContents::BlobResourceContents {
                uri: uri.into(),
                mime_type: Some("image/png".into()),
                blob: IMAGE.into(),
                meta: None,
            },
            _ => {
                let id = uri
                    .strip_prefix("test://template/")
                    .and_then(|rest| rest.strip_suffix("/data"))
                    .filter(|id| !id.is_empty() && !id.contains('/'));
                let Some(id) = id else {
                    return Err(ErrorData::resource_not_found(
                        format!("Resource not found: {uri}"),
                        Some(json!({"uri": uri})),
                    ));
                };
                ResourceContents::TextResourceContents {
                    uri: uri.into(),
                    mime_type: Some("application/json".into()),
                    text: json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                        .to_string(),
                    meta: None,
                }
            }
        };
        Ok(ReadResourceResult::new(vec![contents])
            .with_ttl_ms(CACHE_TTL_MS)
            .with_cache_scope(CacheScope::Public)
            .into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(request.uri.to_string());
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(request.uri.as_str());
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![
            Prompt::new(
                "test_simple_prompt",
                Some("A simple test prompt with no arguments"),
                None,
            ),
            Prompt::new(
                "test_prompt_with_arguments",
                Some("A test prompt that accepts arguments"),
                Some(vec![
                    PromptArgument::new("arg1")
                        .with_description("First test argument")
                        .with_required(true),
                    PromptArgument::new("arg2")
                        .with_description("Second test argument")
                        .with_required(false),
                ]),
            ),
            Prompt::new(
                "test_prompt_with_embedded_resource",
                Some("A test prompt that includes an embedded resource"),
                None,
            ),
            Prompt::new(
                "test_prompt_with_image",
                Some("A test prompt that includes an image"),
                None,
            ),
            Prompt::new(
                "test_input_required_result_prompt",
                Some("A prompt that requires elicitation input via InputRequiredResult"),
                None,
            ),
        ])
        .with_ttl_ms(CACHE_TTL_MS)
        .with_cache_scope(CacheScope::Public))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let text = |text: &str| PromptMessage::new_text(Role::User, text);
        let result = match request.name.as_str() {
            "test_simple_prompt" => {
                GetPromptResult::new(vec![text("This is a simple test prompt.")])
                    .with_description("A simple test prompt")
            }
            "test_prompt_with_arguments" => {
                let args = request.arguments.unwrap_or_default();
                let arg = |name: &str| {
                    args.get(name)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                GetPromptResult::new(vec![text(&format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    arg("arg1"),
                    arg("arg2")
                ))])
                .with_description("A prompt with arguments")
            }
            "test_prompt_with_embedded_resource" => GetPromptResult::new(vec![
                text("Here is a resource:"),
                PromptMessage::new_resource(
                    Role::User,
                    "test://static-text".into(),
                    Some("text/plain".into()),
                    Some("Resource content for prompt".into()),
                    None,
                    None,
                    None,
                ),
            ])
            .with_description("A prompt with an embedded resource"),
            "test_prompt_with_image" => GetPromptResult::new(vec![
                text("Here is an image:"),
                PromptMessage::new(
                    Role::User,
                    ContentBlock::Image(ImageContent::new(IMAGE, "image/png")),
                ),
            ])
            .with_description("A prompt with an image"),
            "test_input_required_result_prompt" => {
                let answer = request
                    .input_responses
                    .as_ref()
                    .and_then(|r| r.get("user_context"))
                    .and_then(Value::as_object);
                let Some(answer) = answer else {
                    let mut requests = InputRequests::new();
                    requests.insert("user_context".into(), context_request());
                    return Ok(InputRequiredResult::from_input_requests(requests).into());
                };
                let context = answer
                    .get("content")
                    .and_then(|c| c.get("context"))
                    .and_then(Value::as_str)
                    .unwrap_or("(no context)");
                GetPromptResult::new(vec![text(&format!(
                    "Prompt with elicited context: {context}"
                ))])
                .with_description("A prompt built from elicited context")
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("Unknown prompt: {other}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let values: Vec<String> = match &request.r#ref {
            Reference::Resource(_) if request.argument.name == "id" => {
                vec!["1".into(), "2".into(), "3".into()]
            }
            Reference::Prompt(prompt) => match request.argument.name.as_str() {
                "name" => vec!["Alice".into(), "Bob".into(), "Charlie".into()],
                "style" => vec!["friendly".into(), "formal".into(), "casual".into()],
                _ => vec![prompt.name.clone()],
            },
            _ => Vec::new(),
        };
        let prefix = request.argument.value.clone();
        let values = values
            .into_iter()
            .filter(|v| v.starts_with(&prefix))
            .collect();
        let info = CompletionInfo::new(values).map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) = Some(request.level);
        Ok(())
    }
}

fn context_request() -> InputRequest {
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": {"context": {"type": "string"}},
        "required": ["context"],
    }))
    .expect("a valid elicitation schema");
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: "What context should the prompt use?".into(),
            requested_schema: schema,
        },
    ))
}

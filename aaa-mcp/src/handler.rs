//! rmcp's [`ServerHandler`] for [`McpServer`]: tools here, everything else to the
//! extras. The protocol itself (both lifecycles, version negotiation, `server/discover`,
//! cache hints, what each version may receive) is rmcp's.

#![allow(deprecated)] // resources/subscribe is legacy-only, and still served.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CancelledNotificationParam,
    CompleteRequestParams, CompleteResult, CustomNotification, CustomRequest, CustomResult,
    GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceRequestParams, ReadResourceResponse, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, TASKS_EXTENSION_ID, Tool, ToolsCapability,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::server::McpServer;

impl<X: ServerHandler + Clone> ServerHandler for McpServer<X> {
    fn get_info(&self) -> ServerConfig {
        let mut info = self.extras.get_info();
        info.capabilities.tools = Some(ToolsCapability::default());
        if !self.shared.tasks.is_empty() {
            info.capabilities
                .extensions
                .get_or_insert_default()
                .insert(TASKS_EXTENSION_ID.to_owned(), Default::default());
        }
        info.server_info = self.shared.info.clone();
        if let Some(instructions) = &self.shared.instructions {
            info.instructions = Some(instructions.clone());
        }
        info
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        cx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        self.shared.listing.page(cursor)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.listing.get(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Boxed: rmcp spawns each request's future, moving it whole (its largest
        // variant) into the task more than once; unboxed, the wait's state made it
        // 9 KB (rmcp's own: 4 KB) and the moves ~100k instructions of the 230k a call
        // cost more than rmcp's server (`examples/call_cost.rs`).
        Box::pin(crate::call::call_tool(
            &self.shared,
            &self.session,
            request,
            cx,
        ))
        .await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        crate::tasks::get_task(&self.shared, request).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let client = crate::call::client_name(&cx);
        crate::tasks::update_task(&self.shared, request, &client).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        crate::tasks::cancel_task(&self.shared, request).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.extras.complete(request, cx).await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.extras.set_level(request, cx).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.extras.get_prompt(request, cx).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.extras.list_prompts(request, cx).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.extras.list_resources(request, cx).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.extras.list_resource_templates(request, cx).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.extras.read_resource(request, cx).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.extras.accepted_subscription_filter(requested)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.extras.listen(context).await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.extras.subscribe(request, cx).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.extras.unsubscribe(request, cx).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        cx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        // rmcp hands over a request of a known method whose params it could not read
        // as a custom one; for the tool methods (and the task methods, where tasks
        // are served) that is malformed params, not an unknown method.
        match request.method.as_str() {
            "tools/call" => Err(malformed::<CallToolRequestParams>(&request)),
            "tools/list" => Err(malformed::<PaginatedRequestParams>(&request)),
            "tasks/get" if !self.shared.tasks.is_empty() => {
                Err(malformed::<GetTaskParams>(&request))
            }
            "tasks/update" if !self.shared.tasks.is_empty() => {
                Err(malformed::<UpdateTaskParams>(&request))
            }
            "tasks/cancel" if !self.shared.tasks.is_empty() => {
                Err(malformed::<CancelTaskParams>(&request))
            }
            _ => self.extras.on_custom_request(request, cx).await,
        }
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        cx: NotificationContext<RoleServer>,
    ) {
        self.session.in_flight.cancelled(&notification).await;
        self.extras.on_cancelled(notification, cx).await
    }

    async fn on_progress(
        &self,
        notification: ProgressNotificationParam,
        cx: NotificationContext<RoleServer>,
    ) {
        self.extras.on_progress(notification, cx).await
    }

    async fn on_roots_list_changed(&self, cx: NotificationContext<RoleServer>) {
        self.extras.on_roots_list_changed(cx).await
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        cx: NotificationContext<RoleServer>,
    ) {
        self.extras.on_custom_notification(notification, cx).await
    }
}

/// The `-32602` for a request of a known method whose params do not parse as `P`.
fn malformed<P: serde::de::DeserializeOwned>(request: &CustomRequest) -> ErrorData {
    let params = request.params.clone().unwrap_or(serde_json::Value::Null);
    let why = match serde_json::from_value::<P>(params) {
        Err(error) => error.to_string(),
        Ok(_) => "they do not fit the method".to_owned(),
    };
    ErrorData::invalid_params(
        format!("malformed `{}` params: {why}", request.method),
        None,
    )
}

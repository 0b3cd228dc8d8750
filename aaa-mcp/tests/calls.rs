//! `tools/list` and `tools/call` as an MCP client sees them: an rmcp client talking to
//! the server over an in-memory byte stream (the same JSON-RPC messages as stdio).

mod support;

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use aaa_mcp::{APPROVAL_META_KEY, Approvals, CALL_META_KEY, IDEMPOTENCY_KEY, McpServer};
use aaa_tools::event::{APPROVAL_REQUESTED, ApprovalDecision, ApprovalRequested};
use futures::StreamExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorCode, Implementation, JsonObject, NumberOrString,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, RequestMetaObject,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService, ServiceError};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use support::TestServer;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;

/// What the test client saw, and how it answers approval forms.
#[derive(Clone, Default)]
struct Client {
    /// `Some(answer)`: declares elicitation and answers every form so.
    approve: Option<bool>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    forms: Arc<Mutex<Vec<String>>>,
    heard: Arc<Notify>,
    /// Every byte the client read from the server, in the order sent. rmcp's client
    /// handles each notification on a task of its own, so the order `on_progress` runs
    /// in is not the order on the wire; tests that check order read this.
    wire: Arc<Mutex<Vec<u8>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let capabilities = match self.approve {
            Some(_) => ClientCapabilities::builder().enable_elicitation().build(),
            None => ClientCapabilities::default(),
        };
        ClientConfig::new(capabilities, Implementation::new("test-client", "1.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.forms.lock().unwrap().push(message);
        }
        Ok(match self.approve {
            Some(approve) => ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({"approve": approve})),
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
        self.heard.notify_waiters();
    }
}

impl Client {
    /// Waits until the client has handled `n` progress notifications.
    async fn heard_at_least(&self, n: usize) {
        let heard = async {
            loop {
                let notified = self.heard.notified();
                if self.progress.lock().unwrap().len() >= n {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), heard)
            .await
            .unwrap_or_else(|_| panic!("{n} progress notifications"));
    }
}

/// Connects `client` to `server` over an in-memory duplex.
async fn connect(server: McpServer, client: Client) -> RunningService<RoleClient, Client> {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(aaa_mcp::serve_io(server, tokio::io::split(theirs)));
    let (read, write) = tokio::io::split(ours);
    let read = Tap {
        inner: read,
        wire: client.wire.clone(),
    };
    client
        .serve((read, write))
        .await
        .expect("the client connects")
}

/// A reader that keeps a copy of what passes through it.
struct Tap<R> {
    inner: R,
    wire: Arc<Mutex<Vec<u8>>>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Tap<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if poll.is_ready() {
            this.wire
                .lock()
                .unwrap()
                .extend_from_slice(&buf.filled()[before..]);
        }
        poll
    }
}

/// The JSON-RPC messages the server sent, in order.
fn sent(wire: &Mutex<Vec<u8>>) -> Vec<Value> {
    let wire = wire.lock().unwrap();
    wire.split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("one JSON-RPC message per line"))
        .collect()
}

fn params(name: &'static str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    CallToolRequestParams::new(name).with_arguments(arguments)
}

fn keyed(name: &'static str, arguments: Value, key: &str) -> CallToolRequestParams {
    let mut params = params(name, arguments);
    let mut meta = RequestMetaObject::new();
    meta.insert(IDEMPOTENCY_KEY.to_owned(), json!(key));
    params.meta = Some(meta);
    params
}

fn text(result: &CallToolResult) -> &str {
    &result.content[0].as_text().expect("a text block").text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_in_pages_with_what_the_engine_enforces() {
    let TestServer {
        server,
        worker: _worker,
        ..
    } = support::server_with(|b| b.page_size(3)).await;
    let registry = server.registry().clone();
    let client = connect(server, Client::default()).await;

    let first = client.list_tools(None).await.unwrap();
    assert_eq!(first.tools.len(), 3);
    let cursor = first.next_cursor.clone().expect("more pages");
    let all = client.list_all_tools().await.unwrap();
    let names: Vec<String> = all.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(
        names,
        [
            "add",
            "greet",
            "fail",
            "counted",
            "stepwise",
            "send_payment",
            "sleepy",
            "ask_name"
        ]
    );
    for tool in &all {
        let expected = registry.get(&tool.name).unwrap().parameters();
        assert_eq!(&Value::Object((*tool.input_schema).clone()), expected);
        assert!(tool.description.as_deref().is_some_and(|d| !d.is_empty()));
    }
    let add = &all[0];
    let output = add.output_schema.as_ref().expect("add declares its output");
    assert_eq!(output["type"], "object");
    assert_eq!(output["properties"]["sum"]["type"], "integer");
    let payment = all.iter().find(|t| t.name == "send_payment").unwrap();
    assert_eq!(
        payment.meta.as_ref().unwrap()["aaa-tools/requiresApproval"],
        true
    );

    // A cursor this server never issued is an invalid-params error.
    let bad = PaginatedRequestParams::default().with_cursor(Some("bm9wZQ".into()));
    let error = client.list_tools(Some(bad)).await.unwrap_err();
    assert!(matches!(error, ServiceError::McpError(e) if e.code == ErrorCode::INVALID_PARAMS));
    let again = PaginatedRequestParams::default().with_cursor(Some(cursor));
    assert_eq!(client.list_tools(Some(again)).await.unwrap().tools.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_carry_structured_content_and_the_json_text() {
    let TestServer {
        server,
        worker: _worker,
        ..
    } = support::server().await;
    let run = server.run().run_id().clone();
    let client = connect(server, Client::default()).await;

    let sum = client
        .call_tool(params("add", json!({"a": 2, "b": 3})))
        .await
        .unwrap();
    assert_eq!(sum.is_error, Some(false));
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})));
    assert_eq!(
        serde_json::from_str::<Value>(text(&sum)).unwrap(),
        json!({"sum": 5})
    );
    assert_eq!(sum.meta, None, "a success names its call only when asked");

    // Asked for, the ids of the engine's call come back.
    let mut asking = params("add", json!({"a": 2, "b": 3}));
    let mut meta = RequestMetaObject::new();
    meta.insert(CALL_META_KEY.to_owned(), json!(true));
    asking.meta = Some(meta);
    let named = client.call_tool(asking).await.unwrap();
    let call = &named.meta.as_ref().expect("the ids were asked for")[CALL_META_KEY];
    assert_eq!(
        call["run"],
        run.as_str(),
        "the call went through the server's run"
    );
    assert!(call["call"].is_string(), "{call}");

    // Anything but a boolean there is malformed params.
    let mut bad = params("add", json!({"a": 2, "b": 3}));
    let mut meta = RequestMetaObject::new();
    meta.insert(CALL_META_KEY.to_owned(), json!("yes"));
    bad.meta = Some(meta);
    let error = client.call_tool(bad).await.unwrap_err();
    assert!(matches!(error, ServiceError::McpError(e) if e.code == ErrorCode::INVALID_PARAMS));

    let hello = client
        .call_tool(params("greet", json!({"name": "Ada"})))
        .await
        .unwrap();
    assert_eq!(text(&hello), "Hello, Ada!");
    assert_eq!(hello.structured_content, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failure_is_is_error_with_the_text_the_model_reads() {
    let TestServer {
        server,
        runs,
        worker: _worker,
        ..
    } = support::server().await;
    let client = connect(server, Client::default()).await;

    let failed = client.call_tool(params("fail", json!({}))).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(
        text(&failed),
        "error (error): the ledger is closed on Sundays"
    );
    assert_eq!(
        failed.meta.as_ref().unwrap()[CALL_META_KEY]["kind"],
        "error"
    );

    // Arguments are checked by the engine against the schema the client was shown.
    let bad = client
        .call_tool(params("counted", json!({"note": 7})))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert!(
        text(&bad).starts_with("error (bad_args): "),
        "{}",
        text(&bad)
    );
    assert!(text(&bad).contains("note"), "{}", text(&bad));
    assert_eq!(runs.counted(), 0, "a call with bad arguments never runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_is_invalid_params_naming_the_closest() {
    let TestServer {
        server,
        worker: _worker,
        ..
    } = support::server().await;
    let client = connect(server, Client::default()).await;
    let error = client
        .call_tool(params("ad", json!({"a": 1})))
        .await
        .unwrap_err();
    let ServiceError::McpError(error) = error else {
        panic!("a JSON-RPC error, got {error:?}");
    };
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(error.message.contains("`add`"), "{}", error.message);
    assert_eq!(error.data.unwrap()["closest"][0], "add");

    // A key that is not a string is refused before anything runs.
    let mut bad = params("greet", json!({"name": "x"}));
    let mut meta = RequestMetaObject::new();
    meta.insert(IDEMPOTENCY_KEY.to_owned(), json!(12));
    bad.meta = Some(meta);
    let error = client.call_tool(bad).await.unwrap_err();
    assert!(matches!(error, ServiceError::McpError(e) if e.code == ErrorCode::INVALID_PARAMS));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_client_before_the_result() {
    let TestServer {
        server,
        worker: _worker,
        ..
    } = support::server().await;
    let seen = Client::default();
    let client = connect(server, seen.clone()).await;

    let mut request = params("stepwise", json!({"steps": 5}));
    request.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::String("steps".into()),
    )));
    let result = client.call_tool(request).await.unwrap();
    assert_eq!(text(&result), "5 steps done");
    // On the wire, every report comes before the result, in the order reported.
    let sent = sent(&seen.wire);
    let result_at = sent
        .iter()
        .position(|m| m["result"]["content"][0]["text"] == "5 steps done")
        .expect("the result was sent");
    let progress: Vec<&Value> = sent
        .iter()
        .enumerate()
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .map(|(at, m)| {
            assert!(at < result_at, "progress after the result: {m}");
            &m["params"]
        })
        .collect();
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [1.0, 2.0, 3.0, 4.0, 5.0]);
    assert!(progress.iter().all(|p| p["total"] == 5.0));
    assert_eq!(progress[4]["message"], "step 5 of 5");
    // The client's handler hears all of them too, each on a task of its own.
    seen.heard_at_least(5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_request_with_its_key_runs_the_tool_once() {
    let TestServer {
        server,
        runs,
        engine,
        worker: _worker,
    } = support::server().await;
    let client = connect(server.clone(), Client::default()).await;

    let first = client
        .call_tool(keyed("counted", json!({"note": "once"}), "order-17"))
        .await
        .unwrap();
    // The same request again, under a new JSON-RPC id, and concurrently twice more.
    let (again, a, b) = tokio::join!(
        client.call_tool(keyed("counted", json!({"note": "once"}), "order-17")),
        client.call_tool(keyed("counted", json!({"note": "once"}), "order-17")),
        client.call_tool(keyed("counted", json!({"note": "once"}), "order-17")),
    );
    for repeat in [again.unwrap(), a.unwrap(), b.unwrap()] {
        assert_eq!(repeat.structured_content, first.structured_content);
        assert_eq!(repeat.meta, first.meta, "the same engine call");
    }
    assert_eq!(runs.counted(), 1);

    // Another server over the same engine (a restarted one) finds the call too.
    let registry = server.registry().clone();
    let restarted = McpServer::builder(registry, engine).build().unwrap();
    let other = connect(restarted, Client::default()).await;
    let after = other
        .call_tool(keyed("counted", json!({"note": "once"}), "order-17"))
        .await
        .unwrap();
    assert_eq!(after.structured_content, first.structured_content);
    assert_eq!(runs.counted(), 1);

    // Other arguments under the same key are another call; no key, a new call each time.
    let other_args = client
        .call_tool(keyed("counted", json!({"note": "twice"}), "order-17"))
        .await
        .unwrap();
    assert_eq!(other_args.structured_content.unwrap()["run"], 2);
    client
        .call_tool(params("counted", json!({"note": "once"})))
        .await
        .unwrap();
    assert_eq!(runs.counted(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_user_approves_through_an_elicitation_form() {
    let TestServer {
        server,
        runs,
        worker: _worker,
        ..
    } = support::server().await;
    let user = Client {
        approve: Some(true),
        ..Client::default()
    };
    let client = connect(server, user.clone()).await;
    let paid = client
        .call_tool(params(
            "send_payment",
            json!({"to": "bob", "amount_cents": 500}),
        ))
        .await
        .unwrap();
    assert_eq!(paid.is_error, Some(false), "{}", text(&paid));
    assert_eq!(paid.structured_content.as_ref().unwrap()["paid"], 500);
    assert_eq!(runs.payments(), 1);
    let forms = user.forms.lock().unwrap().clone();
    assert_eq!(forms.len(), 1);
    assert!(forms[0].contains("`send_payment`") && forms[0].contains("\"amount_cents\": 500"));
    let note = &paid.meta.as_ref().unwrap()[APPROVAL_META_KEY];
    assert_eq!(note["by"], "client");
    assert_eq!(note["approved"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_who_declines_denies_the_call() {
    let TestServer {
        server,
        runs,
        worker: _worker,
        ..
    } = support::server().await;
    let user = Client {
        approve: Some(false),
        ..Client::default()
    };
    let client = connect(server, user).await;
    let denied = client
        .call_tool(params(
            "send_payment",
            json!({"to": "eve", "amount_cents": 9}),
        ))
        .await
        .unwrap();
    assert_eq!(denied.is_error, Some(true));
    assert!(
        text(&denied).starts_with("error (denied): "),
        "{}",
        text(&denied)
    );
    assert_eq!(runs.payments(), 0);
}

/// The first approval request of `server`'s run.
async fn approval_request(server: &McpServer) -> ApprovalRequested {
    let mut facts = server.run().facts().await.unwrap();
    while let Some(fact) = facts.next().await {
        let fact = fact.unwrap();
        if fact.kind == APPROVAL_REQUESTED {
            return fact.into_data().unwrap();
        }
    }
    panic!("the run's facts ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_elicitation_an_operator_decides_on_the_bus() {
    let TestServer {
        server,
        runs,
        worker: _worker,
        ..
    } = support::server().await;
    let seen = Client::default();
    let client = connect(server.clone(), seen.clone()).await;
    let mut request = params("send_payment", json!({"to": "bob", "amount_cents": 75}));
    request.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::Number(9),
    )));
    let call = tokio::spawn(async move { client.call_tool(request).await });

    let requested = approval_request(&server).await;
    assert_eq!(
        requested.arguments,
        json!({"to": "bob", "amount_cents": 75})
    );
    // The client hears that the call waits for an operator.
    seen.heard_at_least(1).await;
    let progress = seen.progress.lock().unwrap().clone();
    let message = progress[0].message.clone().unwrap_or_default();
    assert!(
        message.contains("waiting for an operator's approval"),
        "{message}"
    );
    assert!(message.contains(requested.call_id.as_str()), "{message}");
    assert_eq!(runs.payments(), 0, "nothing runs before the grant");
    server
        .run()
        .grant(ApprovalDecision::for_request(&requested).with_approver("ops-on-call"))
        .await
        .unwrap();
    let paid = call.await.unwrap().unwrap();
    assert_eq!(paid.is_error, Some(false), "{}", text(&paid));
    assert_eq!(runs.payments(), 1);
    let note = &paid.meta.as_ref().unwrap()[APPROVAL_META_KEY];
    assert_eq!(note["by"], "operator");
    assert_eq!(note["approver"], "ops-on-call");
    assert!(seen.forms.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_only_never_asks_the_client() {
    let TestServer {
        server,
        runs,
        worker: _worker,
        ..
    } = support::server_with(|b| b.approvals(Approvals::OperatorOnly)).await;
    let user = Client {
        approve: Some(true),
        ..Client::default()
    };
    let client = connect(server.clone(), user.clone()).await;
    let call = tokio::spawn(async move {
        client
            .call_tool(params(
                "send_payment",
                json!({"to": "x", "amount_cents": 1}),
            ))
            .await
    });
    let requested = approval_request(&server).await;
    server
        .run()
        .deny(ApprovalDecision::for_request(&requested).with_reason("not today"))
        .await
        .unwrap();
    let denied = call.await.unwrap().unwrap();
    assert_eq!(denied.is_error, Some(true));
    assert!(text(&denied).ends_with("not today"), "{}", text(&denied));
    assert!(
        user.forms.lock().unwrap().is_empty(),
        "the client was never asked"
    );
    assert_eq!(runs.payments(), 0);
}

#[test]
fn output_schemas_and_requirements_name_real_tools() {
    use aaa_mcp::BuildError;
    use aaa_tools::Engine;

    let registry = support::registry(&std::sync::Arc::new(support::Runs::default()));
    let engine = Engine::embedded();
    let error = McpServer::builder(registry.clone(), engine.clone())
        .output_schema::<support::Sum>("nope")
        .build()
        .unwrap_err();
    assert_eq!(error, BuildError::UnknownTool("nope".into()));
    let error = McpServer::builder(registry.clone(), engine.clone())
        .output_schema::<Vec<u8>>("add")
        .build()
        .unwrap_err();
    assert!(matches!(error, BuildError::OutputSchema { .. }), "{error}");
    let error = McpServer::builder(registry.clone(), engine.clone())
        .request_state_key(vec![1; 8])
        .build()
        .unwrap_err();
    assert_eq!(error, BuildError::StateKeyTooShort(8));
    let error = McpServer::builder(registry, engine)
        .page_size(0)
        .build()
        .unwrap_err();
    assert_eq!(error, BuildError::PageSize);
    let _unused: Option<JsonObject> = None;
}

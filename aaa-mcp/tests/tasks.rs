//! MCP tasks (SEP-2663) backed by the engine, as an rmcp client sees them: a
//! task-supporting tool answers with a task, `tasks/get` follows it, `tasks/update`
//! answers its approval, `tasks/cancel` stops it, and a server that never saw the task
//! answers for it.
//!
//! Each test waits for the task's facts on the bus (its round's outcome, its approval
//! request) before asking `tasks/get`, so no test polls on a timer.

mod support;

use std::sync::Arc;

use aaa_mcp::{IDEMPOTENCY_KEY, McpServer, TaskSupport};
use aaa_tools::event::{APPROVAL_REQUESTED, ApprovalDecision, ApprovalRequested};
use aaa_tools::{CallId, Engine, HandlerHandle, Outcome, RunHandle, RunId, TenantId};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    ErrorCode, GetTaskParams, Implementation, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::{RunningService, ServiceError};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use support::{Runs, TestServer, within};

/// A client that declares the tasks extension, and elicitation when `elicits`.
#[derive(Clone, Default)]
struct TaskClient {
    elicits: bool,
    tasks: bool,
}

impl ClientHandler for TaskClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.tasks {
            capabilities = ClientCapabilities::builder().enable_tasks().build();
        }
        if self.elicits {
            capabilities.elicitation = ClientCapabilities::builder()
                .enable_elicitation()
                .build()
                .elicitation;
        }
        ClientConfig::new(capabilities, Implementation::new("task-client", "1.0"))
    }
}

const TASKS: TaskClient = TaskClient {
    elicits: false,
    tasks: true,
};

async fn connect(server: McpServer, client: TaskClient) -> RunningService<RoleClient, TaskClient> {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(aaa_mcp::serve_io(server, tokio::io::split(theirs)));
    client
        .serve(tokio::io::split(ours))
        .await
        .expect("the client connects")
}

/// A client that declared the tasks extension, connected to a [`task_server`]; with
/// the server's engine, its tools' counters and its worker (which the caller keeps).
async fn task_client() -> (
    RunningService<RoleClient, TaskClient>,
    Engine,
    Arc<Runs>,
    HandlerHandle,
) {
    let TestServer {
        server,
        runs,
        engine,
        worker,
    } = task_server().await;
    (connect(server, TASKS).await, engine, runs, worker)
}

/// A server of the test tools whose `sleepy`, `send_payment` and `counted` calls may
/// be tasks, and whose `greet` calls must be.
async fn task_server() -> TestServer {
    support::server_with(|b| {
        b.task_support("sleepy", TaskSupport::Optional)
            .task_support("send_payment", TaskSupport::Optional)
            .task_support("counted", TaskSupport::Optional)
            .task_support("fail", TaskSupport::Optional)
            .task_support("greet", TaskSupport::Required)
            .task_support("ask_name", TaskSupport::Optional)
    })
    .await
}

/// The key under which a task's approval is answered.
const APPROVAL: &str = "aaa-tools/approval";

/// An elicitation's answer to an approval: accepted, approving or not.
fn approval(approve: bool) -> Value {
    json!({"action": "accept", "content": {"approve": approve}})
}

/// Answers `task`'s input requests with `answers` (`tasks/update`).
async fn answer<const N: usize>(
    client: &RunningService<RoleClient, TaskClient>,
    task: &str,
    answers: [(&str, Value); N],
) {
    let answers: rmcp::model::InputResponses = answers
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
    client
        .update_task(UpdateTaskParams::new(task, answers))
        .await
        .expect("tasks/update is answered");
}

fn params(name: &'static str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name).with_arguments(arguments.as_object().unwrap().clone())
}

/// Calls `name` and returns the id of the task it became.
async fn start(
    client: &RunningService<RoleClient, TaskClient>,
    request: CallToolRequestParams,
) -> String {
    match client.call_tool_once(request).await.unwrap() {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            assert!(created.task.poll_interval_ms.is_some());
            created.task.task_id
        }
        other => panic!("expected a task, got {other:?}"),
    }
}

/// The run and call of a task's round `n` (`<task>-r<n>`, as the crate documents).
fn round(engine: &aaa_tools::Engine, task: &str, n: u32) -> (RunHandle, CallId) {
    let id = format!("{task}-r{n}");
    let run = engine.run_for(TenantId::default(), RunId::new(&id).unwrap());
    (run, CallId::new(&id).unwrap())
}

/// The run and call of a task's first round.
fn first_round(engine: &aaa_tools::Engine, task: &str) -> (RunHandle, CallId) {
    round(engine, task, 1)
}

/// Waits for the outcome of a task's round `n` on the bus.
async fn round_n_ends(engine: &aaa_tools::Engine, task: &str, n: u32) -> Outcome {
    let (run, call) = round(engine, task, n);
    within("the round's outcome", run.outcome(&call))
        .await
        .unwrap()
}

/// Waits for the outcome of a task's first round on the bus.
async fn round_ends(engine: &aaa_tools::Engine, task: &str) -> Outcome {
    round_n_ends(engine, task, 1).await
}

/// An elicitation answer with `name`.
fn named(name: &str) -> Value {
    json!({"action": "accept", "content": {"name": name}})
}

async fn get(
    client: &RunningService<RoleClient, TaskClient>,
    task: &str,
) -> rmcp::model::DetailedTask {
    client
        .get_task(GetTaskParams::new(task))
        .await
        .expect("tasks/get answers")
        .task
}

/// The text of a completed task's result.
fn result_text(task: &rmcp::model::DetailedTask) -> (String, bool) {
    let TaskPayload::Completed { result } = &task.payload else {
        panic!("expected a completed task, got {task:?}");
    };
    let text = result["content"][0]["text"].as_str().unwrap().to_owned();
    (text, result["isError"] == json!(true))
}

/// The JSON-RPC error code of a failed request.
fn code(error: ServiceError) -> ErrorCode {
    match error {
        ServiceError::McpError(data) => data.code,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_served_by_a_server_that_never_saw_it() {
    let TestServer {
        server,
        engine,
        runs,
        worker: _worker,
    } = task_server().await;
    let first = connect(server.clone(), TASKS).await;
    let task = start(&first, params("counted", json!({"note": "durable"}))).await;
    // The server that made it goes away; a new one (nothing in memory) answers.
    first.cancel().await.unwrap();
    drop(server);
    let registry = support::registry(&runs);
    let fresh = McpServer::builder(registry, engine.clone())
        .task_support("counted", TaskSupport::Optional)
        .build()
        .unwrap();
    let second = connect(fresh, TASKS).await;
    round_ends(&engine, &task).await;
    let detailed = get(&second, &task).await;
    assert_eq!(detailed.task.task_id, task);
    assert_eq!(detailed.status(), TaskStatus::Completed);
    let (text, is_error) = result_text(&detailed);
    assert!(!is_error);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["note"],
        "durable"
    );
    assert_eq!(runs.counted(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_error_completes_the_task_with_is_error() {
    let (client, engine, _, _worker) = task_client().await;
    let task = start(&client, params("fail", json!({}))).await;
    round_ends(&engine, &task).await;
    let detailed = get(&client, &task).await;
    assert_eq!(detailed.status(), TaskStatus::Completed);
    let (text, is_error) = result_text(&detailed);
    assert!(is_error);
    assert!(text.contains("the ledger is closed on Sundays"), "{text}");
}

/// Waits for the approval request of a task's first round.
async fn approval_asked(engine: &aaa_tools::Engine, task: &str) -> ApprovalRequested {
    let (run, call) = first_round(engine, task);
    support::fact(&run, APPROVAL_REQUESTED, Some(&call))
        .await
        .into_data()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_update_answers_the_approval_a_task_waits_for() {
    for approve in [true, false] {
        let TestServer {
            server,
            engine,
            runs,
            worker: _worker,
        } = task_server().await;
        let user = TaskClient {
            elicits: true,
            tasks: true,
        };
        let client = connect(server, user).await;
        let task = start(
            &client,
            params("send_payment", json!({"to": "bob", "amount_cents": 500})),
        )
        .await;
        approval_asked(&engine, &task).await;
        let waiting = get(&client, &task).await;
        let TaskPayload::InputRequired { input_requests } = &waiting.payload else {
            panic!("expected input_required, got {waiting:?}");
        };
        let form = serde_json::to_value(&input_requests["aaa-tools/approval"]).unwrap();
        assert_eq!(form["method"], "elicitation/create");
        assert!(
            form["params"]["message"]
                .as_str()
                .unwrap()
                .contains("\"amount_cents\": 500")
        );
        assert_eq!(runs.payments(), 0, "nothing runs before the answer");

        answer(&client, &task, [(APPROVAL, approval(approve))]).await;
        round_ends(&engine, &task).await;
        let done = get(&client, &task).await;
        assert_eq!(done.status(), TaskStatus::Completed);
        let (text, is_error) = result_text(&done);
        assert_eq!(is_error, !approve, "{text}");
        assert_eq!(runs.payments(), usize::from(approve));
        if !approve {
            assert!(text.starts_with("error (denied): "), "{text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_elicitation_an_operator_decides_a_tasks_approval() {
    let (client, engine, runs, _worker) = task_client().await;
    let task = start(
        &client,
        params("send_payment", json!({"to": "ann", "amount_cents": 5})),
    )
    .await;
    let requested = approval_asked(&engine, &task).await;
    let waiting = get(&client, &task).await;
    assert_eq!(waiting.status(), TaskStatus::Working);
    let message = waiting.task.status_message.clone().unwrap_or_default();
    assert!(
        message.contains("waiting for an operator's approval"),
        "{message}"
    );
    // The client cannot answer it.
    answer(&client, &task, [(APPROVAL, approval(true))]).await;
    assert_eq!(get(&client, &task).await.status(), TaskStatus::Working);
    assert_eq!(runs.payments(), 0);

    let (run, _) = first_round(&engine, &task);
    run.grant(ApprovalDecision::for_request(&requested).with_approver("ops"))
        .await
        .unwrap();
    round_ends(&engine, &task).await;
    let (_, is_error) = result_text(&get(&client, &task).await);
    assert!(!is_error);
    assert_eq!(runs.payments(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_cancel_stops_a_running_task_and_leaves_a_finished_one() {
    let (client, engine, _, _worker) = task_client().await;
    let task = start(&client, params("sleepy", json!({"ms": 60_000}))).await;
    let (run, call) = first_round(&engine, &task);
    support::fact(&run, aaa_tools::event::ATTEMPT_STARTED, None).await;
    client
        .cancel_task(CancelTaskParams::new(&task))
        .await
        .unwrap();
    let outcome = round_ends(&engine, &task).await;
    assert_eq!(
        outcome.failure().map(|f| f.kind),
        Some(aaa_tools::FailureKind::Cancelled)
    );
    assert_eq!(get(&client, &task).await.status(), TaskStatus::Cancelled);
    // Cancelling again is acknowledged, and changes nothing.
    client
        .cancel_task(CancelTaskParams::new(&task))
        .await
        .unwrap();
    assert_eq!(get(&client, &task).await.status(), TaskStatus::Cancelled);
    drop((run, call));

    let quick = start(&client, params("sleepy", json!({"ms": 1}))).await;
    round_ends(&engine, &quick).await;
    client
        .cancel_task(CancelTaskParams::new(&quick))
        .await
        .unwrap();
    assert_eq!(get(&client, &quick).await.status(), TaskStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_malformed_task_ids_are_invalid_params() {
    let (client, _, _, _worker) = task_client().await;
    let long = "t".repeat(10_000);
    for id in ["task-0000", "a.b.>", "", "../etc", long.as_str(), "task-ü"] {
        let error = client.get_task(GetTaskParams::new(id)).await.unwrap_err();
        assert_eq!(code(error), ErrorCode::INVALID_PARAMS, "tasks/get {id:.20}");
        let error = client
            .cancel_task(CancelTaskParams::new(id))
            .await
            .unwrap_err();
        assert_eq!(
            code(error),
            ErrorCode::INVALID_PARAMS,
            "tasks/cancel {id:.20}"
        );
        let error = client
            .update_task(UpdateTaskParams::new(id, Default::default()))
            .await
            .unwrap_err();
        assert_eq!(
            code(error),
            ErrorCode::INVALID_PARAMS,
            "tasks/update {id:.20}"
        );
    }
    // The server keeps serving.
    let task = start(&client, params("sleepy", json!({"ms": 1}))).await;
    assert!(task.starts_with("task-"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_task_request_with_its_key_is_the_same_task() {
    let (client, engine, runs, _worker) = task_client().await;
    let keyed = || {
        let mut request = params("counted", json!({"note": "once"}));
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.0.insert(IDEMPOTENCY_KEY.to_owned(), json!("order-17"));
        request.meta = Some(meta);
        request
    };
    let task = start(&client, keyed()).await;
    round_ends(&engine, &task).await;
    let again = match client.call_tool_once(keyed()).await.unwrap() {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Completed);
            created.task.task_id
        }
        other => panic!("expected the task, got {other:?}"),
    };
    assert_eq!(again, task);
    assert_eq!(runs.counted(), 1, "the tool ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_support_follows_the_clients_capabilities() {
    let TestServer {
        server,
        worker: _worker,
        ..
    } = task_server().await;
    let plain = connect(server.clone(), TaskClient::default()).await;
    // Optional: a plain result for a client without the extension.
    let result = plain
        .call_tool(params("sleepy", json!({"ms": 1})))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false));
    // Required: -32021, naming the extension.
    let error = plain
        .call_tool_once(params("greet", json!({"name": "x"})))
        .await
        .unwrap_err();
    let ServiceError::McpError(data) = error else {
        panic!("expected a JSON-RPC error");
    };
    assert_eq!(data.code.0, -32021);
    let data = data.data.unwrap();
    assert!(
        data["requiredCapabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some(),
        "{data}"
    );
    // tasks/* are refused to it too, and advertised to everyone.
    let error = plain
        .get_task(GetTaskParams::new("task-1"))
        .await
        .unwrap_err();
    assert_eq!(code(error).0, -32021);
    let info = plain.peer_info().unwrap();
    assert!(info.capabilities.supports_tasks());

    let tasks = connect(server, TASKS).await;
    let task = start(&tasks, params("greet", json!({"name": "x"}))).await;
    assert!(task.starts_with("task-"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_asks_for_input_and_takes_the_answers_one_at_a_time() {
    let (client, engine, _, _worker) = task_client().await;
    let task = start(&client, params("ask_name", json!({}))).await;
    round_ends(&engine, &task).await;
    let pending = |task: &rmcp::model::DetailedTask| match &task.payload {
        TaskPayload::InputRequired { input_requests } => {
            input_requests.keys().cloned().collect::<Vec<_>>()
        }
        other => panic!("expected input_required, got {other:?}"),
    };
    assert_eq!(pending(&get(&client, &task).await), ["first", "last"]);

    // An answer to nothing it asked is ignored, and acknowledged.
    answer(
        &client,
        &task,
        [("first", named("Ada")), ("middle", named("X"))],
    )
    .await;
    assert_eq!(pending(&get(&client, &task).await), ["last"]);

    answer(&client, &task, [("last", named("Lovelace"))]).await;
    round_n_ends(&engine, &task, 2).await;
    let (text, is_error) = result_text(&get(&client, &task).await);
    assert!(!is_error);
    assert_eq!(text, "Hello, Ada Lovelace (state \"asked\")");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_end_outlasts_the_bus_retention_of_its_facts() {
    use aaa_tools::bus::{MemoryBus, Retention};
    let runs = std::sync::Arc::new(support::Runs::default());
    let registry = support::registry(&runs);
    let bus = MemoryBus::with_retention(Retention::default().with_max_messages(40));
    let engine = aaa_tools::Engine::new(bus, aaa_tools::MemoryStore::new());
    let _worker = aaa_tools::ToolHandler::new(registry.clone())
        .attach(&engine)
        .await
        .unwrap();
    let server = McpServer::builder(registry, engine.clone())
        .task_support("counted", TaskSupport::Optional)
        .build()
        .unwrap();
    let client = connect(server, TASKS).await;
    let seen = start(&client, params("counted", json!({"note": "seen"}))).await;
    let unseen = start(&client, params("counted", json!({"note": "unseen"}))).await;
    round_ends(&engine, &seen).await;
    round_ends(&engine, &unseen).await;
    let before = get(&client, &seen).await;
    assert_eq!(before.status(), TaskStatus::Completed);

    // Enough other calls that the bus lets both tasks' facts go.
    let other = engine.new_run();
    for n in 0..40 {
        other.call("add", json!({"a": n, "b": 1})).await.unwrap();
    }
    let (run, _) = first_round(&engine, &seen);
    let filter = aaa_tools::event::run_filter(&TenantId::default(), run.run_id());
    assert!(
        engine.bus().first(&filter).await.unwrap().is_none(),
        "trimmed"
    );

    // The end seen before is kept; the one nobody saw is failed, saying why.
    assert_eq!(get(&client, &seen).await, before);
    let lost = get(&client, &unseen).await;
    let TaskPayload::Failed { error } = &lost.payload else {
        panic!("expected failed, got {lost:?}");
    };
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("no longer holds"), "{message}");
    assert_eq!(runs.counted(), 2, "nothing ran again");
}

#[test]
fn task_support_names_real_tools() {
    let runs = std::sync::Arc::new(support::Runs::default());
    let error = McpServer::builder(support::registry(&runs), aaa_tools::Engine::embedded())
        .task_support("nope", TaskSupport::Optional)
        .build()
        .unwrap_err();
    assert_eq!(error, aaa_mcp::BuildError::UnknownTool("nope".to_owned()));
}

//! MCP tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663), backed by the
//! engine: a task outlives the server process that created it.
//!
//! A tool declared with [`McpServerBuilder::task_support`](crate::McpServerBuilder::task_support)
//! and called by a client that declared the extension (at `initialize`, or on the
//! request in `_meta`) becomes a task (an [`AfterInput`](TaskSupport::AfterInput) tool
//! once its first round has asked for input and the answers come): `tools/call` answers at once with the task's id
//! (`resultType: "task"`), and the client polls `tasks/get`, answers the task's input
//! requests with `tasks/update` and may stop it with `tasks/cancel`. A client that did
//! not declare the extension gets a plain result for an
//! [`Optional`](TaskSupport::Optional) tool and JSON-RPC `-32021` (missing required
//! client capability) for a [`Required`](TaskSupport::Required) one.
//!
//! # Where a task lives
//!
//! Nothing of a task is kept in the server's memory:
//!
//! - its record (tool, arguments, the MCP request, the round it is on, the answers
//!   given so far, whether it was cancelled) is a record of the engine's
//!   [`GuardStore`](aaa_tools::GuardStore) (JetStream KV on NATS), written before
//!   `tools/call` answers, so `tasks/get` finds the task at once;
//! - each round of the task is one engine call, alone on a run of its own
//!   (`<task>-r<round>`), so pools, timeouts, the guard, delivery policy and approvals
//!   hold as for any call, and the call runs on whichever worker takes it;
//! - `tasks/get` reads the record and looks the round's call up on the bus (its
//!   outcome, a pending approval, its request): a few lookups, never a read of a log;
//! - once a task has ended, the first `tasks/get` that sees it keeps the answer in
//!   the record, so it outlasts the bus's retention of the call's facts. (A task whose
//!   call's facts the bus let go before anyone saw its end is `failed`, saying so.)
//!
//! So a server that stops, or a NATS gateway that dies, loses no task: another server
//! of the same engine (with the same tenant) answers `tasks/get` for it, and a round
//! whose call was never requested (the server stopped in between) is requested by the
//! next `tasks/get`.
//!
//! # Status
//!
//! | the round's call | task |
//! |---|---|
//! | requested, running or queued | `working` |
//! | waiting for approval, the client can elicit | `input_required`, the approval form under `aaa-tools/approval` |
//! | waiting for approval otherwise ([`Approvals::OperatorOnly`], or a client without elicitation) | `working`, its `statusMessage` says an operator decides |
//! | returned [`McpReply::input_required`](crate::McpReply::input_required) | `input_required`, the tool's requests not answered yet |
//! | completed, or failed with a failure the model reads (bad arguments, timeout, the tool's error, denial, policy) | `completed`, the result inlined (`isError: true` for a failure) |
//! | cancelled | `cancelled` |
//! | failed with a panic, lost on every attempt (`abandoned`), `outcome_unknown`, or an unreadable request | `failed`, with a JSON-RPC error (`-32603`) whose `data` has the failure's kind, message, run and call |
//!
//! `tasks/update` answers the input requests: the approval answer is signalled into
//! the run as the user's decision, bound to the call and its arguments (see
//! [`approval`]); a tool's requests are kept in the record until every
//! one is answered (a client may answer them one at a time), then the next round's
//! call is requested with the answers and the tool's state
//! ([`McpRequest`]), as the next `tools/call` of an
//! `input_required` exchange would be. `tasks/cancel` marks the record and cancels the
//! round's call ([`RunHandle::cancel`](aaa_tools::RunHandle::cancel)).
//!
//! # Decisions
//!
//! - `ttlMs` is `null`: a task lasts as long as the store keeps its record, which the
//!   server never deletes.
//! - A task-supporting tool always becomes a task for a client that declared the
//!   extension, even one that finishes at once: the result is then on the first
//!   `tasks/get`. The server decides before the tool runs (which may be on another
//!   machine), from the declaration: a tool that asks for input inside the task is
//!   [`Optional`](TaskSupport::Optional) or [`Required`](TaskSupport::Required), one
//!   that asks first and then works is [`AfterInput`](TaskSupport::AfterInput).
//! - Progress reports and [`McpCaller`](crate::McpCaller) are not available in a task:
//!   no request is open to carry them. `notifications/tasks` are not sent; clients
//!   poll, every `pollIntervalMs`.
//! - With an idempotency key ([`IDEMPOTENCY_KEY`](crate::IDEMPOTENCY_KEY)), the task's
//!   id is derived from the key, the tool and the arguments: a re-sent `tools/call`
//!   gets the same task, and the tool does not run twice.
//! - Task ids are unguessable (128 random bits) or derived from a key only their
//!   client knows; a server answers for the tasks of its tenant only.

mod observe;
mod record;
pub(crate) mod support;

pub use support::TaskSupport;

use aaa_tools::{CallId, FailureKind, Outcome, RunId, ToolCall};
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, DetailedTask,
    GetTaskParams, GetTaskResult, InputRequests, JsonObject, Task, TaskPayload, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use serde_json::{Map, Value, json};

use crate::approval::{self, APPROVAL_INPUT, Approvals};
use crate::caller::{McpRequest, REQUEST_META_KEY};
use crate::idempotency;
use crate::reply::{self, Shaped, engine_error};
use crate::server::Shared;
use observe::Observed;
use record::TaskRecord;

/// How often a client should poll `tasks/get`, in milliseconds.
pub const POLL_INTERVAL_MS: u64 = 500;

/// Whether the `tools/call` of `tool` becomes a task: `Ok(false)` for a plain call, an
/// error for a tool that needs a task from a client that cannot have one.
/// `later_round`: the request answers an `input_required` result (it carries a
/// `requestState`).
pub(crate) fn becomes_task(
    shared: &Shared,
    tool: &str,
    cx: &RequestContext<RoleServer>,
    later_round: bool,
) -> Result<bool, ErrorData> {
    let Some(support) = shared.tasks.get(tool) else {
        return Ok(false);
    };
    let declared = cx
        .client_capabilities()
        .is_some_and(|caps| caps.supports_tasks());
    match (support, declared) {
        (TaskSupport::Required, false) => Err(ErrorData::missing_required_client_capability(
            rmcp::model::ClientCapabilities::builder()
                .enable_tasks()
                .build(),
        )),
        (_, false) => Ok(false),
        (TaskSupport::AfterInput, true) => Ok(later_round),
        (_, true) => Ok(!later_round),
    }
}

/// Makes a `tools/call` a task, its first round requested with
/// what the request says (and, for a later round of an `input_required` exchange, the
/// tool's state).
pub(crate) async fn start(
    shared: &Shared,
    request: &CallToolRequestParams,
    cx: &RequestContext<RoleServer>,
    arguments: Value,
    state: Option<Value>,
    key: Option<&str>,
) -> Result<CallToolResponse, ErrorData> {
    let mcp = McpRequest {
        input_responses: request.input_responses.clone(),
        state,
        // The session's too: a task answers its approval in band when the client can
        // elicit, however it declared so.
        client_capabilities: cx.client_capabilities(),
        protocol_version: cx.meta.protocol_version(),
        log_level: cx.meta.log_level(),
    };
    let key = key.map(|key| idempotency::round_key(key, request));
    create(
        shared,
        request.name.as_ref(),
        arguments,
        mcp,
        key.as_deref(),
    )
    .await
}

/// Creates the task of a `tools/call`: records it, requests its first round, and
/// answers with its id. With an idempotency `key`, a task made before by the same
/// request is answered instead.
async fn create(
    shared: &Shared,
    tool: &str,
    arguments: Value,
    request: McpRequest,
    key: Option<&str>,
) -> Result<CallToolResponse, ErrorData> {
    let task = match key {
        Some(key) => {
            let digest = idempotency::digest(&[
                "task",
                shared.tenant.as_str(),
                key,
                tool,
                &idempotency::canonical(&arguments),
            ]);
            format!("task-{}", &idempotency::hex(&digest)[..32])
        }
        None => format!("task-{}", idempotency::hex(&rand::random::<[u8; 16]>())),
    };
    let now = record::now();
    let fresh = TaskRecord {
        tool: tool.to_owned(),
        arguments,
        created: now.clone(),
        updated: now,
        round: 1,
        request,
        answers: Default::default(),
        cancelled: false,
        requested: true,
        ended: None,
    };
    let store = shared.engine.store().as_ref();
    if record::load(store, &shared.tenant, &task).await?.is_some() {
        // Made before by the same request (a keyed one, sent again).
        let detailed = get(shared, &task).await?.task;
        return Ok(CreateTaskResult::new(detailed.task).into());
    }
    // The call first, then the record: a task whose record exists has its call on the
    // bus. A server that stops in between leaves a call nobody was told of, as a plain
    // `tools/call` would; a keyed request sent again requests the same call (which the
    // guard runs once) and records the task.
    request_round(shared, &task, &fresh).await?;
    if !record::create(store, &shared.tenant, &task, &fresh).await? {
        let detailed = get(shared, &task).await?.task;
        return Ok(CreateTaskResult::new(detailed.task).into());
    }
    let base = Task::new(
        &task,
        rmcp::model::TaskStatus::Working,
        &fresh.created,
        &fresh.updated,
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    Ok(CreateTaskResult::new(base).into())
}

/// `tasks/get`.
pub(crate) async fn get_task(
    shared: &Shared,
    params: GetTaskParams,
) -> Result<GetTaskResult, ErrorData> {
    get(shared, &params.task_id).await
}

/// The task `task` as it is now.
async fn get(shared: &Shared, task: &str) -> Result<GetTaskResult, ErrorData> {
    let (record, _) = load(shared, task).await?;
    if let Some(ended) = &record.ended {
        let detailed: DetailedTask = serde_json::from_value(ended.clone()).map_err(|error| {
            ErrorData::internal_error(format!("task {task}'s end is unreadable: {error}"), None)
        })?;
        return Ok(GetTaskResult::new(detailed));
    }
    let (run, call) = round_ids(task, record.round)?;
    let mut observed = observe::observe(&shared.engine, &shared.tenant, &run, &call).await?;
    if let Observed::NotRequested = observed {
        if record.requested {
            // Requested, and the bus holds none of its facts any more.
            observed = Observed::Forgotten;
        } else {
            // Recorded, never requested: the server that moved the task on stopped.
            request_round(shared, task, &record).await?;
            mark_requested(shared, task, record.round).await?;
            observed = Observed::Running { since: None };
        }
    }
    let (payload, message, at) = state(shared, &record, &run, &call, observed)?;
    let updated = latest(&record.updated, at.as_deref());
    let mut base = Task::new(task, payload.status(), &record.created, updated)
        .with_poll_interval_ms(POLL_INTERVAL_MS);
    if let Some(message) = message {
        base = base.with_status_message(message);
    }
    let detailed = DetailedTask::new(base, payload);
    if detailed.status().is_terminal() {
        // Kept in the record: the bus may let the call's facts go, the store keeps this.
        let ended = serde_json::to_value(&detailed).expect("a task serializes");
        let store = shared.engine.store().as_ref();
        record::change(store, &shared.tenant, task, |record| {
            let write = record.ended.is_none();
            record.ended.get_or_insert_with(|| ended.clone());
            Ok((write, ()))
        })
        .await?;
    }
    Ok(GetTaskResult::new(detailed))
}

/// Notes in `task`'s record that its round `round` was requested.
async fn mark_requested(shared: &Shared, task: &str, round: u32) -> Result<(), ErrorData> {
    let store = shared.engine.store().as_ref();
    record::change(store, &shared.tenant, task, |record| {
        let write = record.round == round && !record.requested;
        record.requested |= record.round == round;
        Ok((write, ()))
    })
    .await
    .map(drop)
}

/// What the task shows for its round's call: the payload (which carries the status),
/// a status message, and when the call last changed.
fn state(
    shared: &Shared,
    record: &TaskRecord,
    run: &RunId,
    call: &CallId,
    observed: Observed,
) -> Result<(TaskPayload, Option<String>, Option<String>), ErrorData> {
    Ok(match observed {
        Observed::NotRequested => (TaskPayload::Working, None, None),
        Observed::Running { since } => (TaskPayload::Working, None, since),
        Observed::AwaitingApproval { requested, since } => {
            if in_band(shared, record) {
                let mut input_requests = InputRequests::new();
                input_requests.insert(
                    APPROVAL_INPUT.to_owned(),
                    approval::input_request(&requested),
                );
                (TaskPayload::InputRequired { input_requests }, None, since)
            } else {
                let message = format!(
                    "waiting for an operator's approval on the bus (run {run}, call {call})"
                );
                (TaskPayload::Working, Some(message), since)
            }
        }
        Observed::Finished { outcome, at } => (finished(record, run, call, &outcome)?, None, at),
        Observed::Forgotten => {
            let message = format!(
                "the bus no longer holds the facts of this task's call (run {run}, call {call}): \
                 its outcome is not known here"
            );
            (failed(message, None), None, None)
        }
    })
}

/// The payload of a task whose round's call has `outcome`.
fn finished(
    record: &TaskRecord,
    run: &RunId,
    call: &CallId,
    outcome: &Outcome,
) -> Result<TaskPayload, ErrorData> {
    if let Some(failure) = outcome.failure() {
        match failure.kind {
            FailureKind::Cancelled => return Ok(TaskPayload::Cancelled),
            FailureKind::Panic
            | FailureKind::Abandoned
            | FailureKind::OutcomeUnknown
            | FailureKind::BadRequest => {
                let data = json!({
                    "kind": failure.kind.as_str(),
                    "message": failure.message,
                    "run": run.as_str(),
                    "call": call.as_str(),
                });
                return Ok(failed(outcome.for_model(), Some(data)));
            }
            _ => {}
        }
    }
    Ok(match shape(outcome, run, call)? {
        Shaped::Complete(result) => TaskPayload::Completed {
            result: object(serde_json::to_value(result).expect("a tool result serializes")),
        },
        Shaped::InputRequired(_, _) if record.cancelled => TaskPayload::Cancelled,
        Shaped::InputRequired(mut input_requests, _) => {
            input_requests.retain(|key, _| !record.answers.contains_key(key));
            TaskPayload::InputRequired { input_requests }
        }
    })
}

/// `tasks/update`: the client's answers to the task's input requests. Answers to
/// requests the task is not waiting for (unknown keys, requests answered before, a
/// task that waits for nothing) are ignored, and acknowledged like the others.
pub(crate) async fn update_task(
    shared: &Shared,
    params: UpdateTaskParams,
    client: &str,
) -> Result<(), ErrorData> {
    let task = params.task_id.as_str();
    let (record, _) = load(shared, task).await?;
    let (run, call) = round_ids(task, record.round)?;
    match observe::observe(&shared.engine, &shared.tenant, &run, &call).await? {
        Observed::AwaitingApproval { requested, .. } if in_band(shared, &record) => {
            let Some(response) = params.input_responses.get(APPROVAL_INPUT) else {
                return Ok(());
            };
            let approve = approval::answer(response).ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("the answer under `{APPROVAL_INPUT}` must be an elicitation result"),
                    None,
                )
            })?;
            let handle = shared.engine.run_for(shared.tenant.clone(), run);
            approval::decide(&handle, &call, &requested.fingerprint, approve, client)
                .await
                .map_err(engine_error)
        }
        Observed::Finished { outcome, .. } => match shape(&outcome, &run, &call)? {
            Shaped::InputRequired(requests, state) => {
                answer_tool(shared, task, record.round, &requests, state, &params).await
            }
            Shaped::Complete(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Keeps the client's answers to the tool's input requests; once every request is
/// answered, moves the task to its next round and requests it.
async fn answer_tool(
    shared: &Shared,
    task: &str,
    round: u32,
    requests: &InputRequests,
    state: Option<Value>,
    params: &UpdateTaskParams,
) -> Result<(), ErrorData> {
    let store = shared.engine.store().as_ref();
    let next = record::change(store, &shared.tenant, task, |record| {
        if record.round != round || record.cancelled || record.ended.is_some() {
            // Answered meanwhile (a repeat of this update), cancelled, or over.
            return Ok((false, None));
        }
        let before = record.answers.len();
        for (key, value) in &params.input_responses {
            if requests.contains_key(key) {
                record.answers.insert(key.clone(), value.clone());
            }
        }
        if requests.keys().any(|key| !record.answers.contains_key(key)) {
            return Ok((record.answers.len() != before, None));
        }
        let answers = std::mem::take(&mut record.answers);
        record.round += 1;
        record.requested = false;
        record.request.input_responses = Some(answers);
        record.request.state = state.clone();
        Ok((true, Some(record.clone())))
    })
    .await?;
    match next {
        None => Err(unknown(task)),
        Some(Some(record)) => {
            request_round(shared, task, &record).await?;
            mark_requested(shared, task, record.round).await
        }
        Some(None) => Ok(()),
    }
}

/// `tasks/cancel`: marks the task cancelled and cancels its round's call. A finished
/// task stays as it is.
pub(crate) async fn cancel_task(
    shared: &Shared,
    params: CancelTaskParams,
) -> Result<(), ErrorData> {
    let task = params.task_id.as_str();
    let store = shared.engine.store().as_ref();
    let round = record::change(store, &shared.tenant, task, |record| {
        if record.ended.is_some() {
            // Over: it stays as it ended.
            return Ok((false, None));
        }
        let write = !record.cancelled;
        record.cancelled = true;
        Ok((write, Some(record.round)))
    })
    .await?
    .ok_or_else(|| unknown(task))?;
    let Some(round) = round else {
        return Ok(());
    };
    let (run, call) = round_ids(task, round)?;
    if let Observed::Finished { .. } | Observed::Forgotten =
        observe::observe(&shared.engine, &shared.tenant, &run, &call).await?
    {
        return Ok(());
    }
    shared
        .engine
        .run_for(shared.tenant.clone(), run)
        .cancel_with_reason(&call, "the MCP client cancelled the task")
        .await
        .map_err(engine_error)
}

/// Requests the call of the task's current round (again, after a stop: the guard runs a
/// call id once however often it is requested).
async fn request_round(shared: &Shared, task: &str, record: &TaskRecord) -> Result<(), ErrorData> {
    let (run, call) = round_ids(task, record.round)?;
    let mut meta = Map::new();
    if record.request != McpRequest::default() {
        meta.insert(REQUEST_META_KEY.to_owned(), json!(record.request));
    }
    let call = ToolCall::new(record.tool.clone(), record.arguments.clone())
        .with_id(call)
        .with_meta(meta);
    shared
        .engine
        .run_for(shared.tenant.clone(), run)
        .request_call(call)
        .await
        .map(drop)
        .map_err(engine_error)
}

/// The run and call of `task`'s round `round`.
fn round_ids(task: &str, round: u32) -> Result<(RunId, CallId), ErrorData> {
    let id = format!("{task}-r{round}");
    let run = RunId::new(&id).map_err(|_| unknown(task))?;
    let call = CallId::new(&id).map_err(|_| unknown(task))?;
    Ok((run, call))
}

/// The record of `task`, or `-32602` when there is none.
async fn load(shared: &Shared, task: &str) -> Result<(TaskRecord, aaa_guard::Revision), ErrorData> {
    if RunId::new(task).is_err() {
        return Err(unknown(task));
    }
    record::load(shared.engine.store().as_ref(), &shared.tenant, task)
        .await?
        .ok_or_else(|| unknown(task))
}

/// Whether the task's approval is asked of the client's user (else an operator's).
fn in_band(shared: &Shared, record: &TaskRecord) -> bool {
    shared.approvals != Approvals::OperatorOnly
        && record
            .request
            .client_capabilities
            .as_ref()
            .is_some_and(|caps| caps.elicitation.is_some())
}

/// `-32602` for a task id this server does not know.
fn unknown(task: &str) -> ErrorData {
    let shown: String = task.chars().take(80).collect();
    ErrorData::invalid_params(
        format!("unknown task {shown:?}"),
        Some(json!({"taskId": shown})),
    )
}

/// A JSON object out of `value`, which is one (a tool result, an error object).
fn object(value: Value) -> JsonObject {
    let Value::Object(object) = value else {
        unreachable!("a result and an error serialize to objects")
    };
    object
}

/// The MCP result of a round's `outcome` (a task's result never names the call in its
/// `_meta`: the task's id does).
fn shape(outcome: &Outcome, run: &RunId, call: &CallId) -> Result<Shaped, ErrorData> {
    reply::shape(outcome, run, call, false).map_err(|m| ErrorData::internal_error(m, None))
}

/// A `failed` task: a JSON-RPC internal error (`-32603`) with `message`, and `data`
/// when there is more to say.
fn failed(message: String, data: Option<Value>) -> TaskPayload {
    let mut error = json!({"code": rmcp::model::ErrorCode::INTERNAL_ERROR.0, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    TaskPayload::Failed {
        error: object(error),
    }
}

/// The later of two RFC 3339 times (the first when the second is absent or unreadable).
fn latest<'a>(a: &'a str, b: Option<&'a str>) -> &'a str {
    let parse = |text: &str| humantime::parse_rfc3339_weak(text).ok();
    match b {
        Some(b) if parse(b) > parse(a) => b,
        _ => a,
    }
}

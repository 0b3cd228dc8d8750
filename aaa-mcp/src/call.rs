//! `tools/call`: one MCP request becomes one engine call (or finds the call it names),
//! and the call's facts become the request's notifications and result.
//!
//! In order:
//!
//! 1. the tool is looked up in the registry; an unknown name is a JSON-RPC `-32602`
//!    naming the closest tools (the engine is not asked);
//! 2. a `requestState` (the second round of an `input_required` result) is opened and
//!    checked against the tool and arguments; a bad one is `-32602`;
//! 3. the call's run and id: derived from the idempotency key when the request has one
//!    ([`IDEMPOTENCY_KEY`](crate::IDEMPOTENCY_KEY)), else a fresh id in the server's run;
//! 4. the call is requested through the engine ([`RunHandle::request_call`]), with what
//!    the tool may want to know of the MCP request ([`McpRequest`]);
//!    the arguments are checked by the engine against the tool's schema, and a
//!    mismatch is a failure the model reads (`isError`), as MCP asks;
//! 5. until the outcome arrives: progress facts become `notifications/progress` (when
//!    the client sent a progress token; only growing values, only from the latest
//!    attempt), an approval request is put to the client's user or left to an
//!    operator ([`approval`]), and a cancelled request cancels the call ([`cancel`]);
//! 6. the outcome becomes the result ([`reply`]).
//!
//! Cancellation ([`cancel`]): a `notifications/cancelled` for the request (or, on
//! protocol `2026-07-28` over HTTP, a closed response stream) cancels the engine call,
//! whose outcome becomes a `cancelled` failure on its run, and no response is sent. A
//! request that stops for any other reason (its session ended, the server stopped)
//! leaves the call running, and its outcome stays on its run: sent again with the
//! same idempotency key, the request gets it.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use aaa_tools::event::{ApprovalDecision, ApprovalRequested, Event};
use aaa_tools::{CallId, EngineError, Outcome, RunHandle, RunId, ToolCall};
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ElicitResult, InputRequests,
    InputRequiredResult, MetaObject, ProgressToken, ProtocolVersion,
};
use rmcp::service::{ElicitationMode, RequestContext, ServiceError};
use rmcp::{ErrorData, RoleServer};
use serde_json::{Map, Value, json};

use crate::approval::{self, APPROVAL_INPUT, Approvals};
use crate::caller::{self, McpRequest, REQUEST_META_KEY};
use crate::cancel::{self, Session};
use crate::follow::{Fact, Follower, OUTCOME_SEEN, Watch};
use crate::forward::Forwarded;
use crate::idempotency;
use crate::reply::{self, Shaped, engine_error};
use crate::server::Shared;
use crate::state::Sealed;

/// How long a result waits for the progress reported before it to be forwarded.
const CATCH_UP_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The `_meta` key of a result that says how the call's approval was decided.
pub const APPROVAL_META_KEY: &str = "aaa-tools/approval";

/// Serves one `tools/call`.
pub(crate) async fn call_tool(
    shared: &Shared,
    session: &Session,
    request: CallToolRequestParams,
    cx: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.as_ref();
    if shared.registry.get(name).is_none() {
        let closest: Vec<&str> = shared.registry.closest_names(name);
        return Err(ErrorData::invalid_params(
            shared.registry.unknown_tool_message(name),
            Some(json!({"tool": name, "closest": closest})),
        ));
    }
    if let Some(required) = shared.required.get(name) {
        check_capabilities(required, &cx)?;
    }
    let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
    let key = idempotency::key_of(&cx.meta.0).map_err(|m| ErrorData::invalid_params(m, None))?;
    let named = reply::ids_asked(&cx.meta.0).map_err(|m| ErrorData::invalid_params(m, None))?;
    let later_round = request.request_state.is_some();
    let task = crate::tasks::becomes_task(shared, name, &cx, later_round)?;
    if task && !later_round {
        return crate::tasks::start(shared, &request, &cx, arguments, None, key).await;
    }
    let mut tool_state = None;
    if let Some(text) = &request.request_state {
        match shared.seal.open(text, &shared.tenant, name, &arguments)? {
            Sealed::Approval {
                run,
                call,
                fingerprint,
            } => {
                let pending = Pending {
                    run,
                    call,
                    fingerprint,
                };
                return resume_approval(shared, session, &request, &cx, &arguments, pending, named)
                    .await;
            }
            Sealed::Tool { state } if task => {
                return crate::tasks::start(shared, &request, &cx, arguments, state, key).await;
            }
            Sealed::Tool { state } => tool_state = state,
        }
    }
    let keyed = key.is_some();
    let (run, call_id) = match key {
        Some(key) => {
            let key = idempotency::round_key(key, &request);
            let (run, call) = idempotency::keyed_ids(&shared.tenant, &key, name, &arguments);
            (
                shared.engine.run_for(shared.tenant.clone(), run),
                Some(call),
            )
        }
        None => (shared.run.clone(), None),
    };
    let mcp = McpRequest {
        input_responses: request.input_responses.clone(),
        state: tool_state,
        client_capabilities: cx.meta.client_capabilities(),
        protocol_version: cx.meta.protocol_version(),
        log_level: cx.meta.log_level(),
    };
    let mut meta = Map::new();
    if mcp != McpRequest::default() {
        meta.insert(REQUEST_META_KEY.to_owned(), json!(mcp));
    }
    let call = ToolCall::new(name.to_owned(), arguments.clone()).with_meta(meta);
    // A keyed call's id is derived from its key, and may name a call made before; an
    // unkeyed one is new (and known now, to follow its facts before it is requested).
    let call = match call_id {
        Some(id) => call.with_id(id),
        None => call.with_new_id(),
    };
    let call_id = call.call_id.clone().expect("set above");
    let ride = Ride::open(shared, &run, &call_id).await?;
    let _session = shared.share_sessions.then(|| {
        caller::register(
            &shared.tenant,
            run.run_id(),
            &call_id,
            cx.peer.clone(),
            cx.meta.log_level(),
        )
    });
    let outcome = run.outcome(&call_id);
    tokio::pin!(outcome);
    if keyed {
        // A keyed call may have an outcome already (this is a repeat): asking for it
        // before requesting looks it up, and a repeat of a finished call is answered
        // without a request at all.
        if let Poll::Ready(found) = futures::poll!(&mut outcome) {
            let outcome = found.map_err(engine_error)?;
            let waited = Waited::Outcome {
                outcome,
                note: None,
            };
            return finish(shared, &run, &call_id, (name, &arguments), named, waited);
        }
    }
    // Registered before the request: a cancel that follows it finds the call.
    let _registered = session.in_flight.register(&cx, &run, &call_id);
    run.request_call(call).await.map_err(engine_error)?;
    let waited = Wait {
        shared,
        session,
        run: &run,
        call: &call_id,
        cx: &cx,
        decided: None,
    }
    .until_done(ride.watch, outcome)
    .await?;
    finish(shared, &run, &call_id, (name, &arguments), named, waited)
}

/// The second round of an approval asked in an `input_required` result: the user's
/// answer is signalled into the run, then the call is waited for as usual.
async fn resume_approval(
    shared: &Shared,
    session: &Session,
    request: &CallToolRequestParams,
    cx: &RequestContext<RoleServer>,
    arguments: &Value,
    pending: Pending,
    named: bool,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.as_ref();
    let run = if &pending.run == shared.run.run_id() {
        shared.run.clone()
    } else {
        shared
            .engine
            .run_for(shared.tenant.clone(), pending.run.clone())
    };
    let answer = request
        .input_responses
        .as_ref()
        .and_then(|responses| responses.get(APPROVAL_INPUT))
        .and_then(approval::answer);
    let Some(approve) = answer else {
        // No usable answer: ask again, with the same state.
        let requested = pending.request(name, arguments);
        return ask_in_band(shared, &requested, &pending, name, arguments);
    };
    let client = client_name(cx);
    let ride = Ride::open(shared, &run, &pending.call).await?;
    let _registered = session.in_flight.register(cx, &run, &pending.call);
    approval::decide(&run, &pending.call, &pending.fingerprint, approve, &client)
        .await
        .map_err(engine_error)?;
    let outcome = run.outcome(&pending.call);
    tokio::pin!(outcome);
    let waited = Wait {
        shared,
        session,
        run: &run,
        call: &pending.call,
        cx,
        decided: Some(client_note(approve, &client)),
    }
    .until_done(ride.watch, outcome)
    .await?;
    finish(
        shared,
        &run,
        &pending.call,
        (name, arguments),
        named,
        waited,
    )
}

/// The result of a finished wait.
///
/// The tool's name and arguments come as a pair; `named` says whether the request
/// asked for the ids of the engine's call on a success ([`reply::ids_asked`]).
fn finish(
    shared: &Shared,
    run: &RunHandle,
    call: &CallId,
    (name, arguments): (&str, &Value),
    named: bool,
    waited: Waited,
) -> Result<CallToolResponse, ErrorData> {
    let (outcome, note) = match waited {
        Waited::InputRequired(result) => return Ok(result.into()),
        Waited::Outcome { outcome, note } => (outcome, note),
    };
    let shaped = reply::shape(&outcome, run.run_id(), call, named)
        .map_err(|message| ErrorData::internal_error(message, None))?;
    match shaped {
        Shaped::Complete(mut result) => {
            if let Some(note) = note {
                result
                    .meta
                    .get_or_insert_with(MetaObject::new)
                    .insert(APPROVAL_META_KEY.to_owned(), note);
            }
            Ok(result.into())
        }
        Shaped::InputRequired(requests, state) => {
            let sealed =
                shared
                    .seal
                    .seal(&Sealed::Tool { state }, &shared.tenant, name, arguments)?;
            Ok(InputRequiredResult::new(Some(requests), Some(sealed)).into())
        }
    }
}

/// A call waiting for approval, as an `input_required` state names it.
struct Pending {
    run: RunId,
    call: CallId,
    fingerprint: String,
}

impl Pending {
    /// The approval request the state stands for (to ask again).
    fn request(&self, name: &str, arguments: &Value) -> ApprovalRequested {
        serde_json::from_value(json!({
            "call_id": self.call, "name": name, "arguments": arguments,
            "fingerprint": self.fingerprint,
        }))
        .expect("an approval request's fields")
    }
}

/// An `input_required` result asking the user to approve `requested`.
fn ask_in_band(
    shared: &Shared,
    requested: &ApprovalRequested,
    pending: &Pending,
    name: &str,
    arguments: &Value,
) -> Result<CallToolResponse, ErrorData> {
    let state = Sealed::Approval {
        run: pending.run.clone(),
        call: pending.call.clone(),
        fingerprint: pending.fingerprint.clone(),
    };
    let sealed = shared.seal.seal(&state, &shared.tenant, name, arguments)?;
    let mut requests = InputRequests::new();
    requests.insert(
        APPROVAL_INPUT.to_owned(),
        approval::input_request(requested),
    );
    Ok(InputRequiredResult::new(Some(requests), Some(sealed)).into())
}

/// A call's registration with the follower of its run (the server's shared one, or
/// one of its own for a keyed run), made before the call is requested.
struct Ride {
    watch: Watch,
    /// The follower of a keyed run, kept while the call is waited for.
    _own: Option<Follower>,
}

impl Ride {
    async fn open(shared: &Shared, run: &RunHandle, call: &CallId) -> Result<Ride, ErrorData> {
        if run.run_id() == shared.run.run_id() {
            let follower = shared.follower().await.map_err(engine_error)?;
            Ok(Ride {
                watch: follower.watch(call),
                _own: None,
            })
        } else {
            let follower = Follower::start(run).await.map_err(engine_error)?;
            Ok(Ride {
                watch: follower.watch(call),
                _own: Some(follower),
            })
        }
    }
}

/// How a wait ended.
enum Waited {
    /// The call's outcome, and how its approval was decided (when it needed one).
    Outcome {
        outcome: Outcome,
        note: Option<Value>,
    },
    /// The user must answer an approval form first (protocol `2026-07-28`).
    InputRequired(InputRequiredResult),
}

/// Waiting for one call's outcome while its facts come in.
struct Wait<'a> {
    shared: &'a Shared,
    session: &'a Session,
    run: &'a RunHandle,
    call: &'a CallId,
    cx: &'a RequestContext<RoleServer>,
    /// How this request decided the call's approval, when it did.
    decided: Option<Value>,
}

type Asking = BoxFuture<'static, (ApprovalRequested, Result<ElicitResult, ServiceError>)>;

impl Wait<'_> {
    async fn until_done(
        mut self,
        mut watch: Watch,
        mut outcome: Pin<&mut impl Future<Output = Result<Outcome, EngineError>>>,
    ) -> Result<Waited, ErrorData> {
        let token = self.cx.meta.get_progress_token();
        let mut progress = Forwarded::default();
        let mut asking: Option<Asking> = None;
        let mut note: Option<Value> = self.decided.clone();
        let mut watching = true;
        // Whether someone else (an operator) decides on the call's approval.
        let mut operator = false;
        loop {
            tokio::select! {
                outcome = &mut outcome => {
                    let outcome = outcome.map_err(engine_error)?;
                    let reports = progress.heard() || self.shared.reports_progress(outcome.name());
                    let behind = (token.is_some() && reports) || (operator && note.is_none());
                    if watching && behind {
                        self.catch_up(&mut watch, token.as_ref(), &mut progress, &mut note).await;
                    }
                    return Ok(Waited::Outcome { outcome, note });
                }
                fact = watch.recv(), if watching => match fact {
                    None => watching = false,
                    Some(Fact::Progress(report)) => {
                        self.shared.mark_reports_progress(&report.name);
                        progress.reports += 1;
                        if let Some(token) = &token {
                            progress.forward(self.cx, token, &report).await;
                        }
                    }
                    Some(Fact::ApprovalRequested(requested)) => {
                        if self.decided.is_some() || asking.is_some() {
                            continue;
                        }
                        match self.route(&requested) {
                            Route::InBand => {
                                let pending = Pending {
                                    run: self.run.run_id().clone(),
                                    call: self.call.clone(),
                                    fingerprint: requested.fingerprint.clone(),
                                };
                                let name = requested.name.to_string();
                                let result = ask_in_band(
                                    self.shared, &requested, &pending, &name, &requested.arguments,
                                )?;
                                let CallToolResponse::InputRequired(result) = result else {
                                    unreachable!("ask_in_band asks");
                                };
                                return Ok(Waited::InputRequired(result));
                            }
                            Route::Elicit => {
                                let peer = self.cx.peer.clone();
                                let form = approval::form(&requested);
                                asking = Some(Box::pin(async move {
                                    let answer = peer.create_elicitation(form).await;
                                    (requested, answer)
                                }));
                            }
                            Route::Operator => {
                                operator = true;
                                if let Some(token) = &token {
                                    progress.waiting_for_operator(self.cx, token, self.run, self.call).await;
                                }
                            }
                        }
                    }
                    Some(Fact::Settled) => {}
                    Some(Fact::Decided { granted, decision }) => {
                        note.get_or_insert_with(|| operator_note(granted, &decision));
                    }
                },
                (requested, answer) = async { asking.as_mut().expect("guarded").await }, if asking.is_some() => {
                    asking = None;
                    match answer {
                        Ok(result) => {
                            let approve = approval::approves(&result);
                            let client = client_name(self.cx);
                            approval::decide(self.run, self.call, &requested.fingerprint, approve, &client)
                                .await
                                .map_err(engine_error)?;
                            self.decided = Some(client_note(approve, &client));
                            note = self.decided.clone();
                        }
                        Err(error) => {
                            operator = true;
                            tracing::info!(%error, call = %self.call, "the client could not ask its user; an operator decides");
                            if let Some(token) = &token {
                                progress.waiting_for_operator(self.cx, token, self.run, self.call).await;
                            }
                        }
                    }
                }
                () = self.cx.ct.cancelled() => {
                    // rmcp stopped the request: no response goes out. A
                    // `notifications/cancelled` cancels the call through the handler
                    // (`cancel::InFlight`); a closed stream does here, where the
                    // protocol says it is a cancel.
                    if cancel::disconnect_is_cancel(self.cx, self.session.stopping.as_ref()) {
                        cancel::cancel(self.run, self.call, "the MCP client closed the request's stream").await;
                    }
                    return Err(ErrorData::invalid_request(
                        format!("the request was stopped (call {} of run {})", self.call, self.run.run_id()),
                        None,
                    ));
                }
            }
        }
    }

    /// Forwards the progress the tool reported before its outcome (and reads an
    /// operator's decision made before it): publishes [`OUTCOME_SEEN`] on the run and
    /// forwards what the follower hands over until it comes back ([`Fact::Settled`]).
    /// Done for a call whose client asked for progress of a tool that reports it
    /// (this call's reports, or an earlier call's, say so), or whose approval an
    /// operator decided; every other call's result goes out at once. Bounded, so a bus
    /// that fails to return the mark cannot hold the result.
    async fn catch_up(
        &self,
        watch: &mut Watch,
        token: Option<&ProgressToken>,
        progress: &mut Forwarded,
        note: &mut Option<Value>,
    ) {
        let engine = self.run.engine();
        let event = Event::new(
            OUTCOME_SEEN,
            engine.source(),
            self.run.tenant(),
            self.run.run_id(),
            Some(self.call),
            json!({"call_id": self.call}),
        );
        if let Err(error) = engine.publish(&event).await {
            tracing::debug!(%error, "could not publish outcome_seen; the last progress may follow the result");
            return;
        }
        let drain = async {
            while let Some(fact) = watch.recv().await {
                match fact {
                    Fact::Settled => return,
                    Fact::Progress(report) => {
                        if let Some(token) = token {
                            progress.forward(self.cx, token, &report).await;
                        }
                    }
                    Fact::Decided { granted, decision } => {
                        note.get_or_insert_with(|| operator_note(granted, &decision));
                    }
                    Fact::ApprovalRequested(_) => {}
                }
            }
        };
        if tokio::time::timeout(CATCH_UP_LIMIT, drain).await.is_err() {
            tracing::debug!(call = %self.call, "the follower did not reach the outcome in time");
        }
    }

    /// Where an approval request goes.
    fn route(&self, _requested: &ApprovalRequested) -> Route {
        if self.shared.approvals == Approvals::OperatorOnly {
            return Route::Operator;
        }
        let modern = self
            .cx
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if modern {
            let can_elicit = self
                .cx
                .client_capabilities()
                .is_some_and(|caps| caps.elicitation.is_some());
            return if can_elicit {
                Route::InBand
            } else {
                Route::Operator
            };
        }
        if self
            .cx
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
        {
            Route::Elicit
        } else {
            Route::Operator
        }
    }
}

/// Where an approval request goes.
enum Route {
    /// An `input_required` result (protocol `2026-07-28`).
    InBand,
    /// An `elicitation/create` request to the client.
    Elicit,
    /// An operator on the bus.
    Operator,
}

/// How the client user's decision is noted in the result.
fn client_note(approved: bool, client: &str) -> Value {
    json!({"by": "client", "approved": approved, "approver": client})
}

/// How an operator's decision is noted in the result.
fn operator_note(granted: bool, decision: &ApprovalDecision) -> Value {
    json!({"by": "operator", "approved": granted, "approver": decision.approver})
}

/// Refuses a call whose client lacks a capability the tool needs.
fn check_capabilities(
    required: &ClientCapabilities,
    cx: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    let declared = cx.client_capabilities().unwrap_or_default();
    let missing = (required.sampling.is_some() && declared.sampling.is_none())
        || (required.elicitation.is_some() && declared.elicitation.is_none())
        || (required.roots.is_some() && declared.roots.is_none());
    if missing {
        Err(ErrorData::missing_required_client_capability(
            required.clone(),
        ))
    } else {
        Ok(())
    }
}

/// The name of the client, for approvals it decides.
pub(crate) fn client_name(cx: &RequestContext<RoleServer>) -> String {
    cx.client_info()
        .map(|info| info.name)
        .unwrap_or_else(|| "unnamed client".to_owned())
}

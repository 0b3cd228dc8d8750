//! The engine end to end, through the public API: requests in, facts out.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aaa_tools::RecordKind;
use aaa_tools::bus::{Bus, MemoryBus};
use aaa_tools::event::{
    self, APPROVAL_REQUESTED, ApprovalRefused, ApprovalRequested, Attachment, Event,
};
use aaa_tools::{
    ApprovalDecision, CallId, Engine, FailureKind, GuardPolicy, MemoryStore, Outcome, PostCall,
    PreCall, RunHandle, RunId, State, TenantId, ToolCall, ToolContext, ToolError, ToolHandler,
    ToolRegistry, tool, tools,
};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Add two integers.
#[tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Report what the context says.
#[tool]
async fn whoami(ctx: &ToolContext) -> Value {
    json!({
        "run": ctx.run_id().as_str(),
        "call": ctx.call_id().as_str(),
        "tenant": ctx.tenant().as_str(),
        "attempt": ctx.attempt(),
        "fence": ctx.fence(),
        "key": ctx.idempotency_key(),
        "meta": ctx.meta(),
    })
}

/// Fail for the model.
#[tool]
async fn refuse(reason: String) -> Result<(), ToolError> {
    Err(ToolError::new(reason))
}

/// Book a day; days before 2026 are refused as bad arguments.
#[tool]
async fn book(day: String) -> Result<String, ToolError> {
    if day.as_str() < "2026" {
        Err(aaa_tools::ToolArgsError::single(
            "book",
            "day",
            "must not be in the past",
        ))?;
    }
    Ok(day)
}

/// Fail in a way not meant for the model.
#[tool]
async fn broken() -> Result<u8, ToolError> {
    Ok("x".parse::<u8>()?)
}

/// Panic.
#[tool]
async fn explode() -> u8 {
    panic!("kaboom")
}

/// Wait until cancelled, and record that it was.
#[tool(timeout_s = 0.2)]
async fn slow(ctx: ToolContext, seen: State<Seen>) -> String {
    ctx.cancelled().await;
    seen.cancelled.fetch_add(1, Ordering::SeqCst);
    "cancelled".into()
}

/// Block the thread past the timeout.
#[tool(timeout_s = 0.05)]
fn slow_sync(seen: State<Seen>) -> String {
    std::thread::sleep(Duration::from_millis(300));
    seen.sync_finished.fetch_add(1, Ordering::SeqCst);
    "late".into()
}

/// Pay someone.
#[tool(requires_approval = true, pool = "solo")]
async fn pay(to: String, cents: u64, seen: State<Seen>) -> String {
    seen.paid.fetch_add(1, Ordering::SeqCst);
    format!("paid {cents} to {to}")
}

/// Sleep for a while, then echo.
#[tool]
async fn echo_after(text: String, millis: u64) -> String {
    tokio::time::sleep(Duration::from_millis(millis)).await;
    text
}

/// Hold the only slot of pool `solo` until released.
#[tool(pool = "solo")]
async fn hold(gate: State<Gate>) -> String {
    gate.entered.notify_one();
    gate.release.notified().await;
    "released".into()
}

/// Delegate down a chain: depth 0 answers, others call themselves with depth - 1.
#[tool(pool = "solo")]
async fn delegate(ctx: ToolContext, depth: u32) -> Result<String, ToolError> {
    if depth == 0 {
        return Ok("bottom".into());
    }
    let outcome = ctx
        .call_child("delegate", json!({ "depth": depth - 1 }))
        .await?;
    Ok(format!("{depth}>{}", outcome.for_model()))
}

/// A temperature reading.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Reading {
    /// Degrees Celsius.
    degrees: f64,
    /// Decimals to show; none when left out.
    #[serde(default)]
    decimals: usize,
}

/// Say how warm it is.
#[tool]
async fn warmth(reading: Reading) -> String {
    format!("{:.*}°C", reading.decimals, reading.degrees)
}

/// Read a secret.
#[tool]
async fn secret() -> String {
    "token=abc123".into()
}

#[derive(Default)]
struct Seen {
    cancelled: AtomicUsize,
    sync_finished: AtomicUsize,
    paid: AtomicUsize,
}

#[derive(Default)]
struct Gate {
    entered: Notify,
    release: Notify,
}

struct World {
    engine: Engine,
    seen: Arc<Seen>,
    gate: Arc<Gate>,
    _worker: aaa_tools::HandlerHandle,
}

fn registry(seen: &Arc<Seen>, gate: &Arc<Gate>) -> ToolRegistry {
    ToolRegistry::builder()
        .tools(tools![
            add, whoami, refuse, book, broken, explode, slow, slow_sync, pay, echo_after, hold,
            delegate, warmth, secret
        ])
        .state_arc(seen.clone())
        .state_arc(gate.clone())
        .max_args_bytes(1024)
        .build()
        .unwrap()
}

fn handler(seen: &Arc<Seen>, gate: &Arc<Gate>) -> ToolHandler {
    ToolHandler::new(registry(seen, gate))
        .pool("solo", 1)
        .approval_timeout(Duration::from_secs(3600))
        .guards(
            GuardPolicy::new()
                .before(
                    |call| match call.arguments.get("a").and_then(Value::as_i64) {
                        Some(13) => {
                            PreCall::Reject("13 is not allowed here; pick another number".into())
                        }
                        _ => PreCall::Allow,
                    },
                )
                .after(|call, result| match (&*call.tool, result) {
                    ("secret", Value::String(text)) if text.contains("token=") => {
                        PostCall::Redact(json!("token=[redacted]"))
                    }
                    ("add", Value::Number(n)) if n.as_i64() == Some(666) => {
                        PostCall::Reject("that number is withheld".into())
                    }
                    _ => PostCall::Pass,
                }),
        )
}

async fn world() -> World {
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(Gate::default());
    let engine = aaa_tests::embedded();
    let worker = handler(&seen, &gate).attach(&engine).await.unwrap();
    World {
        engine,
        seen,
        gate,
        _worker: worker,
    }
}

fn failure(outcome: &Outcome) -> (FailureKind, &str) {
    let f = outcome
        .failure()
        .unwrap_or_else(|| panic!("expected a failure, got {outcome:?}"));
    (f.kind, f.message.as_str())
}

async fn next_approval(run: &RunHandle) -> ApprovalRequested {
    let mut facts = run.facts().await.unwrap();
    while let Some(fact) = facts.next().await {
        let fact = fact.unwrap();
        if fact.kind == APPROVAL_REQUESTED {
            return fact.data_as().unwrap();
        }
    }
    panic!("the run ended without an approval request")
}

/// The approval request of `call` in the run.
async fn next_approval_of(run: &RunHandle, call: &CallId) -> ApprovalRequested {
    let mut facts = run.facts().await.unwrap();
    while let Some(fact) = facts.next().await {
        let fact = fact.unwrap();
        if fact.kind == APPROVAL_REQUESTED {
            let asked: ApprovalRequested = fact.data_as().unwrap();
            if asked.call_id == *call {
                return asked;
            }
        }
    }
    panic!("the run ended without an approval request for {call}")
}

/// The `nth` (from 1) `aaa.approval.refused` fact of the run, waiting for it.
async fn next_refusal(run: &RunHandle, nth: usize) -> ApprovalRefused {
    let mut facts = run.facts().await.unwrap();
    let mut seen = 0;
    let wait = async {
        while let Some(fact) = facts.next().await {
            let fact = fact.unwrap();
            if fact.kind == aaa_tools::event::APPROVAL_REFUSED {
                seen += 1;
                if seen == nth {
                    return fact.data_as().unwrap();
                }
            }
        }
        panic!("the run ended without refusal {nth}")
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("no approval decision was refused")
}

/// Whether the run holds an outcome fact for `call` now.
async fn has_outcome(run: &RunHandle, call: &CallId) -> bool {
    aaa_tests::facts_until_now(run).await.iter().any(|fact| {
        (fact.kind == event::TOOL_COMPLETED || fact.kind == event::TOOL_FAILED)
            && fact.subject.as_deref() == Some(call.as_str())
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_completes_and_reads_its_context() {
    let w = world().await;
    let run = w
        .engine
        .run_for(TenantId::new("acme").unwrap(), RunId::new("run-1").unwrap());
    let outcome = run.call("add", json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!(outcome.result(), Some(&json!(5)));
    assert_eq!(outcome.for_model(), "5");

    let mut meta = serde_json::Map::new();
    meta.insert("user".into(), json!("ada"));
    let call = ToolCall::new("whoami", json!({}))
        .with_id(CallId::new("call_7").unwrap())
        .with_meta(meta);
    let outcome = run.call_all(vec![call]).await.unwrap().remove(0);
    assert_eq!(
        outcome.result().unwrap(),
        &json!({"run": "run-1", "call": "call_7", "tenant": "acme", "attempt": 1, "fence": 1, "key": "acme/run-1/call_7", "meta": {"user": "ada"}})
    );
}

/// A caller's attachment is stored in its call's request and read back by a reader of
/// the run's bytes; one whose data has no JSON form is written as its error, and its
/// call still runs.
#[tokio::test(flavor = "multi_thread")]
async fn an_attachment_is_stored_in_its_request() {
    let w = world().await;
    let run = w.engine.new_run();
    let keys: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
    let attached = |id: &str, attachment: Attachment| {
        ToolCall::new("add", json!({"a": 1, "b": 1}))
            .with_id(CallId::new(id).unwrap())
            .with_attachment(attachment)
    };
    let calls = vec![
        attached(
            "call_1",
            Attachment::new("example.step", json!({"step": 1})),
        ),
        attached("call_2", Attachment::new("example.bad", keys)),
    ];
    let outcomes = run.call_all(calls).await.unwrap();
    assert!(
        outcomes.iter().all(|o| o.result() == Some(&json!(2))),
        "{outcomes:?}"
    );

    let requests: Vec<event::ToolRequested> = aaa_tests::facts_until_now(&run)
        .await
        .into_iter()
        .filter(|fact| fact.kind == event::TOOL_REQUESTED)
        .map(|fact| fact.data_as().unwrap())
        .collect();
    let attachment = |id: &str| {
        let request = requests.iter().find(|r| r.call_id.as_str() == id);
        request.and_then(|r| r.attachment.clone()).expect(id)
    };
    let step = attachment("call_1");
    assert_eq!(step.kind(), "example.step");
    assert_eq!(step.data::<Value>().unwrap(), json!({"step": 1}));
    let bad = attachment("call_2")
        .data::<Value>()
        .unwrap_err()
        .to_string();
    assert!(bad.contains("key must be a string"), "{bad}");
}

/// The handler reads a request's arguments where they lie in the bus's message; a
/// `null` for an optional argument whose type does not take one (OpenAI strict mode)
/// still counts as leaving it out, whether the arguments came as an object or as text.
#[tokio::test(flavor = "multi_thread")]
async fn arguments_are_read_in_place_and_strict_mode_nulls_are_dropped() {
    let w = world().await;
    let run = w.engine.new_run();
    for (args, expected) in [
        (
            json!({"reading": {"degrees": 21, "decimals": null}}),
            "21°C",
        ),
        (json!({"reading": {"degrees": 21, "decimals": 1}}), "21.0°C"),
        (
            json!("{\"reading\": {\"degrees\": 21, \"decimals\": null}}"),
            "21°C",
        ),
    ] {
        let outcome = run.call("warmth", args.clone()).await.unwrap();
        assert_eq!(outcome.result(), Some(&json!(expected)), "{args}");
    }
    let outcome = run
        .call("warmth", json!({"reading": {"degrees": null}}))
        .await
        .unwrap();
    let (kind, message) = failure(&outcome);
    assert_eq!(kind, FailureKind::BadArgs, "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_failure_is_a_fact_with_a_kind() {
    let w = world().await;
    let run = w.engine.new_run();
    let cases: Vec<(&str, Value, FailureKind, &str)> = vec![
        (
            "add",
            json!({"a": "two", "b": 3}),
            FailureKind::BadArgs,
            "a: expected integer; got string \"two\"",
        ),
        (
            "add",
            json!("{\"a\": 1, "),
            FailureKind::BadArgs,
            "are not valid JSON",
        ),
        (
            "add",
            json!({"a": 1, "b": 2, "c": 3}),
            FailureKind::BadArgs,
            "unknown argument `c`",
        ),
        (
            "add",
            json!({"a": 1, "b": 2, "pad": "x".repeat(2000)}),
            FailureKind::BadArgs,
            "the limit is 1024 bytes",
        ),
        (
            "ad",
            json!({}),
            FailureKind::UnknownTool,
            "did you mean `add`?",
        ),
        (
            "refuse",
            json!({"reason": "the city is closed"}),
            FailureKind::Error,
            "the city is closed",
        ),
        (
            "book",
            json!({"day": "2025-05-01"}),
            FailureKind::BadArgs,
            "invalid arguments for `book`: day: must not be in the past",
        ),
        (
            "broken",
            json!({}),
            FailureKind::Error,
            ToolError::INTERNAL_MESSAGE,
        ),
        ("explode", json!({}), FailureKind::Panic, "kaboom"),
        (
            "add",
            json!({"a": 13, "b": 1}),
            FailureKind::Policy,
            "13 is not allowed here",
        ),
        (
            "add",
            json!({"a": 600, "b": 66}),
            FailureKind::Policy,
            "that number is withheld",
        ),
    ];
    for (name, args, kind, text) in cases {
        let outcome = run.call(name, args.clone()).await.unwrap();
        let (got_kind, message) = failure(&outcome);
        assert_eq!(got_kind, kind, "{name} {args}: {message}");
        assert!(
            message.contains(text),
            "{name} {args}: {message:?} should contain {text:?}"
        );
    }
    // Arguments sent as a JSON string, as providers send them, work.
    let outcome = run.call("secret", json!("{}")).await.unwrap();
    assert_eq!(
        outcome.result(),
        Some(&json!("token=[redacted]")),
        "post-call guardrails redact"
    );
    // The worker survived the panic.
    assert_eq!(
        run.call("echo_after", json!({"text": "alive", "millis": 0}))
            .await
            .unwrap()
            .for_model(),
        "alive"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn timeouts_cancel_async_tools_and_discard_sync_results() {
    let w = world().await;
    let run = w.engine.new_run();
    let outcome = run.call("slow", json!({})).await.unwrap();
    assert_eq!(
        failure(&outcome),
        (
            FailureKind::Timeout,
            "the tool did not finish within 0.2 s and was stopped"
        )
    );
    let outcome = run.call("slow_sync", json!({})).await.unwrap();
    assert_eq!(failure(&outcome).0, FailureKind::Timeout);
    // The sync tool's thread still finishes, but its result is not the outcome.
    let mut facts = run.facts().await.unwrap();
    let mut outcomes = 0;
    while let Ok(Some(fact)) = tokio::time::timeout(Duration::from_millis(500), facts.next()).await
    {
        let fact = fact.unwrap();
        if fact.kind == event::TOOL_COMPLETED || fact.kind == event::TOOL_FAILED {
            outcomes += 1;
        }
    }
    assert_eq!(outcomes, 2, "one outcome per call, no late result");
    assert_eq!(w.seen.sync_finished.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_returns_outcomes_in_call_order() {
    let w = world().await;
    let run = w.engine.new_run();
    let calls = vec![
        ToolCall::new("echo_after", json!({"text": "slowest", "millis": 150})),
        ToolCall::new("echo_after", json!({"text": "fast", "millis": 0})),
        ToolCall::new("nope", json!({})),
        ToolCall::new("echo_after", json!({"text": "middle", "millis": 50})),
    ];
    let outcomes = run.call_all(calls).await.unwrap();
    let texts: Vec<String> = outcomes.iter().map(Outcome::for_model).collect();
    assert_eq!(texts[0], "slowest");
    assert_eq!(texts[1], "fast");
    assert!(texts[2].starts_with("error (unknown_tool)"), "{}", texts[2]);
    assert_eq!(texts[3], "middle");
}

#[tokio::test(flavor = "multi_thread")]
async fn approval_granted_runs_once_and_denied_tells_the_model_why() {
    let w = world().await;
    let run = w.engine.new_run();
    let call_id = run
        .request("pay", json!({"to": "bob", "cents": 500}))
        .await
        .unwrap();
    let asked = next_approval(&run).await;
    assert_eq!(
        (asked.call_id.clone(), &*asked.name),
        (call_id.clone(), "pay")
    );
    assert_eq!(asked.arguments, json!({"to": "bob", "cents": 500}));
    // A decision bound to no arguments is refused before it is sent.
    let unbound = run.grant(ApprovalDecision::new(call_id.clone())).await;
    assert!(
        matches!(unbound, Err(aaa_tools::EngineError::UnboundDecision(_))),
        "{unbound:?}"
    );
    // A grant for other arguments does not approve this call: the worker says so, and
    // the call is still pending when it has.
    run.grant(ApprovalDecision::new(call_id.clone()).with_fingerprint("0".repeat(64)))
        .await
        .unwrap();
    let refused = next_refusal(&run, 1).await;
    assert!(refused.reason.contains("other arguments"), "{refused:?}");
    assert_eq!(w.seen.paid.load(Ordering::SeqCst), 0);
    assert!(!has_outcome(&run, &call_id).await, "the wrong grant ran it");
    run.grant(ApprovalDecision::for_request(&asked))
        .await
        .unwrap();
    let outcome = run.outcome(&call_id).await.unwrap();
    assert_eq!(outcome.for_model(), "paid 500 to bob");
    // A second grant does not run it again: the handle refuses it, and one sent on the
    // wire all the same (as a racing approver would) is refused as no longer pending,
    // with the tool run once by then.
    let again = run.grant(ApprovalDecision::for_request(&asked)).await;
    assert!(
        matches!(again, Err(aaa_tools::EngineError::NotPending(_))),
        "{again:?}"
    );
    let grant = Event::new(
        event::APPROVAL_GRANTED,
        "a racing approver",
        run.tenant(),
        run.run_id(),
        Some(&call_id),
        serde_json::to_value(ApprovalDecision::for_request(&asked)).unwrap(),
    );
    w.engine.publish(&grant).await.unwrap();
    let refused = next_refusal(&run, 2).await;
    assert!(refused.reason.contains("no longer pending"), "{refused:?}");
    assert_eq!(w.seen.paid.load(Ordering::SeqCst), 1);

    let denied = run
        .request("pay", json!({"to": "eve", "cents": 1}))
        .await
        .unwrap();
    let asked = next_approval_of(&run, &denied).await;
    run.deny(ApprovalDecision::for_request(&asked).with_reason("eve is not a known payee"))
        .await
        .unwrap();
    let outcome = run.outcome(&denied).await.unwrap();
    assert_eq!(
        failure(&outcome),
        (
            FailureKind::Denied,
            "a human denied this call: eve is not a known payee"
        )
    );
    assert_eq!(w.seen.paid.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pending_approval_holds_no_pool_slot() {
    let w = world().await;
    let run = w.engine.new_run();
    // `pay` and `hold` share pool `solo` of size 1.
    let pending = run
        .request("pay", json!({"to": "bob", "cents": 5}))
        .await
        .unwrap();
    let asked = next_approval(&run).await;
    let holding = run.request("hold", json!({})).await.unwrap();
    w.gate.entered.notified().await;
    w.gate.release.notify_one();
    assert_eq!(run.outcome(&holding).await.unwrap().for_model(), "released");
    run.grant(ApprovalDecision::for_request(&asked))
        .await
        .unwrap();
    assert_eq!(
        run.outcome(&pending).await.unwrap().for_model(),
        "paid 5 to bob"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_time_out() {
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(Gate::default());
    let engine = aaa_tests::embedded();
    let _worker = handler(&seen, &gate)
        .approval_timeout(Duration::from_millis(100))
        .attach(&engine)
        .await
        .unwrap();
    let run = engine.new_run();
    let outcome = run
        .call("pay", json!({"to": "bob", "cents": 5}))
        .await
        .unwrap();
    assert_eq!(failure(&outcome).0, FailureKind::ApprovalTimeout);
    assert_eq!(seen.paid.load(Ordering::SeqCst), 0);
    // The sweep's mark is gone with the approval: it lists only pending approvals.
    let marks = engine
        .store()
        .keys(RecordKind::Handler, "approval-due.")
        .await
        .unwrap();
    assert!(marks.is_empty(), "{marks:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grant_survives_the_worker_that_asked_and_can_come_first() {
    let bus = MemoryBus::new();
    let store = MemoryStore::new();
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(Gate::default());

    // Worker 1 asks for approval, then goes away.
    let first = Engine::new(aaa_tests::bus_under_test(bus.clone()), store.clone());
    let worker = handler(&seen, &gate).attach(&first).await.unwrap();
    let run = first.new_run();
    let call_id = run
        .request("pay", json!({"to": "bob", "cents": 7}))
        .await
        .unwrap();
    let asked = next_approval(&run).await;
    worker.shutdown(Duration::from_secs(1)).await;

    // The grant arrives while no worker is alive; a new worker runs the call once.
    run.grant(ApprovalDecision::for_request(&asked))
        .await
        .unwrap();
    let second = Engine::new(aaa_tests::bus_under_test(bus.clone()), store.clone());
    let _worker = handler(&seen, &gate).attach(&second).await.unwrap();
    assert_eq!(
        run.outcome(&call_id).await.unwrap().for_model(),
        "paid 7 to bob"
    );

    // A grant sent before the request was ever handled counts, once, when it names the
    // fingerprint of the request that comes.
    let early = CallId::new("call-early").unwrap();
    let arguments = json!({"to": "amy", "cents": 1});
    let fingerprint =
        aaa_tools::event::fingerprint(run.tenant(), run.run_id(), &early, "pay", &arguments);
    run.grant(ApprovalDecision::new(early.clone()).with_fingerprint(fingerprint))
        .await
        .unwrap();
    run.request_call(ToolCall::new("pay", arguments).with_id(early.clone()))
        .await
        .unwrap();
    assert_eq!(
        run.outcome(&early).await.unwrap().for_model(),
        "paid 1 to amy"
    );
    assert_eq!(seen.paid.load(Ordering::SeqCst), 2);
    // Every decision was acknowledged, so none comes back to run a call again.
    tokio::time::timeout(
        Duration::from_secs(5),
        bus.until_settled("aaa-approval-signals"),
    )
    .await
    .expect("every approval decision was acknowledged");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_tenant_cannot_approve_another_tenants_call() {
    let w = world().await;
    let run_id = RunId::new("shared-run-name").unwrap();
    let victim = w
        .engine
        .run_for(TenantId::new("acme").unwrap(), run_id.clone());
    let intruder = w.engine.run_for(TenantId::new("mallory").unwrap(), run_id);
    let call_id = victim
        .request("pay", json!({"to": "bob", "cents": 9}))
        .await
        .unwrap();
    let asked = next_approval(&victim).await;
    intruder
        .grant(ApprovalDecision::new(call_id.clone()).with_fingerprint(asked.fingerprint))
        .await
        .unwrap();
    // The victim's call is still pending: a probe call in the victim's run completes first.
    let probe = victim
        .call("echo_after", json!({"text": "probe", "millis": 0}))
        .await
        .unwrap();
    assert_eq!(probe.for_model(), "probe");
    assert_eq!(w.seen.paid.load(Ordering::SeqCst), 0);
    victim
        .deny(ApprovalDecision::new(call_id.clone()).any_arguments())
        .await
        .unwrap();
    assert_eq!(
        failure(&victim.outcome(&call_id).await.unwrap()).0,
        FailureKind::Denied
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_pool_does_not_block_other_pools() {
    let w = world().await;
    let run = w.engine.new_run();
    let holding = run.request("hold", json!({})).await.unwrap();
    w.gate.entered.notified().await;
    // `solo` is full; the default pool still serves.
    assert_eq!(
        run.call("add", json!({"a": 20, "b": 1}))
            .await
            .unwrap()
            .result(),
        Some(&json!(21))
    );
    assert_eq!(
        run.call("echo_after", json!({"text": "free", "millis": 0}))
            .await
            .unwrap()
            .for_model(),
        "free"
    );
    w.gate.release.notify_one();
    run.outcome(&holding).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delegation_chain_deeper_than_its_pool_completes() {
    let w = world().await;
    let outcome = w
        .engine
        .new_run()
        .call("delegate", json!({"depth": 3}))
        .await
        .unwrap();
    assert_eq!(outcome.for_model(), "3>2>1>bottom");
}

#[tokio::test(flavor = "multi_thread")]
async fn budgets_limit_calls_per_run_and_per_tool() {
    let engine = aaa_tests::embedded();
    let registry = ToolRegistry::new(tools![echo_after, secret]).unwrap();
    let policy = GuardPolicy::new()
        .max_calls_per_run(3)
        .max_calls_per_tool("secret", 1);
    let _worker = ToolHandler::new(registry)
        .guards(policy)
        .attach(&engine)
        .await
        .unwrap();
    let run = engine.new_run();
    assert!(run.call("secret", json!({})).await.unwrap().is_ok());
    let second = run.call("secret", json!({})).await.unwrap();
    assert_eq!(
        failure(&second),
        (
            FailureKind::Policy,
            "`secret` may be called at most 1 times in this run; it has been"
        )
    );
    // The refused call did not count: two more fit in the run's budget of three.
    assert!(
        run.call("echo_after", json!({"text": "a", "millis": 0}))
            .await
            .unwrap()
            .is_ok()
    );
    assert!(
        run.call("echo_after", json!({"text": "b", "millis": 0}))
            .await
            .unwrap()
            .is_ok()
    );
    let over = run
        .call("echo_after", json!({"text": "c", "millis": 0}))
        .await
        .unwrap();
    assert_eq!(failure(&over).0, FailureKind::Policy);
    // Another run has its own budget.
    assert!(
        engine
            .new_run()
            .call("secret", json!({}))
            .await
            .unwrap()
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_lost_with_its_worker_is_delivered_to_the_next() {
    let bus = MemoryBus::new();
    let store = MemoryStore::new();
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(Gate::default());
    let short_lease = || {
        aaa_tools::GuardConfig::default()
            .with_lease_ttl_s(0.2)
            .with_wait_poll_s(0.02)
    };
    let first = Engine::new(aaa_tests::bus_under_test(bus.clone()), store.clone());
    let worker = handler(&seen, &gate)
        .guard(short_lease())
        .attach(&first)
        .await
        .unwrap();
    let run = first.new_run();
    let call_id = run.request("hold", json!({})).await.unwrap();
    gate.entered.notified().await;
    drop(worker); // the worker dies mid-call, without acking

    let second = Engine::new(aaa_tests::bus_under_test(bus.clone()), store.clone());
    let _worker = handler(&seen, &gate)
        .guard(short_lease())
        .attach(&second)
        .await
        .unwrap();
    gate.entered.notified().await; // delivered again, taken over by the second worker
    gate.release.notify_one();
    let outcome = run.outcome(&call_id).await.unwrap();
    assert_eq!(outcome.for_model(), "released");
    let Outcome::Completed(completed) = outcome else {
        unreachable!()
    };
    assert_eq!(completed.attempt, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_lets_running_calls_finish_and_leaves_the_rest() {
    let w = world().await;
    let run = w.engine.new_run();
    let running = run
        .request("echo_after", json!({"text": "finished", "millis": 100}))
        .await
        .unwrap();
    // Wait until it is running: its outcome is not there, but a fast call's is.
    assert!(
        run.call("echo_after", json!({"text": "x", "millis": 0}))
            .await
            .unwrap()
            .is_ok()
    );
    w._worker.clone().shutdown(Duration::from_secs(5)).await;
    assert_eq!(run.outcome(&running).await.unwrap().for_model(), "finished");

    // After shutdown nothing is taken; a new worker on the same bus serves the request.
    let waiting = run.request("add", json!({"a": 1, "b": 1})).await.unwrap();
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(Gate::default());
    let other = w.engine.sibling();
    let _worker = ToolHandler::new(registry(&seen, &gate))
        .pool("solo", 1)
        .attach(&other)
        .await
        .unwrap();
    assert_eq!(
        run.outcome(&waiting).await.unwrap().result(),
        Some(&json!(2))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn handlers_on_one_engine_merge_their_tools() {
    let engine = aaa_tests::embedded();
    let a = ToolHandler::new(ToolRegistry::new(tools![add]).unwrap())
        .attach(&engine)
        .await
        .unwrap();
    let _b = ToolHandler::new(ToolRegistry::new(tools![secret]).unwrap())
        .attach(&engine)
        .await
        .unwrap();
    assert_eq!(a.tools(), ["add", "secret"]);
    let err = ToolHandler::new(ToolRegistry::new(tools![add]).unwrap())
        .attach(&engine)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "two tools are named `add` (registered at positions 0 and 2)"
    );
    let run = engine.new_run();
    assert!(run.call("secret", json!({})).await.unwrap().is_ok());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_handler_cannot_change_what_the_executor_runs_with() {
    let engine = aaa_tests::embedded();
    let _first = ToolHandler::new(ToolRegistry::new(tools![add]).unwrap())
        .pool("payments", 2)
        .attach(&engine)
        .await
        .unwrap();
    let second = || ToolHandler::new(ToolRegistry::new(tools![secret]).unwrap());
    let conflicts = [
        (
            second().pool("payments", 5),
            "this engine's executor runs with the size of pool `payments` = 2, and a second \
             handler cannot change it to 5",
        ),
        (
            second().pool("default", 3),
            "the size of pool `default` = 16, and a second handler cannot change it to 3",
        ),
        (
            second().ack_wait(Duration::from_secs(1)),
            "ack_wait = 7.5s, and a second handler cannot change it to 1s",
        ),
        (
            second().max_in_flight(7),
            "max_in_flight = 1024, and a second handler cannot change it to 7",
        ),
    ];
    for (handler, expected) in conflicts {
        let error = handler.attach(&engine).await.unwrap_err();
        assert!(
            matches!(error, aaa_tools::HandlerError::Conflict { .. }),
            "{error}"
        );
        assert!(error.to_string().contains(expected), "{error}");
    }
    // Nothing of the refused handlers was added; one that agrees is.
    let run = engine.new_run();
    let unknown = run.call("secret", json!({})).await.unwrap();
    assert_eq!(failure(&unknown).0, FailureKind::UnknownTool);
    let _agrees = second().pool("payments", 2).attach(&engine).await.unwrap();
    assert!(run.call("secret", json!({})).await.unwrap().is_ok());
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_requests_are_answered_or_dropped_never_fatal() {
    let w = world().await;
    let run = w.engine.new_run();
    let subject = event::subject(run.tenant(), run.run_id(), event::TOOL_REQUESTED);
    // Not JSON at all: dropped (nothing to answer).
    w.engine
        .bus()
        .publish(&subject, b"\xff not json".to_vec().into(), None)
        .await
        .unwrap();
    // An event whose data does not parse but whose call can be identified: answered.
    let mut broken = Event::new(
        event::TOOL_REQUESTED,
        "test",
        run.tenant(),
        run.run_id(),
        None,
        json!({"call_id": "call_x", "name": 5}),
    );
    broken.data["call_id"] = json!("call_x");
    w.engine
        .bus()
        .publish(&subject, broken.to_bytes().into(), None)
        .await
        .unwrap();
    let outcome = run.outcome(&CallId::new("call_x").unwrap()).await.unwrap();
    assert_eq!(failure(&outcome).0, FailureKind::BadRequest);
    // The worker goes on.
    assert_eq!(
        run.call("add", json!({"a": 2, "b": 5}))
            .await
            .unwrap()
            .result(),
        Some(&json!(7))
    );
}

/// On the embedded bus the engine's own events travel unwritten: the executor reads
/// the request and the run's watcher reads the outcome as values, and nothing writes
/// JSON. Whoever reads the log's bytes later gets the wire format, the same event.
#[tokio::test(flavor = "multi_thread")]
async fn in_process_events_travel_unwritten_and_read_back_as_the_wire_format() {
    let w = world().await;
    let run = w.engine.new_run();
    let done = run.call("add", json!({"a": 2, "b": 3})).await.unwrap();
    let refused = run.call("add", json!({"a": "two"})).await.unwrap();
    assert_eq!(done.result(), Some(&json!(5)));
    assert_eq!(failure(&refused).0, FailureKind::BadArgs);

    let filter = event::run_filter(run.tenant(), run.run_id());
    let mut log = w.engine.bus().replay(&filter).await.unwrap();
    let mut kinds = Vec::new();
    // Two requests, an attempt started, a completion, a failure.
    while kinds.len() < 5 {
        let stored = log.next().await.unwrap().unwrap();
        // Over the wire (AAA_WIRE=bytes) every payload is bytes by design.
        assert_eq!(
            stored.payload.is_written(),
            aaa_tests::over_the_wire(),
            "{}: written to bytes on its way only over the wire",
            stored.subject
        );
        let event = Event::from_bytes(&stored.payload).expect("a valid event");
        assert!(stored.payload.is_written());
        assert_eq!(event.bus_subject(), &*stored.subject);
        kinds.push(event.kind.clone());
        if event.kind == event::TOOL_COMPLETED {
            let data: event::ToolCompleted = event.into_data().unwrap();
            assert_eq!((&data.call_id, &data.result), (done.call_id(), &json!(5)));
        }
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "aaa.guard.attempt_started",
            "aaa.tool.completed",
            "aaa.tool.failed",
            "aaa.tool.requested",
            "aaa.tool.requested"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_config_shows_the_effective_settings() {
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(Gate::default());
    let h = handler(&seen, &gate);
    let pay = h.config_for(&pay::tool()).unwrap();
    assert!(pay.requires_approval);
    assert_eq!((pay.pool.as_str(), pay.pool_size), ("solo", 1));
    let plain = ToolHandler::new(
        ToolRegistry::builder()
            .tool(hold::tool())
            .state(Gate::default())
            .build()
            .unwrap(),
    );
    let err = plain.config_for(&hold::tool()).unwrap_err();
    assert!(
        err.to_string().contains("pool `solo`, which has no size"),
        "{err}"
    );
}

/// Returns `n` bytes of text.
#[tool]
async fn blob(n: usize) -> String {
    "x".repeat(n)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_over_the_size_limit_is_a_failure_the_model_can_act_on() {
    let engine = aaa_tests::embedded();
    let _worker = ToolHandler::new(ToolRegistry::new(tools![blob]).unwrap())
        .max_result_bytes(1000)
        .attach(&engine)
        .await
        .unwrap();
    let run = engine.new_run();
    let small = run.call("blob", json!({"n": 10})).await.unwrap();
    assert_eq!(small.result(), Some(&json!("x".repeat(10))));
    let big = run.call("blob", json!({"n": 5000})).await.unwrap();
    let failure = big.failure().expect("too big to carry");
    assert_eq!(failure.kind, FailureKind::Error);
    assert!(
        failure.message.contains("5002 bytes") && failure.message.contains("limit is 1000"),
        "{}",
        failure.message
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_subject_decides_the_tenant_and_the_run() {
    let w = world().await;
    let (default, evil) = (TenantId::default(), TenantId::new("evil").unwrap());
    let run_id = RunId::new("r-1").unwrap();
    let victim = w.engine.run_for(default.clone(), run_id.clone());
    let intruder = w.engine.run_for(evil.clone(), run_id.clone());
    // A request on evil's subject that claims to be default's: refused on evil's run,
    // naming both; it runs nowhere.
    let request = aaa_tests::raw_event(
        event::TOOL_REQUESTED,
        "default",
        "r-1",
        "c-evil",
        json!({"call_id": "c-evil", "name": "add", "arguments": {"a": 1, "b": 1}}),
    );
    w.engine
        .bus()
        .publish("aaa.evil.r-1.tool.requested", request.into(), None)
        .await
        .unwrap();
    let outcome = intruder
        .outcome(&CallId::new("c-evil").unwrap())
        .await
        .unwrap();
    let (kind, message) = failure(&outcome);
    assert_eq!(kind, FailureKind::BadRequest);
    assert!(
        message.contains("tenant `default`") && message.contains("tenant `evil`"),
        "{message}"
    );
    // A request on run r-1's subject whose attributes name run r-2 answers on r-1.
    let other_run = aaa_tests::raw_event(
        event::TOOL_REQUESTED,
        "default",
        "r-2",
        "c-run",
        json!({"call_id": "c-run", "name": "add", "arguments": {"a": 1, "b": 1}}),
    );
    w.engine
        .bus()
        .publish("aaa.default.r-1.tool.requested", other_run.into(), None)
        .await
        .unwrap();
    let outcome = victim
        .outcome(&CallId::new("c-run").unwrap())
        .await
        .unwrap();
    assert!(failure(&outcome).1.contains("run `r-2`"), "{outcome:?}");

    // A grant on evil's subject that claims default's pending call changes nothing.
    let call_id = victim
        .request("pay", json!({"to": "bob", "cents": 3}))
        .await
        .unwrap();
    let asked = next_approval_of(&victim, &call_id).await;
    let grant = aaa_tests::raw_event(
        event::APPROVAL_GRANTED,
        "default",
        "r-1",
        call_id.as_str(),
        json!({"call_id": call_id.as_str(), "fingerprint": asked.fingerprint}),
    );
    w.engine
        .bus()
        .publish("aaa.evil.r-1.approval.granted", grant.into(), None)
        .await
        .unwrap();
    let refused = next_refusal(&intruder, 1).await;
    assert!(
        refused.reason.contains("the subject decides"),
        "{refused:?}"
    );
    assert_eq!(w.seen.paid.load(Ordering::SeqCst), 0);
    assert!(!has_outcome(&victim, &call_id).await);
    victim
        .deny(ApprovalDecision::for_request(&asked))
        .await
        .unwrap();
    assert_eq!(
        failure(&victim.outcome(&call_id).await.unwrap()).0,
        FailureKind::Denied
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_early_grant_without_a_fingerprint_approves_nothing() {
    let (seen, gate) = (Arc::new(Seen::default()), Arc::new(Gate::default()));
    let engine = aaa_tests::embedded();
    let _worker = handler(&seen, &gate).attach(&engine).await.unwrap();
    let run = engine.new_run();
    let early = CallId::new("call-early").unwrap();
    run.grant(ApprovalDecision::new(early.clone()).any_arguments())
        .await
        .unwrap();
    // The grant is stored before the request is published. Nothing announces that
    // write, so the test looks at the store until the early record is there.
    let key = format!("approval.{}.{}.{early}", run.tenant(), run.run_id());
    let stored = async {
        while engine
            .store()
            .get(RecordKind::Handler, &key)
            .await
            .unwrap()
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), stored)
        .await
        .expect("the early grant was stored");
    run.request_call(ToolCall::new("pay", json!({"to": "amy", "cents": 1})).with_id(early.clone()))
        .await
        .unwrap();
    // A human is asked all the same, and nothing ran.
    let asked = next_approval_of(&run, &early).await;
    assert_eq!(seen.paid.load(Ordering::SeqCst), 0);
    run.grant(ApprovalDecision::for_request(&asked))
        .await
        .unwrap();
    assert_eq!(
        run.outcome(&early).await.unwrap().for_model(),
        "paid 1 to amy"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn async_guardrails_decide_and_fail_closed_when_they_hang() {
    let (seen, gate) = (Arc::new(Seen::default()), Arc::new(Gate::default()));
    let engine = aaa_tests::embedded();
    let policy = GuardPolicy::new()
        .before_async(|call: aaa_tools::PolicyCall| async move {
            // A service that takes its time to answer.
            tokio::task::yield_now().await;
            match call.arguments.get("a").and_then(Value::as_i64) {
                Some(7) => PreCall::Reject("the budget service says no to 7".into()),
                Some(9) => std::future::pending().await,
                _ => PreCall::Allow,
            }
        })
        .after_async(|_call, result: Value| async move {
            tokio::task::yield_now().await;
            match result.as_i64() {
                Some(100) => PostCall::Redact(json!("a hundred")),
                _ => PostCall::Pass,
            }
        })
        .check_timeout(Duration::from_millis(200));
    let _worker = ToolHandler::new(registry(&seen, &gate))
        .pool("solo", 1)
        .guards(policy)
        .attach(&engine)
        .await
        .unwrap();
    let run = engine.new_run();
    let ok = run.call("add", json!({"a": 1, "b": 1})).await.unwrap();
    assert_eq!(ok.result(), Some(&json!(2)));
    let redacted = run.call("add", json!({"a": 50, "b": 50})).await.unwrap();
    assert_eq!(redacted.result(), Some(&json!("a hundred")));
    let refused = run.call("add", json!({"a": 7, "b": 1})).await.unwrap();
    assert_eq!(
        failure(&refused),
        (FailureKind::Policy, "the budget service says no to 7")
    );
    let hung = run.call("add", json!({"a": 9, "b": 1})).await.unwrap();
    assert_eq!(
        failure(&hung),
        (
            FailureKind::Policy,
            "a guardrail did not answer within 0.2 s; the call did not run"
        )
    );
}

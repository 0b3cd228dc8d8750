//! The wire is the authority, against a real `nats-server`: ids that never collide,
//! tenants bounded by subjects and the server's permissions, every request answered
//! within the server's `max_payload`, CloudEvents as the spec says.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aaa_tests::NatsServer;
use aaa_tools::event::{self, ApprovalRefused, ApprovalRequested, Event};
use aaa_tools::{
    ApprovalDecision, CallId, Engine, FailureKind, HandlerHandle, RunHandle, RunId, TenantId,
    ToolCall, ToolHandler, ToolRegistry, tool, tools,
};
use aaa_tools_nats::NatsOptions;
use futures::StreamExt;
use serde_json::{Value, json};

/// How many times `touch` ran, in this process.
static TOUCHED: AtomicUsize = AtomicUsize::new(0);

/// Adds two numbers.
#[tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Counts that it ran.
#[tool]
async fn touch() -> usize {
    TOUCHED.fetch_add(1, Ordering::SeqCst) + 1
}

/// Pays, after a human approves.
#[tool(requires_approval = true)]
async fn pay(to: String, cents: u64, note: Option<String>) -> String {
    let _ = note;
    format!("paid {cents} to {to}")
}

async fn worker(engine: &Engine) -> HandlerHandle {
    let registry = ToolRegistry::builder()
        .tools(tools![add, touch, pay])
        .max_args_bytes(16 << 20)
        .build()
        .unwrap();
    ToolHandler::new(registry)
        .approval_timeout(Duration::from_secs(3600))
        .attach(engine)
        .await
        .unwrap()
}

/// The first fact of `kind` in the run whose data `pick` accepts, waiting (bounded).
async fn fact_of(run: &RunHandle, kind: &str, pick: impl Fn(&Event) -> bool) -> Event {
    let mut facts = run.facts().await.unwrap();
    let wait = async {
        while let Some(fact) = facts.next().await {
            let fact = fact.unwrap();
            if fact.kind == kind && pick(&fact) {
                return fact;
            }
        }
        panic!("the run's facts ended without a {kind} fact")
    };
    tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .unwrap_or_else(|_| panic!("no {kind} fact within 20 s"))
}

fn id<T: TryFrom<&'static str>>(text: &'static str) -> T
where
    T::Error: std::fmt::Debug,
{
    T::try_from(text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_whose_ids_once_collided_each_get_their_outcome_and_approval() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let options = NatsOptions::new(server.url());
    let engine = options.connect().await.unwrap();
    let _worker = worker(&engine).await;
    let tenant = TenantId::default();
    // `outcome-default-c-1-x` was the outcome id of both calls.
    let first = engine.run_for(tenant.clone(), id::<RunId>("c-1"));
    let second = engine.run_for(tenant.clone(), id::<RunId>("c"));
    let a = first
        .request_call(ToolCall::new("add", json!({"a": 1, "b": 1})).with_id(id("x")))
        .await
        .unwrap();
    let b = second
        .request_call(ToolCall::new("add", json!({"a": 2, "b": 2})).with_id(id("1-x")))
        .await
        .unwrap();
    assert_eq!(first.outcome(&a).await.unwrap().result(), Some(&json!(2)));
    assert_eq!(second.outcome(&b).await.unwrap().result(), Some(&json!(4)));

    // `approval-requested-default-d-1-z` was the message id of both requests.
    let first = engine.run_for(tenant.clone(), id::<RunId>("d-1"));
    let second = engine.run_for(tenant, id::<RunId>("d"));
    for (run, call) in [(&first, "z"), (&second, "1-z")] {
        run.request_call(ToolCall::new("pay", json!({"to": "bob", "cents": 1})).with_id(id(call)))
            .await
            .unwrap();
    }
    for (run, call) in [(&first, "z"), (&second, "1-z")] {
        let asked = fact_of(run, event::APPROVAL_REQUESTED, |e| {
            e.subject.as_deref() == Some(call)
        })
        .await;
        let asked: ApprovalRequested = asked.data_as().unwrap();
        run.grant(ApprovalDecision::for_request(&asked))
            .await
            .unwrap();
        let outcome = run.outcome(&asked.call_id).await.unwrap();
        assert_eq!(outcome.for_model(), "paid 1 to bob");
    }
}

/// The permissions of a tenant's client on the default stream and bucket (the README
/// shows the same block).
fn tenant_permissions(tenant: &str) -> String {
    format!(
        r#"{{
          publish: {{
            allow: ["aaa.{tenant}.>", "$JS.API.INFO", "$JS.API.STREAM.INFO.AAA",
                    "$JS.API.STREAM.INFO.KV_aaa_guard",
                    "$JS.API.CONSUMER.CREATE.AAA", "$JS.API.CONSUMER.CREATE.AAA.>",
                    "$JS.API.CONSUMER.MSG.NEXT.AAA.*",
                    "$JS.API.CONSUMER.DELETE.AAA.*", "$JS.API.CONSUMER.INFO.AAA.*",
                    "$JS.API.STREAM.MSG.GET.AAA"]
            deny: ["$JS.API.CONSUMER.*.AAA.aaa-tool-requests",
                   "$JS.API.CONSUMER.*.AAA.aaa-tool-requests.>",
                   "$JS.API.CONSUMER.*.AAA.aaa-approval-signals",
                   "$JS.API.CONSUMER.*.AAA.aaa-approval-signals.>",
                   "$JS.API.CONSUMER.MSG.NEXT.AAA.aaa-tool-requests",
                   "$JS.API.CONSUMER.MSG.NEXT.AAA.aaa-approval-signals"]
          }}
          subscribe: {{ allow: ["_INBOX_{tenant}.>", "aaa-stored.{tenant}.>",
                               "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.AAA"] }}
        }}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_bounded_by_subjects_changes_nothing_in_another() {
    let config = format!(
        "authorization {{ users = [
            {{ user: worker, password: w }}
            {{ user: default, password: d, permissions: {} }}
            {{ user: evil, password: e, permissions: {} }}
        ] }}",
        tenant_permissions("default"),
        tenant_permissions("evil")
    );
    let Some(server) = NatsServer::start_configured(&config) else {
        return;
    };
    let worker_engine = NatsOptions::new(server.url())
        .user_and_password("worker", "w")
        .connect()
        .await
        .unwrap();
    let _worker = worker(&worker_engine).await;
    let client = |user: &'static str, password: &'static str| {
        NatsOptions::new(server.url())
            .user_and_password(user, password)
            .inbox_prefix(format!("_INBOX_{user}"))
            // A publish the server refuses for permissions goes unanswered.
            .request_timeout(Duration::from_secs(1))
    };
    let default_engine = client("default", "d").connect().await.unwrap();
    let evil_engine = client("evil", "e").connect().await.unwrap();
    let (default, evil) = (TenantId::default(), id::<TenantId>("evil"));
    let victim = default_engine.run_for(default.clone(), id("r-1"));
    let intruder = evil_engine.run_for(evil.clone(), id("r-1"));

    // Each client works for its own tenant.
    let ok = victim.call("add", json!({"a": 1, "b": 2})).await.unwrap();
    assert_eq!(ok.result(), Some(&json!(3)), "{ok:?}");
    let ok = intruder.call("add", json!({"a": 2, "b": 2})).await.unwrap();
    assert_eq!(ok.result(), Some(&json!(4)), "{ok:?}");
    let touched = TOUCHED.load(Ordering::SeqCst);

    // Evil's subject, default's attributes: refused on evil's run, run nowhere.
    let request = aaa_tests::raw_event(
        event::TOOL_REQUESTED,
        "default",
        "r-1",
        "c-evil",
        json!({"call_id": "c-evil", "name": "touch", "arguments": {}}),
    );
    evil_engine
        .bus()
        .publish("aaa.evil.r-1.tool.requested", request.into(), None)
        .await
        .unwrap();
    let refused = intruder.outcome(&id("c-evil")).await.unwrap();
    let failure = refused.failure().expect("refused");
    assert_eq!(failure.kind, FailureKind::BadRequest);
    assert!(
        failure.message.contains("tenant `default`") && failure.message.contains("tenant `evil`"),
        "{}",
        failure.message
    );
    // Default's own subjects are closed to evil: the server refuses the publish.
    for kind in ["tool.requested", "tool.completed", "approval.granted"] {
        let request = aaa_tests::raw_event(
            &format!("aaa.{kind}"),
            "default",
            "r-1",
            "c-direct",
            json!({"call_id": "c-direct", "name": "touch", "arguments": {}, "result": 1}),
        );
        let subject = format!("aaa.default.r-1.{kind}");
        let published = evil_engine
            .bus()
            .publish(&subject, request.into(), None)
            .await;
        assert!(published.is_err(), "evil published on {subject}");
    }

    // A grant for default's pending call, on evil's subject: refused, nothing changes.
    let call_id = victim
        .request("pay", json!({"to": "bob", "cents": 3}))
        .await
        .unwrap();
    let asked: ApprovalRequested = fact_of(&victim, event::APPROVAL_REQUESTED, |_| true)
        .await
        .data_as()
        .unwrap();
    for kind in [event::APPROVAL_GRANTED, event::APPROVAL_DENIED] {
        let grant = aaa_tests::raw_event(
            kind,
            "default",
            "r-1",
            call_id.as_str(),
            json!({"call_id": call_id.as_str(), "fingerprint": asked.fingerprint}),
        );
        let subject = format!("aaa.evil.r-1.{}", &kind["aaa.".len()..]);
        evil_engine
            .bus()
            .publish(&subject, grant.into(), None)
            .await
            .unwrap();
    }
    let refused: ApprovalRefused = fact_of(&intruder, event::APPROVAL_REFUSED, |e| {
        e.data_as::<ApprovalRefused>()
            .is_ok_and(|r| r.decision == event::APPROVAL_DENIED)
    })
    .await
    .data_as()
    .unwrap();
    assert!(
        refused.reason.contains("the subject decides"),
        "{refused:?}"
    );

    // Nothing of evil's reached default's run: no outcome but its own, the call still
    // pending, `touch` never ran.
    let facts = aaa_tests::facts_until_now(&victim).await;
    let outcomes: Vec<_> = facts
        .iter()
        .filter(|f| f.kind == event::TOOL_COMPLETED || f.kind == event::TOOL_FAILED)
        .map(|f| f.subject.clone().unwrap_or_default())
        .collect();
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert!(
        facts.iter().all(|f| f.source != "elsewhere"),
        "an event of evil's is in default's run"
    );
    assert_eq!(TOUCHED.load(Ordering::SeqCst), touched);
    victim
        .grant(ApprovalDecision::for_request(&asked))
        .await
        .unwrap();
    assert_eq!(
        victim.outcome(&call_id).await.unwrap().for_model(),
        "paid 3 to bob"
    );
}

/// A request of exactly `size` bytes for tool `name` (padded) with `arguments`
/// (padded in `note`), as a raw event on `run`'s subject.
fn request_of_size(size: usize, run: &str, call: &str, pad_name: bool) -> Vec<u8> {
    let build = |pad: usize| {
        let (name, note) = if pad_name {
            ("n".repeat(pad), String::new())
        } else {
            ("pay".to_owned(), "n".repeat(pad))
        };
        let arguments = json!({"to": "bob", "cents": 1, "note": note});
        aaa_tests::raw_event(
            event::TOOL_REQUESTED,
            "default",
            run,
            call,
            json!({"call_id": call, "name": name, "arguments": arguments}),
        )
    };
    let bare = build(0).len();
    let bytes = build(size - bare);
    assert_eq!(bytes.len(), size);
    bytes
}

async fn requests_at_max_payload_are_answered(config: &str, expected_max: usize) {
    let Some(server) = NatsServer::start_configured(config) else {
        return;
    };
    let engine = NatsOptions::new(server.url()).connect().await.unwrap();
    let _worker = worker(&engine).await;
    let max = engine.bus().max_payload().expect("a NATS bus has a limit");
    assert_eq!(max, expected_max);
    let run = engine.run_for(TenantId::default(), id("big"));
    // No message id: the request is exactly `max_payload` on the wire.
    for (call, pad_name) in [("huge-name", true), ("huge-args", false)] {
        let request = request_of_size(max, "big", call, pad_name);
        engine
            .bus()
            .publish("aaa.default.big.tool.requested", request.into(), None)
            .await
            .unwrap();
        let outcome = tokio::time::timeout(
            Duration::from_secs(30),
            run.outcome(&CallId::new(call).unwrap()),
        )
        .await
        .unwrap_or_else(|_| panic!("{call}: no answer within 30 s"))
        .unwrap();
        let failure = outcome.failure().expect("a failure");
        if pad_name {
            assert_eq!(failure.kind, FailureKind::UnknownTool, "{failure:?}");
            assert!(failure.name.len() < 512, "the name is cut");
            assert!(failure.name.ends_with("bytes in all)"), "{}", failure.name);
        } else {
            assert_eq!(failure.kind, FailureKind::BadRequest, "{failure:?}");
            assert!(
                failure
                    .message
                    .contains("too large to ask a human for approval"),
                "{}",
                failure.message
            );
        }
    }
    // One byte more is refused by the bus at once, as too large, not retried.
    let request = request_of_size(max + 1, "big", "too-big", true);
    let error = engine
        .bus()
        .publish("aaa.default.big.tool.requested", request.into(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(error, aaa_tools::bus::BusError::TooLarge { .. }),
        "{error}"
    );
    // Other calls are served, and nothing is left unsettled.
    let ok = run.call("add", json!({"a": 1, "b": 1})).await.unwrap();
    assert_eq!(ok.result(), Some(&json!(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_of_exactly_max_payload_are_answered_on_1_mib() {
    requests_at_max_payload_are_answered("", 1024 * 1024).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_of_exactly_max_payload_are_answered_on_8_mib() {
    requests_at_max_payload_are_answered("max_payload: 8MB", 8 * 1024 * 1024).await;
}

/// Events written by the CloudEvents Python SDK (structured mode, JSON), one per line:
/// a minimal one (the SDK fills `time` in; it is dropped, as a producer that omits it
/// would), and a full one with an offset `time` and an unknown extension attribute.
const PYTHON_EVENTS: &str = r#"
from cloudevents.core.v1.event import CloudEvent
from cloudevents.core.formats.json import JSONFormat
import datetime

def request(call, **attributes):
    attributes.update({"type": "aaa.tool.requested", "source": "python-sdk",
                       "aaatenant": "default", "aaarunid": "py"})
    data = {"call_id": call, "name": "add", "arguments": {"a": 20, "b": 22}}
    return CloudEvent(attributes, data)

minimal = request("py-minimal")
minimal._attributes.pop("time")
full = request("py-full", subject="py-full", datacontenttype="application/json",
               time=datetime.datetime.now(datetime.timezone(datetime.timedelta(hours=2))),
               someextension="ignored")
for event in (minimal, full):
    print(JSONFormat().write(event).decode())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloudevents_from_the_python_sdk_run() {
    let Some(python) = aaa_tests::python_with("cloudevents.core") else {
        return;
    };
    let Some(server) = NatsServer::start() else {
        return;
    };
    let out = std::process::Command::new(python)
        .args(["-c", PYTHON_EVENTS])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let minimal: Value = serde_json::from_str(&lines[0]).unwrap();
    for absent in ["time", "datacontenttype", "subject"] {
        assert!(minimal.get(absent).is_none(), "{minimal}");
    }
    // The minimal event again, with a `time` that is not RFC 3339.
    let mut bad_time = minimal.clone();
    bad_time["time"] = json!("not a time");
    bad_time["data"]["call_id"] = json!("py-bad-time");

    let engine = NatsOptions::new(server.url()).connect().await.unwrap();
    let _worker = worker(&engine).await;
    let run = engine.run_for(TenantId::default(), id("py"));
    for event in [lines[0].clone(), lines[1].clone(), bad_time.to_string()] {
        engine
            .bus()
            .publish(
                "aaa.default.py.tool.requested",
                event.into_bytes().into(),
                None,
            )
            .await
            .unwrap();
    }
    for call in ["py-minimal", "py-full"] {
        let outcome = run.outcome(&CallId::new(call).unwrap()).await.unwrap();
        assert_eq!(outcome.result(), Some(&json!(42)), "{call}: {outcome:?}");
    }
    let outcome = run.outcome(&id("py-bad-time")).await.unwrap();
    let failure = outcome.failure().expect("refused");
    assert_eq!(failure.kind, FailureKind::BadRequest);
    assert!(
        failure.message.contains("not an RFC 3339 time"),
        "{}",
        failure.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_for_other_arguments_or_none_runs_nothing() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let engine = NatsOptions::new(server.url()).connect().await.unwrap();
    let _worker = worker(&engine).await;
    let run = engine.run_for(TenantId::default(), id("grants"));
    let call_id = run
        .request("pay", json!({"to": "bob", "cents": 10}))
        .await
        .unwrap();
    let asked: ApprovalRequested = fact_of(&run, event::APPROVAL_REQUESTED, |_| true)
        .await
        .data_as()
        .unwrap();
    // A grant meant for other arguments, and one on the wire with no fingerprint at all
    // (the handle refuses to send that one: `UnboundDecision`).
    let unbound = run.grant(ApprovalDecision::new(call_id.clone())).await;
    assert!(
        matches!(unbound, Err(aaa_tools::EngineError::UnboundDecision(_))),
        "{unbound:?}"
    );
    let other = aaa_tools::event::fingerprint(
        run.tenant(),
        run.run_id(),
        &call_id,
        "pay",
        &json!({"to": "bob", "cents": 10000}),
    );
    run.grant(ApprovalDecision::new(call_id.clone()).with_fingerprint(other))
        .await
        .unwrap();
    let bare = aaa_tests::raw_event(
        event::APPROVAL_GRANTED,
        "default",
        "grants",
        call_id.as_str(),
        json!({"call_id": call_id.as_str()}),
    );
    engine
        .bus()
        .publish("aaa.default.grants.approval.granted", bare.into(), None)
        .await
        .unwrap();
    for why in ["other arguments", "names no fingerprint"] {
        let refused: ApprovalRefused = fact_of(&run, event::APPROVAL_REFUSED, |e| {
            e.data_as::<ApprovalRefused>()
                .is_ok_and(|r| r.reason.contains(why))
        })
        .await
        .data_as()
        .unwrap();
        assert_eq!(refused.call_id, call_id);
    }
    // Still pending: nothing ran; the grant for what the human saw runs it once.
    let facts = aaa_tests::facts_until_now(&run).await;
    assert!(
        !facts.iter().any(|f| f.kind == event::TOOL_COMPLETED),
        "a grant for other arguments ran the call"
    );
    run.grant(ApprovalDecision::for_request(&asked))
        .await
        .unwrap();
    assert_eq!(
        run.outcome(&call_id).await.unwrap().for_model(),
        "paid 10 to bob"
    );
}

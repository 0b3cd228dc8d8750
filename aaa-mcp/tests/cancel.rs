//! A cancelled `tools/call` cancels its engine call: an rmcp client sends
//! `notifications/cancelled`, and the tool is told, stops, and the run records the
//! cancel and a `cancelled` failure. A session that merely ends cancels nothing.

mod support;

use aaa_tools::event::{ATTEMPT_STARTED, TOOL_CANCELLED, TOOL_FAILED, TOOL_REQUESTED};
use aaa_tools::{CallId, FailureKind};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::json;
use support::{TestServer, fact, within};

/// A call of `sleepy` for an hour (it returns early when told to stop).
fn sleepy_for_an_hour() -> ClientRequest {
    let arguments = json!({"ms": 3_600_000});
    let serde_json::Value::Object(arguments) = arguments else {
        unreachable!()
    };
    ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("sleepy").with_arguments(arguments),
    ))
}

/// A client with no handlers of its own, talking to `server` over an in-memory stream.
async fn connect(
    server: aaa_mcp::McpServer,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(aaa_mcp::serve_io(server, tokio::io::split(theirs)));
    ().serve(tokio::io::split(ours)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_cancelled_stops_the_tool_and_the_run_says_so() {
    let TestServer {
        server,
        runs,
        worker: _worker,
        ..
    } = support::server().await;
    let run = server.run().clone();
    let client = connect(server).await;

    let request = client
        .peer()
        .send_cancellable_request(sleepy_for_an_hour(), PeerRequestOptions::no_options())
        .await
        .unwrap();
    let requested = fact(&run, TOOL_REQUESTED, None).await;
    let call = CallId::new(requested.subject.unwrap()).unwrap();
    fact(&run, ATTEMPT_STARTED, Some(&call)).await;
    // The tool itself runs (a busy machine may start the attempt well before it).
    within("the tool sleeps", runs.asleep.notified()).await;
    request
        .cancel(Some("the user pressed stop".into()))
        .await
        .unwrap();

    // The run records the cancel, then the call's failure.
    let cancel = fact(&run, TOOL_CANCELLED, Some(&call)).await;
    assert_eq!(cancel.data["reason"], "the user pressed stop");
    let outcome = within("the outcome", run.outcome(&call)).await.unwrap();
    let failure = outcome.failure().expect("a failure");
    assert_eq!(failure.kind, FailureKind::Cancelled, "{outcome:?}");
    assert!(
        failure.message.contains("stopped when told"),
        "the tool saw the cancel and returned: {}",
        failure.message
    );
    assert!(failure.message.contains("the user pressed stop"));
    fact(&run, TOOL_FAILED, Some(&call)).await;

    // The session goes on serving.
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "sleepy"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_ends_cancels_nothing() {
    let TestServer {
        server,
        worker: _worker,
        ..
    } = support::server().await;
    let run = server.run().clone();
    let client = connect(server).await;
    // Longer than rmcp lets a closed session's handlers finish (5 s) before it stops
    // them: the request is stopped while the call still runs.
    let arguments = json!({"ms": 6_000});
    let serde_json::Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("sleepy").with_arguments(arguments),
    ));
    let _pending = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    let requested = fact(&run, TOOL_REQUESTED, None).await;
    let call = CallId::new(requested.subject.unwrap()).unwrap();
    fact(&run, ATTEMPT_STARTED, Some(&call)).await;
    // The client goes away mid-call: the server's session ends, the call does not.
    client.cancel().await.unwrap();
    let outcome = within("the outcome", run.outcome(&call)).await.unwrap();
    assert_eq!(outcome.result(), Some(&json!("awake")), "{outcome:?}");
}

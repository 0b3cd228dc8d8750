//! `ToolLoop` on an embedded engine with real tools: turns, calls, budgets, approvals.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use aaa_loop::facts::{LOOP_ENDED, LOOP_TURN, LoopEnded, LoopTurn};
use aaa_loop::{
    ArgumentsOrProblem, AssistantTurn, Limits, LoopEnd, LoopError, LoopEvent, Message, Model,
    ModelFuture, ModelRequest, ProviderCall, ScriptedModel, StopReason, ToolLoop, Usage,
};
use aaa_tools::event::{TOOL_REQUESTED, ToolRequested};
use aaa_tools::{ApprovalDecision, FailureKind};
use futures::StreamExt;
use serde_json::json;
use support::{add_call, all_tools, call, facts_of, next_approval, within, world};

fn ask(text: &str) -> Vec<Message> {
    vec![Message::system("Use the tools."), Message::user(text)]
}

/// The outputs the model read last, as text.
fn last_outputs(request: &ModelRequest) -> Vec<String> {
    let results = request.last_results().expect("tool results");
    results.iter().map(|r| r.outcome.for_model()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_turns_end_in_a_final_answer_recorded_with_the_calls() {
    let w = world().await;
    let model = Arc::new(ScriptedModel::from_fn(|request| {
        match request.last_results() {
            None => {
                AssistantTurn::tool_calls([add_call("call_1", 2, 3)]).with_usage(Usage::new(10, 5))
            }
            Some(results) => {
                AssistantTurn::answer(format!("The sum is {}", results[0].outcome.for_model()))
                    .with_usage(Usage::new(20, 5))
            }
        }
    }));
    let run = w.engine.new_run();
    let result = ToolLoop::new(model.clone(), all_tools())
        .run(&run, ask("2 + 3?"))
        .await
        .unwrap();

    assert_eq!(result.end, LoopEnd::Final("The sum is 5".into()));
    assert_eq!(
        (result.turns, result.tool_calls, result.resumed_turns),
        (2, 1, 0)
    );
    assert_eq!(result.usage.total_tokens(), 40);
    assert_eq!((model.calls(), w.seen.adds()), (2, 1));
    // The second request holds the first turn and its result, answering the call
    // under the provider's id.
    let second = &model.requests()[1];
    assert_eq!(second.turn, 1);
    assert_eq!(second.messages.len(), 4);
    let results = second.last_results().unwrap();
    assert_eq!(results[0].outcome.result(), Some(&json!(5)));
    assert_eq!(results[0].outcome.call_id().as_str(), "call_1");
    assert_eq!(result.messages.len(), 5);

    // On the bus: turn 0 in its call's request (stored with it, so never one without
    // the other), turn 1 (the answer) on its own, under its deterministic id.
    let requested: ToolRequested = facts_of(&run, TOOL_REQUESTED).await[0].data_as().unwrap();
    assert_eq!(requested.call_id.as_str(), "t0-call_1");
    let attachment = requested.attachment.expect("the turn goes with its call");
    assert_eq!(attachment.kind(), LOOP_TURN);
    let recorded: LoopTurn = attachment.data().unwrap();
    assert_eq!(recorded.turn, 0);
    assert_eq!(
        recorded.assistant,
        model.requests()[1].messages[2].clone().into_assistant()
    );
    let turns = facts_of(&run, LOOP_TURN).await;
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].id, format!("loop-turn.default.{}.1", run.run_id()));
    let last: LoopTurn = turns[0].data_as().unwrap();
    assert_eq!(last.turn, 1);
    let ended: LoopEnded = facts_of(&run, LOOP_ENDED).await[0].data_as().unwrap();
    assert_eq!(ended.end, LoopEnd::Final("The sum is 5".into()));
}

/// `Message::Assistant`'s turn, for the assertions above.
trait IntoAssistant {
    fn into_assistant(self) -> Arc<AssistantTurn>;
}

impl IntoAssistant for Message {
    fn into_assistant(self) -> Arc<AssistantTurn> {
        match self {
            Message::Assistant(turn) => turn,
            other => panic!("not an assistant turn: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_calls_are_answered_in_the_providers_order() {
    let w = world().await;
    let model = Arc::new(ScriptedModel::from_fn(|request| {
        match request.last_results() {
            None => AssistantTurn::tool_calls([
                call("call_slow", "wait_gate", json!({})),
                call("call_fast", "ping", json!({})),
            ]),
            Some(_) => AssistantTurn::answer(last_outputs(request).join(", ")),
        }
    }));
    let run = w.engine.new_run();
    let agent = ToolLoop::new(model.clone(), all_tools());
    let mut stream = agent.run_stream(&run, ask("go"));
    let mut events = Vec::new();
    within(async {
        while let Some(event) = stream.next().await {
            // `wait_gate` finishes only after `ping` has: the outcomes arrive reversed.
            if let LoopEvent::Outcome { result, .. } = &event
                && &*result.call.name == "ping"
            {
                w.seen.gate.notify_one();
            }
            events.push(event);
        }
    })
    .await;

    let arrived: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            LoopEvent::Outcome { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(arrived, ["t0-call_fast", "t0-call_slow"]);
    let requested: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            LoopEvent::CallRequested { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(requested, ["t0-call_slow", "t0-call_fast"]);
    // The model reads them in the order it called them.
    assert_eq!(last_outputs(&model.requests()[1]), ["waited", "pong"]);
    assert!(matches!(events[0], LoopEvent::Turn { turn: 0, .. }));
    assert_eq!(
        events[events.len() - 2],
        LoopEvent::Final("waited, pong".into())
    );
    let Some(LoopEvent::Ended(Ok(result))) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(result.end, LoopEnd::Final("waited, pong".into()));
    // The event shows the turn the conversation holds, not a copy of it.
    let LoopEvent::Turn { assistant, .. } = &events[0] else {
        unreachable!("checked above")
    };
    let Message::Assistant(held) = &result.messages[2] else {
        panic!("{:?}", result.messages[2])
    };
    assert!(Arc::ptr_eq(assistant, held));
}

/// A model that adds forever, `calls` calls a turn, `tokens` tokens a turn.
fn adder(calls: usize, tokens: u64) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(move |_| {
        let calls = (0..calls).map(|i| add_call(&format!("c{i}"), i as i64, 1));
        AssistantTurn::tool_calls(calls).with_usage(Usage::new(tokens, 0))
    }))
}

#[tokio::test(flavor = "multi_thread")]
async fn max_turns_ends_the_loop() {
    let w = world().await;
    let model = adder(1, 0);
    let agent =
        ToolLoop::new(model.clone(), all_tools()).with_limits(Limits::default().with_max_turns(3));
    let result = within(agent.run(&w.engine.new_run(), ask("add")))
        .await
        .unwrap();
    assert_eq!(result.end, LoopEnd::MaxTurns);
    assert_eq!((result.turns, model.calls(), w.seen.adds()), (3, 3, 3));
}

#[tokio::test(flavor = "multi_thread")]
async fn max_tool_calls_ends_the_loop_before_the_turn_that_would_pass_it() {
    let w = world().await;
    let model = adder(2, 0);
    let limits = Limits::default().with_max_tool_calls(3);
    let agent = ToolLoop::new(model.clone(), all_tools()).with_limits(limits);
    let result = within(agent.run(&w.engine.new_run(), ask("add")))
        .await
        .unwrap();
    assert_eq!(result.end, LoopEnd::MaxToolCalls);
    // Turn 1's two calls would make 4: recorded, not run.
    assert_eq!((result.turns, result.tool_calls), (2, 2));
    assert_eq!((model.calls(), w.seen.adds()), (2, 2));
}

#[tokio::test(flavor = "multi_thread")]
async fn max_total_tokens_ends_the_loop() {
    let w = world().await;
    let model = adder(1, 60);
    let limits = Limits::default().with_max_total_tokens(100);
    let agent = ToolLoop::new(model.clone(), all_tools()).with_limits(limits);
    let result = within(agent.run(&w.engine.new_run(), ask("add")))
        .await
        .unwrap();
    assert_eq!(result.end, LoopEnd::MaxTokens);
    assert_eq!(result.usage.total_tokens(), 120);
    assert_eq!((model.calls(), w.seen.adds()), (2, 2));
}

/// A model that never answers.
struct Silent;

impl Model for Silent {
    fn turn<'a>(&'a self, _: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn wall_time_cuts_a_silent_model_and_a_pending_approval_short() {
    let w = world().await;
    let limits = Limits::default().with_wall_time(Duration::from_millis(100));
    let silent = ToolLoop::new(Silent, all_tools()).with_limits(limits.clone());
    let result = within(silent.run(&w.engine.new_run(), ask("hello")))
        .await
        .unwrap();
    assert_eq!((result.end, result.turns), (LoopEnd::WallTime, 0));

    // Nobody approves the payment: the wait for its outcome ends with the budget.
    let model = ScriptedModel::new([AssistantTurn::tool_calls([call(
        "call_pay",
        "pay",
        json!({"to": "bob", "cents": 5}),
    )])]);
    let waiting = ToolLoop::new(model, all_tools()).with_limits(limits);
    let run = w.engine.new_run();
    let result = within(waiting.run(&run, ask("pay bob"))).await.unwrap();
    assert_eq!(
        (result.end, result.turns, result.tool_calls),
        (LoopEnd::WallTime, 1, 0)
    );
    assert_eq!(next_approval(&run).await.call_id.as_str(), "t0-call_pay");
    assert_eq!(w.seen.paid(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refusal_ends_the_loop_without_running_its_calls() {
    let w = world().await;
    let refusal = AssistantTurn::tool_calls([add_call("c1", 1, 2)])
        .with_stop(StopReason::Refused("the model declined to answer".into()));
    let agent = ToolLoop::new(ScriptedModel::new([refusal]), all_tools());
    let result = within(agent.run(&w.engine.new_run(), ask("add")))
        .await
        .unwrap();
    assert_eq!(
        result.end,
        LoopEnd::Refused("the model declined to answer".into())
    );
    assert_eq!(w.seen.adds(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_approval_is_a_result_the_model_works_around() {
    let w = world().await;
    let model = Arc::new(ScriptedModel::from_fn(|request| {
        match request.last_results() {
            None => AssistantTurn::tool_calls([call(
                "call_pay",
                "pay",
                json!({"to": "eve", "cents": 100}),
            )]),
            Some(results) => match results[0].outcome.failure() {
                Some(failed) if failed.kind == FailureKind::Denied => {
                    AssistantTurn::answer(format!("I could not pay: {}", failed.message))
                }
                _ => AssistantTurn::answer("paid"),
            },
        }
    }));
    let run = w.engine.new_run();
    let agent = ToolLoop::new(model.clone(), all_tools());
    let task = tokio::spawn({
        let run = run.clone();
        async move { agent.run(&run, ask("pay eve")).await }
    });
    let asked = next_approval(&run).await;
    assert_eq!(asked.call_id.as_str(), "t0-call_pay");
    run.deny(ApprovalDecision::for_request(&asked).with_reason("eve is not a known payee"))
        .await
        .unwrap();
    let result = within(task).await.unwrap().unwrap();
    assert_eq!(
        result.end,
        LoopEnd::Final(
            "I could not pay: a human denied this call: eve is not a known payee".into()
        )
    );
    assert_eq!((w.seen.paid(), model.calls()), (0, 2));
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_arguments_are_answered_and_the_model_corrects_itself() {
    let w = world().await;
    let broken = ProviderCall::new(
        "call_1",
        "add",
        ArgumentsOrProblem::from_text(r#"{"a": 2, "b":"#),
    );
    let model = Arc::new(ScriptedModel::from_fn(move |request| match request.turn {
        0 => AssistantTurn::tool_calls([broken.clone()]),
        1 => match request.last_results().unwrap()[0].outcome.failure() {
            Some(failed) if failed.kind == FailureKind::BadArgs => {
                AssistantTurn::tool_calls([add_call("call_2", 2, 3)])
            }
            _ => AssistantTurn::answer("no failure to correct"),
        },
        _ => AssistantTurn::answer(last_outputs(request).join("")),
    }));
    let run = w.engine.new_run();
    let result = ToolLoop::new(model.clone(), all_tools())
        .run(&run, ask("2 + 3?"))
        .await
        .unwrap();

    assert_eq!(result.end, LoopEnd::Final("5".into()));
    assert_eq!(
        last_outputs(&model.requests()[1]),
        [
            "error (bad_args): invalid arguments for `add`: the arguments are cut off: the JSON \
          ends early (EOF while parsing a value at line 1 column 13); send one complete JSON object"
        ]
    );
    assert_eq!(w.seen.adds(), 1);
    // Answered by the loop: the broken call never reached the engine.
    let requested = facts_of(&run, TOOL_REQUESTED).await;
    let ids: Vec<_> = requested
        .iter()
        .filter_map(|f| f.subject.as_deref())
        .collect();
    assert_eq!(ids, ["t1-call_2"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn sequential_tools_run_one_at_a_time_the_others_together() {
    let w = world().await;
    let model = Arc::new(ScriptedModel::from_fn(|request| {
        match request.last_results() {
            None => AssistantTurn::tool_calls([
                call("s1", "step", json!({"n": 1})),
                call("m1", "meet", json!({})),
                call("s2", "step", json!({"n": 2})),
                call("m2", "meet", json!({})),
                call("s3", "step", json!({"n": 3})),
            ]),
            Some(_) => AssistantTurn::answer(last_outputs(request).join(" ")),
        }
    }));
    let agent = ToolLoop::new(model, all_tools()).sequential(["step"]);
    let result = within(agent.run(&w.engine.new_run(), ask("steps")))
        .await
        .unwrap();
    // The two `meet` calls can only finish together; the steps never overlapped.
    assert_eq!(result.end, LoopEnd::Final("1 met 2 met 3".into()));
    assert_eq!(w.seen.max_running.load(Ordering::SeqCst), 1);
    assert_eq!(*w.seen.steps.lock().unwrap(), [1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_id_repeated_in_a_later_turn_is_a_new_call() {
    let w = world().await;
    let model = ScriptedModel::new([
        AssistantTurn::tool_calls([add_call("functions.add:0", 1, 2)]),
        AssistantTurn::tool_calls([add_call("functions.add:0", 10, 20)]),
        AssistantTurn::answer("done"),
    ]);
    let model = Arc::new(model);
    let result = ToolLoop::new(model.clone(), all_tools())
        .run(&w.engine.new_run(), ask("add twice"))
        .await
        .unwrap();
    assert_eq!(result.end, LoopEnd::Final("done".into()));
    assert_eq!(w.seen.adds(), 2);
    let requests = model.requests();
    assert_eq!(last_outputs(&requests[1]), ["3"]);
    assert_eq!(last_outputs(&requests[2]), ["30"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_holds_one_conversation() {
    let w = world().await;
    let run = w.engine.new_run();
    let agent = ToolLoop::new(
        ScriptedModel::new([AssistantTurn::answer("hi")]),
        all_tools(),
    );
    agent.run(&run, ask("hello")).await.unwrap();
    let again = agent.run(&run, ask("something else")).await;
    assert_eq!(again, Err(LoopError::InputMismatch(run.run_id().clone())));
}

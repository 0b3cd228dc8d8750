//! A loop stopped mid-run (its task aborted, as a crash would) and started again on
//! the same run picks up where the run's facts say it was.

mod support;

use std::sync::Arc;

use aaa_loop::facts::LOOP_TURN;
use aaa_loop::{
    ArgumentsOrProblem, AssistantTurn, Limits, LoopEnd, LoopEvent, LoopResult, Message, Model,
    ModelFuture, ModelRequest, ProviderCall, ScriptedModel, ToolLoop,
};
use aaa_tools::event::TOOL_REQUESTED;
use aaa_tools::{ApprovalDecision, RunHandle};
use futures::StreamExt;
use serde_json::json;
use support::{World, add_call, all_tools, call, facts_of, next_approval, within, world};
use tokio::sync::Notify;

fn ask() -> Vec<Message> {
    vec![Message::user("What is 2 + 3?")]
}

/// A loop started again on `run`, which ended with "The sum is 5" after two turns and
/// one `add`: it ends with that answer, asking its model nothing and running no tool.
async fn ends_again_asking_nobody(w: &World, run: &RunHandle) {
    let idle = Arc::new(ScriptedModel::new([]));
    let again = ToolLoop::new(idle.clone(), all_tools())
        .run(run, ask())
        .await
        .unwrap();
    assert_eq!(again.end, LoopEnd::Final("The sum is 5".into()));
    assert_eq!(
        (again.resumed_turns, idle.calls(), w.seen.adds()),
        (2, 0, 1)
    );
}

/// Answers its first turn from `first`, then hangs, saying so on `reached`: the
/// moment after the first turn's calls completed and before the next turn.
struct FirstThenHang {
    first: ScriptedModel,
    reached: Arc<Notify>,
}

impl Model for FirstThenHang {
    fn turn<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        if self.first.calls() == 0 {
            return self.first.turn(request);
        }
        self.reached.notify_one();
        Box::pin(std::future::pending())
    }
}

/// Runs a loop on `run` whose model answers `first` and then hangs, and aborts it
/// there (as a crash would): after turn 0's calls were answered, before turn 1.
async fn stopped_after_first_turn(run: &RunHandle, first: AssistantTurn, sequential: &[&str]) {
    let reached = Arc::new(Notify::new());
    let model = FirstThenHang {
        first: ScriptedModel::new([first]),
        reached: reached.clone(),
    };
    let crashing = ToolLoop::new(model, all_tools()).sequential(sequential.iter().copied());
    let task = tokio::spawn({
        let run = run.clone();
        async move { crashing.run(&run, ask()).await }
    });
    within(reached.notified()).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
}

/// A loop started on `run` that answers "Done" when asked: the run's result and how
/// the model was asked.
async fn resumed(run: &RunHandle) -> (LoopResult, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new([AssistantTurn::answer("Done")]));
    let result = ToolLoop::new(model.clone(), all_tools())
        .run(run, ask())
        .await
        .unwrap();
    assert_eq!(result.end, LoopEnd::Final("Done".into()));
    (result, model)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loop_stopped_between_turns_resumes_without_repeating_them() {
    let w = world().await;
    let run = w.engine.new_run();
    let first = AssistantTurn::tool_calls([add_call("call_1", 2, 3)]);
    stopped_after_first_turn(&run, first, &[]).await;
    assert_eq!(w.seen.adds(), 1);

    // A new process: a new model, a new handle on the same run.
    let model = Arc::new(ScriptedModel::new([AssistantTurn::answer("The sum is 5")]));
    let agent = ToolLoop::new(model.clone(), all_tools());
    let handle = w.engine.run(run.run_id().clone());
    let mut stream = agent.run_stream(&handle, ask());
    let mut events = Vec::new();
    while let Some(event) = within(stream.next()).await {
        events.push(event);
    }
    let Some(LoopEvent::Ended(Ok(result))) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(result.end, LoopEnd::Final("The sum is 5".into()));
    assert_eq!(
        (result.turns, result.resumed_turns, result.tool_calls),
        (2, 1, 1)
    );
    // Asked once, for turn 1, with turn 0 and its outcome from the record.
    assert_eq!(model.calls(), 1);
    let request = &model.requests()[0];
    assert_eq!(request.turn, 1);
    let outputs: Vec<String> = request
        .last_results()
        .unwrap()
        .iter()
        .map(|r| r.outcome.for_model())
        .collect();
    assert_eq!(outputs, ["5"]);
    // The tool ran once, was requested once, and nothing was requested again.
    assert_eq!(w.seen.adds(), 1);
    assert_eq!(facts_of(&run, TOOL_REQUESTED).await.len(), 1);
    assert_eq!(events[0], LoopEvent::Resumed { turns: 1 });
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, LoopEvent::CallRequested { .. }))
    );
    // Turn 0 went with its call's request; turn 1, the answer, on its own.
    let requests = facts_of(&run, TOOL_REQUESTED).await;
    let attached = &requests[0].data["attachment"];
    assert_eq!(
        (&attached["type"], &attached["data"]["turn"]),
        (&json!(LOOP_TURN), &json!(0))
    );
    let turns = facts_of(&run, LOOP_TURN).await;
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].data["turn"], 1);

    // A finished run ends again with its answer, asking nobody.
    ends_again_asking_nobody(&w, &handle).await;
}

/// A turn of several calls goes with the first of them requested, and only with it.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_of_several_calls_is_recorded_once() {
    let w = world().await;
    let run = w.engine.new_run();
    let first = AssistantTurn::tool_calls([
        add_call("call_1", 2, 3),
        call("call_2", "ping", json!({})),
        add_call("call_3", 1, 1),
    ]);
    // `add` one call at a time, after `ping`, which is requested first.
    stopped_after_first_turn(&run, first, &["add"]).await;
    let requests = facts_of(&run, TOOL_REQUESTED).await;
    let carrying: Vec<_> = requests
        .iter()
        .filter(|request| request.data.get("attachment").is_some())
        .map(|request| request.subject.clone().unwrap())
        .collect();
    assert_eq!(
        (requests.len(), carrying),
        (3, vec!["t0-call_2".to_owned()])
    );
    assert!(facts_of(&run, LOOP_TURN).await.is_empty());

    let (result, model) = resumed(&run).await;
    assert_eq!((result.resumed_turns, result.tool_calls), (1, 3));
    assert_eq!((model.calls(), model.requests()[0].turn), (1, 1));
    assert_eq!(
        (w.seen.adds(), facts_of(&run, TOOL_REQUESTED).await.len()),
        (2, 3)
    );
}

/// A turn whose calls are answered without a request (arguments that do not read)
/// is recorded on its own before the model is asked again.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_no_request_took_is_recorded_on_its_own() {
    let w = world().await;
    let run = w.engine.new_run();
    let arguments = ArgumentsOrProblem::from_text(r#"{"a": 2, "b":"#);
    let broken = AssistantTurn::tool_calls([ProviderCall::new("call_1", "add", arguments)]);
    stopped_after_first_turn(&run, broken, &[]).await;
    assert!(facts_of(&run, TOOL_REQUESTED).await.is_empty());
    assert_eq!(facts_of(&run, LOOP_TURN).await.len(), 1);

    let (result, model) = resumed(&run).await;
    assert_eq!(result.resumed_turns, 1);
    assert_eq!((model.calls(), model.requests()[0].turn), (1, 1));
    let outputs = model.requests()[0].last_results().unwrap()[0]
        .outcome
        .for_model();
    assert!(outputs.contains("invalid arguments for `add`"), "{outputs}");
    assert_eq!(w.seen.adds(), 0);
}

/// A loop that ends on a budget before requesting a turn's calls records the turn:
/// started again, it ends the same way without asking the model.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_a_budget_stopped_is_still_recorded() {
    let w = world().await;
    let run = w.engine.new_run();
    let limits = Limits::default().with_max_tool_calls(0);
    let model = ScriptedModel::new([AssistantTurn::tool_calls([add_call("call_1", 2, 3)])]);
    let ended = ToolLoop::new(model, all_tools())
        .with_limits(limits.clone())
        .run(&run, ask())
        .await
        .unwrap();
    assert_eq!(ended.end, LoopEnd::MaxToolCalls);
    assert_eq!(facts_of(&run, LOOP_TURN).await.len(), 1);

    let idle = Arc::new(ScriptedModel::new([]));
    let again = ToolLoop::new(idle.clone(), all_tools())
        .with_limits(limits)
        .run(&run, ask())
        .await
        .unwrap();
    assert_eq!((again.end, again.resumed_turns), (LoopEnd::MaxToolCalls, 1));
    assert_eq!((idle.calls(), w.seen.adds()), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pending_approval_outlives_the_loop_that_asked() {
    let w = world().await;
    let run = w.engine.new_run();
    let pay = || call("call_pay", "pay", json!({"to": "bob", "cents": 5}));
    let first = ToolLoop::new(
        ScriptedModel::new([AssistantTurn::tool_calls([pay()])]),
        all_tools(),
    );
    let task = tokio::spawn({
        let run = run.clone();
        async move { first.run(&run, ask()).await }
    });
    let asked = next_approval(&run).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());

    let model = Arc::new(ScriptedModel::from_fn(|request| {
        let results = request.last_results().expect("the payment's outcome");
        AssistantTurn::answer(results[0].outcome.for_model())
    }));
    let agent = ToolLoop::new(model.clone(), all_tools());
    let resumed = tokio::spawn({
        let run = w.engine.run(run.run_id().clone());
        async move { agent.run(&run, ask()).await }
    });
    run.grant(ApprovalDecision::for_request(&asked))
        .await
        .unwrap();
    let result = within(resumed).await.unwrap().unwrap();
    assert_eq!(result.end, LoopEnd::Final("paid 5 to bob".into()));
    assert_eq!((w.seen.paid(), model.calls()), (1, 1));
    assert_eq!(facts_of(&run, TOOL_REQUESTED).await.len(), 1);
}

/// A turn's fact goes on the bus without a de-duplication id: a second fact of a
/// turn (a publish retried after the first was stored, or a reader's copy) is stored
/// too, and a resumed loop reads the first of each number, whether the first is a
/// request carrying the turn or a fact of its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_recorded_twice_is_read_as_recorded_first() {
    let w = world().await;
    let run = w.engine.new_run();
    let script = [
        AssistantTurn::tool_calls([add_call("call_1", 2, 3)]),
        AssistantTurn::answer("The sum is 5"),
    ];
    let done = ToolLoop::new(ScriptedModel::new(script), all_tools())
        .run(&run, ask())
        .await
        .unwrap();
    assert_eq!(done.end, LoopEnd::Final("The sum is 5".into()));

    // Turns 0 (recorded with its call's request) and 1 (on its own) again, under
    // their ids, saying something else.
    let recorded = facts_of(&run, LOOP_TURN).await[0].clone();
    assert_eq!(recorded.id, format!("loop-turn.default.{}.1", run.run_id()));
    for turn in [0, 1] {
        let mut again = recorded.clone();
        again.id = format!("loop-turn.default.{}.{turn}", run.run_id());
        let other = AssistantTurn::answer("Something else");
        again.data = json!({"turn": turn, "assistant": other});
        run.engine().publish(&again).await.unwrap();
    }
    assert_eq!(facts_of(&run, LOOP_TURN).await.len(), 3, "stored");

    ends_again_asking_nobody(&w, &run).await;
}

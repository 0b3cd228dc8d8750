//! OpenAI Responses: fixtures in `tests/fixtures/openai_responses/`.

mod common;

use aaa_loop::openai_responses::{Assembler, parse, parse_slice, render_outcomes};
use aaa_loop::{AssistantTurn, CodecError, Provider, StopReason, provider_id_for};
use common::{args, body, bytes, completed, events, failed, parallel_expected, problem};
use serde_json::{Value, json};

const DIR: &str = "openai_responses";

fn fixture(name: &str) -> Result<AssistantTurn, CodecError> {
    parse_slice(&bytes(DIR, name))
}

fn assemble(events: impl IntoIterator<Item = Vec<u8>>) -> Result<AssistantTurn, CodecError> {
    let mut assembler = Assembler::new();
    for event in events {
        assembler.push_slice(&event)?;
    }
    assembler.finish()
}

#[test]
fn single_call() {
    let turn = fixture("single_call").unwrap();
    assert_eq!(turn.stop, StopReason::ToolUse);
    assert_eq!(turn.text, None);
    let [call] = &turn.calls[..] else {
        panic!("{turn:?}")
    };
    // The call is answered by `call_id`, not by the item's `id` (`fc_...`).
    assert_eq!(
        call.provider_id.as_deref(),
        Some("call_12xxD2N8BNmpKyYf3bEBbzVP")
    );
    assert_eq!(&*call.name, "get_weather");
    assert_eq!(args(call), json!({"city": "Paris", "unit": "celsius"}));
    let usage = turn.usage;
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens,
            usage.reasoning_tokens
        ),
        (291, 95, 128, 64)
    );
}

#[test]
fn parallel_calls_keep_their_order() {
    let turn = fixture("parallel_calls").unwrap();
    let got: Vec<_> = turn
        .calls
        .iter()
        .map(|c| (c.name.to_string(), args(c)))
        .collect();
    assert_eq!(got, parallel_expected());
}

#[test]
fn text_only_final_answer() {
    let turn = fixture("text_only").unwrap();
    assert_eq!(
        turn.text.as_deref(),
        Some("It is 18 °C and sunny in Paris.")
    );
    assert_eq!(turn.stop, StopReason::EndTurn);
    assert!(turn.calls.is_empty());
}

#[test]
fn streamed_events_assemble_into_the_whole_response() {
    let whole = parse(&body(DIR, "parallel_calls")).unwrap();
    assert_eq!(
        assemble(events(DIR, "stream_parallel_calls")).unwrap(),
        whole
    );

    // From the deltas alone (fragments split mid-key and inside a `\u00fc` escape):
    // without the `.done` events that repeat the whole arguments.
    let deltas_only = events(DIR, "stream_parallel_calls")
        .into_iter()
        .filter(|event| {
            let event: Value = serde_json::from_slice(event).unwrap();
            !matches!(
                event["type"].as_str(),
                Some("response.function_call_arguments.done" | "response.output_item.done")
            )
        });
    assert_eq!(assemble(deltas_only).unwrap(), whole);

    let text = assemble(events(DIR, "stream_text")).unwrap();
    assert_eq!(
        text.text.as_deref(),
        Some("It is 18 °C and sunny in Paris.")
    );
    assert_eq!(text.stop, StopReason::EndTurn);
}

#[test]
fn reasoning_items_are_kept_whole_and_in_order() {
    let turn = fixture("loop_reasoning_call_add").unwrap();
    let raw = body(DIR, "loop_reasoning_call_add");
    assert_eq!(turn.reasoning, [raw["output"][0].clone()]);
    assert_eq!(turn.calls.len(), 1);
    assert_eq!(turn.text, None, "a reasoning summary is not the text");
    assert_eq!(turn.usage.reasoning_tokens, 128);
    // A stream keeps each item's final form (`response.output_item.done`).
    assert_eq!(
        assemble(events(DIR, "stream_reasoning_call")).unwrap(),
        turn
    );
}

#[test]
fn a_stream_cut_off_is_unfinished() {
    assert_eq!(
        assemble(events(DIR, "stream_cut_off"))
            .unwrap_err()
            .to_string(),
        "the OpenAI Responses response is not finished: the stream ended before `response.completed`"
    );
}

#[test]
fn malformed_arguments_become_a_problem_on_that_call_only() {
    let turn = fixture("malformed_args").unwrap();
    assert_eq!(turn.calls.len(), 2);
    assert_eq!(
        problem(&turn.calls[0]),
        "the arguments are not valid JSON (key must be a string at line 1 column 2); send one JSON object"
    );
    assert_eq!(args(&turn.calls[1]), json!({}));
}

#[test]
fn truncated_arguments_say_they_are_cut_off() {
    let turn = fixture("truncated_args").unwrap();
    assert_eq!(turn.stop, StopReason::MaxTokens);
    assert_eq!(
        problem(&turn.calls[0]),
        "the arguments are cut off: the JSON ends early (EOF while parsing a string at line 1 column 12); send one complete JSON object"
    );
}

#[test]
fn non_object_arguments_name_what_arrived() {
    let turn = fixture("non_object_args").unwrap();
    assert!(problem(&turn.calls[0]).starts_with("the arguments are a JSON array, not an object;"));
    assert!(problem(&turn.calls[1]).starts_with("the arguments are a JSON number, not an object;"));
}

#[test]
fn a_duplicated_call_id_is_an_error() {
    assert_eq!(
        fixture("duplicate_id").unwrap_err(),
        CodecError::DuplicateCallId {
            provider: Provider::OpenAiResponses,
            provider_id: "call_same".into(),
            first: 0,
            second: 1
        }
    );
}

#[test]
fn an_empty_response_is_an_error() {
    // Reasoning only: nothing for the user, nothing to run.
    assert_eq!(
        fixture("empty").unwrap_err(),
        CodecError::Empty {
            provider: Provider::OpenAiResponses
        }
    );
}

#[test]
fn a_refusal_is_a_refused_turn() {
    let turn = fixture("refusal").unwrap();
    assert_eq!(
        turn.stop,
        StopReason::Refused("I'm sorry, I can't help with that request.".into())
    );
    assert!(turn.calls.is_empty());
}

#[test]
fn other_shapes_are_named() {
    assert_eq!(
        fixture("not_responses").unwrap_err().to_string(),
        "unexpected OpenAI Responses response: `output` is missing"
    );
}

#[test]
fn renders_completed_and_failed_outcomes_in_call_order() {
    let turn = fixture("parallel_calls").unwrap();
    let [a, b, c] = &turn.calls[..] else { panic!() };
    let outcomes = [
        completed(b, json!("12:00")),
        failed(a, "error", "no station in Zürich"),
        completed(c, json!({"degrees": 64.4, "unit": "fahrenheit"})),
    ];
    assert_eq!(
        render_outcomes(&turn.calls, &outcomes).unwrap(),
        [
            json!({"type": "function_call_output", "call_id": "call_3xzbtJ9xQ1xB4HBy8bHvoWBa",
                   "output": "error (error): no station in Zürich"}),
            json!({"type": "function_call_output", "call_id": "call_Zt1bMSuEQV2UE6wkSoZkHF8d", "output": "12:00"}),
            json!({"type": "function_call_output", "call_id": "call_pK8mW2nQ4rT6vX8zB1dF3hJ5",
                   "output": "{\"degrees\":64.4,\"unit\":\"fahrenheit\"}"}),
        ]
    );
}

#[test]
fn provider_ids_round_trip() {
    for call in fixture("parallel_calls").unwrap().calls {
        assert_eq!(
            provider_id_for(&call.call_id).as_deref(),
            call.provider_id.as_deref()
        );
    }
}

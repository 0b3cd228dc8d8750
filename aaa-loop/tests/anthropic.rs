//! Anthropic Messages: fixtures in `tests/fixtures/anthropic/`.
//!
//! A whole Anthropic response carries `input` as an object, so malformed and
//! truncated arguments can only arrive streamed (`input_json_delta` pieces).

mod common;

use aaa_loop::anthropic::{Assembler, parse, parse_slice, render_outcomes};
use aaa_loop::{AssistantTurn, CodecError, Provider, StopReason, provider_id_for};
use common::{args, body, bytes, completed, events, failed, parallel_expected, problem};
use serde_json::json;

const DIR: &str = "anthropic";

fn fixture(name: &str) -> Result<AssistantTurn, CodecError> {
    parse_slice(&bytes(DIR, name))
}

fn stream(name: &str) -> Result<AssistantTurn, CodecError> {
    let mut assembler = Assembler::new();
    for event in events(DIR, name) {
        assembler.push_slice(&event)?;
    }
    assembler.finish()
}

#[test]
fn single_call() {
    let turn = fixture("single_call").unwrap();
    assert_eq!(turn.stop, StopReason::ToolUse);
    assert_eq!(
        turn.text.as_deref(),
        Some("I'll check the weather in Paris.")
    );
    let [call] = &turn.calls[..] else {
        panic!("{turn:?}")
    };
    assert_eq!(
        call.provider_id.as_deref(),
        Some("toolu_01A09q90qw90lq917835lq9")
    );
    assert_eq!(call.call_id.as_str(), "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(args(call), json!({"city": "Paris", "unit": "celsius"}));
    // Cache reads count as prompt tokens.
    let usage = turn.usage;
    assert_eq!(
        (
            usage.input_tokens,
            usage.cached_input_tokens,
            usage.output_tokens
        ),
        (1496, 1024, 89)
    );
}

#[test]
fn parallel_calls_keep_their_order() {
    let turn = fixture("parallel_calls").unwrap();
    assert_eq!(turn.text.as_deref(), Some("Checking all three."));
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
    // Text deltas, `ping`, and `partial_json` split mid-key and inside a `\u00fc` escape.
    assert_eq!(
        stream("stream_parallel_calls").unwrap(),
        parse(&body(DIR, "parallel_calls")).unwrap()
    );
}

#[test]
fn thinking_blocks_are_kept_whole_and_in_order() {
    let turn = fixture("loop_thinking_call_add").unwrap();
    assert_eq!(turn.reasoning.len(), 2);
    assert_eq!(turn.reasoning[0]["type"], "thinking");
    assert_eq!(
        turn.reasoning[0]["thinking"],
        "The user wants 2 + 3. The add tool does that."
    );
    assert!(
        turn.reasoning[0]["signature"]
            .as_str()
            .unwrap()
            .starts_with("EqQBCgIYAhIM")
    );
    let raw = body(DIR, "loop_thinking_call_add");
    assert_eq!(turn.reasoning[1], raw["content"][1], "redacted, as it came");
    assert_eq!(turn.text, None, "thinking is not the text");
    assert_eq!(args(&turn.calls[0]), json!({"a": 2, "b": 3}));
    // Kept through the record a loop makes of its turns.
    let recorded: AssistantTurn =
        serde_json::from_value(serde_json::to_value(&turn).unwrap()).unwrap();
    assert_eq!(recorded, turn);
}

#[test]
fn streamed_thinking_and_its_signature_assemble_into_the_whole_response() {
    assert_eq!(
        stream("stream_thinking_call").unwrap(),
        parse(&body(DIR, "loop_thinking_call_add")).unwrap()
    );
    let mut assembler = Assembler::new();
    assembler
        .push(&json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
        .unwrap();
    let wrong = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "x"}});
    assert!(
        assembler
            .push(&wrong)
            .unwrap_err()
            .to_string()
            .contains("is a `signature_delta` for block 0, which is not of that kind")
    );
}

#[test]
fn a_turn_without_thinking_records_none() {
    let turn = fixture("single_call").unwrap();
    assert!(turn.reasoning.is_empty());
    assert!(
        serde_json::to_value(&turn)
            .unwrap()
            .get("reasoning")
            .is_none()
    );
}

#[test]
fn a_stream_cut_off_is_unfinished() {
    assert_eq!(
        stream("stream_cut_off").unwrap_err().to_string(),
        "the Anthropic Messages response is not finished: the stream ended before a `message_delta` with the stop reason"
    );
}

#[test]
fn malformed_streamed_arguments_become_a_problem() {
    let turn = stream("stream_malformed_args").unwrap();
    assert_eq!(turn.calls[0].call_id.as_str(), "toolu_mal");
    assert_eq!(
        problem(&turn.calls[0]),
        "the arguments are not valid JSON (key must be a string at line 1 column 2); send one JSON object"
    );
}

#[test]
fn truncated_streamed_arguments_say_they_are_cut_off() {
    let turn = stream("stream_truncated_args").unwrap();
    assert_eq!(turn.stop, StopReason::MaxTokens);
    assert_eq!(
        problem(&turn.calls[0]),
        "the arguments are cut off: the JSON ends early (EOF while parsing a string at line 1 column 13); send one complete JSON object"
    );
}

#[test]
fn non_object_input_names_what_arrived() {
    let turn = fixture("non_object_args").unwrap();
    assert!(problem(&turn.calls[0]).starts_with("the arguments are a JSON array, not an object;"));
    assert!(problem(&turn.calls[1]).starts_with("the arguments are a JSON string, not an object;"));
}

#[test]
fn a_duplicated_call_id_is_an_error() {
    assert_eq!(
        fixture("duplicate_id").unwrap_err(),
        CodecError::DuplicateCallId {
            provider: Provider::Anthropic,
            provider_id: "toolu_same".into(),
            first: 0,
            second: 1
        }
    );
}

#[test]
fn an_empty_response_is_an_error() {
    assert_eq!(
        fixture("empty").unwrap_err(),
        CodecError::Empty {
            provider: Provider::Anthropic
        }
    );
}

#[test]
fn a_refusal_is_a_refused_turn() {
    let turn = fixture("refusal").unwrap();
    assert_eq!(
        turn.stop,
        StopReason::Refused("the model declined to answer (stop_reason: refusal)".into())
    );
    assert!(turn.calls.is_empty() && turn.text.is_none());
}

#[test]
fn error_bodies_and_other_shapes_are_named() {
    assert_eq!(
        fixture("error").unwrap_err().to_string(),
        "Anthropic Messages reported an error: overloaded_error: Overloaded"
    );
    assert_eq!(
        parse(
            &json!({"type": "message", "content": [{"type": "tool_use", "name": "f", "input": {}}]})
        )
        .unwrap_err()
        .to_string(),
        "unexpected Anthropic Messages response: `content[0].id` is missing"
    );
}

#[test]
fn renders_one_message_with_failures_marked() {
    let turn = fixture("parallel_calls").unwrap();
    let [a, b, c] = &turn.calls[..] else { panic!() };
    let outcomes = [
        completed(c, json!({"degrees": 64.4})),
        failed(b, "denied", "a human denied the call"),
        completed(a, json!("sunny")),
    ];
    assert_eq!(
        render_outcomes(&turn.calls, &outcomes).unwrap(),
        [json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_01Hn6ZoQNVBT5k3bFqXWgQ7c",
             "content": "error (denied): a human denied the call", "is_error": true},
            {"type": "tool_result", "tool_use_id": "toolu_01PzR3y5Wq8XkV2mN4bL6jT9", "content": "{\"degrees\":64.4}"},
        ]})]
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

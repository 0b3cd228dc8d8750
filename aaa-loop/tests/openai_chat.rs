//! OpenAI Chat Completions: fixtures in `tests/fixtures/openai_chat/`.

mod common;

use aaa_loop::openai_chat::{Assembler, parse, parse_slice, render_outcomes};
use aaa_loop::{AssistantTurn, CodecError, Provider, StopReason, provider_id_for};
use common::{args, body, bytes, completed, events, failed, parallel_expected, problem};
use serde_json::json;

const DIR: &str = "openai_chat";

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
    assert_eq!(turn.text, None);
    let [call] = &turn.calls[..] else {
        panic!("{turn:?}")
    };
    assert_eq!(
        call.provider_id.as_deref(),
        Some("call_w1PkZ8Vb9y0mbXgKLvoUoKRj")
    );
    assert_eq!(call.call_id.as_str(), "call_w1PkZ8Vb9y0mbXgKLvoUoKRj");
    assert_eq!(&*call.name, "get_weather");
    assert_eq!(args(call), json!({"city": "Paris", "unit": "celsius"}));
    let usage = turn.usage;
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens
        ),
        (82, 18, 64)
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
    let ids: Vec<_> = turn.calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "call_3xzbtJ9xQ1xB4HBy8bHvoWBa",
            "call_Zt1bMSuEQV2UE6wkSoZkHF8d",
            "call_pK8mW2nQ4rT6vX8zB1dF3hJ5"
        ]
    );
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
fn streamed_chunks_assemble_into_the_whole_response() {
    // Argument fragments split mid-key, mid-value and inside a `\u00fc` escape.
    let turn = stream("stream_parallel_calls").unwrap();
    assert_eq!(turn, parse(&body(DIR, "parallel_calls")).unwrap());
    assert_eq!(turn.usage.total_tokens(), 166);

    let text = stream("stream_text").unwrap();
    assert_eq!(
        text.text.as_deref(),
        Some("It is 18 °C and sunny in Paris.")
    );
    assert_eq!(text.stop, StopReason::EndTurn);
}

#[test]
fn a_stream_cut_off_is_unfinished() {
    assert_eq!(
        stream("stream_cut_off").unwrap_err().to_string(),
        "the OpenAI Chat Completions response is not finished: the stream ended before a chunk with a `finish_reason`"
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
    assert_eq!(&*turn.calls[0].name, "get_weather");
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
            provider: Provider::OpenAiChat,
            provider_id: "call_same".into(),
            first: 0,
            second: 1
        }
    );
}

#[test]
fn empty_responses_are_errors() {
    let empty = CodecError::Empty {
        provider: Provider::OpenAiChat,
    };
    assert_eq!(fixture("empty").unwrap_err(), empty);
    assert_eq!(fixture("empty_message").unwrap_err(), empty);
    assert_eq!(parse_slice(b"").unwrap_err(), empty);
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
        fixture("not_chat").unwrap_err().to_string(),
        "unexpected OpenAI Chat Completions response: `choices` is missing"
    );
    assert!(matches!(
        parse_slice(b"{\"choices\": ["),
        Err(CodecError::Json { .. })
    ));
}

#[test]
fn renders_completed_and_failed_outcomes_in_call_order() {
    let turn = fixture("parallel_calls").unwrap();
    let [a, b, c] = &turn.calls[..] else { panic!() };
    let outcomes = [
        failed(c, "timeout", "get_weather ran past its 10s timeout"),
        completed(a, json!({"degrees": 21.5})),
        completed(b, json!("12:00")),
    ];
    assert_eq!(
        render_outcomes(&turn.calls, &outcomes).unwrap(),
        [
            json!({"role": "tool", "tool_call_id": "call_3xzbtJ9xQ1xB4HBy8bHvoWBa", "content": "{\"degrees\":21.5}"}),
            json!({"role": "tool", "tool_call_id": "call_Zt1bMSuEQV2UE6wkSoZkHF8d", "content": "12:00"}),
            json!({"role": "tool", "tool_call_id": "call_pK8mW2nQ4rT6vX8zB1dF3hJ5",
                   "content": "error (timeout): get_weather ran past its 10s timeout"}),
        ]
    );
    assert_eq!(
        render_outcomes(&turn.calls, &outcomes[1..]).unwrap_err(),
        CodecError::MissingOutcome(c.call_id.clone())
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

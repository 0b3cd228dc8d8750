//! Gemini: fixtures in `tests/fixtures/gemini/`.
//!
//! Gemini sends `args` as an object and never splits a call across chunks, so there
//! are no malformed or truncated argument strings; its equivalent is a
//! `MALFORMED_FUNCTION_CALL` finish, which comes with no call.

mod common;

use aaa_loop::gemini::{Assembler, parse, parse_slice, positional_call_id, render_outcomes};
use aaa_loop::{AssistantTurn, CodecError, Provider, StopReason, call_id_for, provider_id_for};
use common::{args, body, bytes, completed, events, failed, parallel_expected, problem};
use serde_json::json;

const DIR: &str = "gemini";

fn fixture(name: &str) -> Result<AssistantTurn, CodecError> {
    parse_slice(&bytes(DIR, name), 0)
}

fn stream(name: &str) -> Result<AssistantTurn, CodecError> {
    let mut assembler = Assembler::new(0);
    for event in events(DIR, name) {
        assembler.push_slice(&event)?;
    }
    assembler.finish()
}

#[test]
fn single_call() {
    let turn = fixture("single_call").unwrap();
    assert_eq!(turn.stop, StopReason::ToolUse);
    let [call] = &turn.calls[..] else {
        panic!("{turn:?}")
    };
    assert_eq!(call.provider_id, None);
    assert_eq!(call.call_id, positional_call_id(0, 0));
    assert_eq!(args(call), json!({"city": "Paris", "unit": "celsius"}));
    // Thinking counts as output.
    let usage = turn.usage;
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.reasoning_tokens,
            usage.cached_input_tokens
        ),
        (120, 192, 150, 64)
    );
}

#[test]
fn parallel_calls_keep_their_order_and_positions() {
    let turn = parse(&body(DIR, "parallel_calls"), 4).unwrap();
    assert_eq!(turn.text.as_deref(), Some("Checking all three."));
    let got: Vec<_> = turn
        .calls
        .iter()
        .map(|c| (c.name.to_string(), args(c)))
        .collect();
    assert_eq!(got, parallel_expected());
    let ids: Vec<_> = turn.calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(ids, ["x--g4-0", "x--g4-1", "x--g4-2"]);
}

#[test]
fn calls_with_ids_keep_them() {
    let turn = fixture("with_ids").unwrap();
    assert_eq!(turn.calls[0].call_id.as_str(), "fc-7f3a91c2");
    // Not a valid call id as sent: encoded, and kept as sent for the answer.
    assert_eq!(turn.calls[1].call_id, call_id_for("tools/get_time:1"));
    assert_eq!(
        turn.calls[1].provider_id.as_deref(),
        Some("tools/get_time:1")
    );
    for call in &turn.calls {
        assert_eq!(
            provider_id_for(&call.call_id).as_deref(),
            call.provider_id.as_deref()
        );
    }
}

#[test]
fn text_only_final_answer_leaves_thoughts_out() {
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
    assert_eq!(
        stream("stream_parallel_calls").unwrap(),
        parse(&body(DIR, "parallel_calls"), 0).unwrap()
    );
}

#[test]
fn a_stream_cut_off_is_unfinished() {
    assert_eq!(
        stream("stream_cut_off").unwrap_err().to_string(),
        "the Gemini generateContent response is not finished: the stream ended before a chunk with a `finishReason`"
    );
}

#[test]
fn a_function_without_parameters_gets_empty_arguments() {
    assert_eq!(args(&fixture("no_args").unwrap().calls[0]), json!({}));
}

#[test]
fn non_object_args_name_what_arrived() {
    let turn = fixture("non_object_args").unwrap();
    assert!(problem(&turn.calls[0]).starts_with("the arguments are a JSON array, not an object;"));
    assert!(problem(&turn.calls[1]).starts_with("the arguments are a JSON string, not an object;"));
}

#[test]
fn a_malformed_function_call_is_passed_on_as_its_stop_reason() {
    let turn = fixture("malformed_call").unwrap();
    assert_eq!(
        turn.stop,
        StopReason::Other("MALFORMED_FUNCTION_CALL".into())
    );
    assert!(turn.calls.is_empty());
}

#[test]
fn a_duplicated_call_id_is_an_error() {
    assert_eq!(
        fixture("duplicate_id").unwrap_err(),
        CodecError::DuplicateCallId {
            provider: Provider::Gemini,
            provider_id: "fc-1".into(),
            first: 0,
            second: 1
        }
    );
}

#[test]
fn empty_responses_are_errors() {
    let empty = CodecError::Empty {
        provider: Provider::Gemini,
    };
    assert_eq!(fixture("empty").unwrap_err(), empty);
    assert_eq!(fixture("empty_content").unwrap_err(), empty);
}

#[test]
fn blocked_prompts_and_safety_stops_are_refused_turns() {
    let blocked = fixture("refusal").unwrap();
    assert_eq!(
        blocked.stop,
        StopReason::Refused(
            "the provider blocked the prompt (promptFeedback.blockReason: PROHIBITED_CONTENT)"
                .into()
        )
    );
    assert!(blocked.calls.is_empty() && blocked.text.is_none());
    assert_eq!(
        fixture("safety_stop").unwrap().stop,
        StopReason::Refused(
            "the provider's safety system stopped the answer (finishReason: SAFETY)".into()
        )
    );
}

#[test]
fn error_bodies_and_other_shapes_are_named() {
    assert_eq!(
        fixture("error").unwrap_err().to_string(),
        "Gemini generateContent reported an error: RESOURCE_EXHAUSTED: Resource has been exhausted (e.g. check quota)."
    );
    assert_eq!(
        parse(&json!({"choices": []}), 0).unwrap_err().to_string(),
        "unexpected Gemini generateContent response: `candidates` is missing"
    );
}

#[test]
fn renders_one_content_with_objects_wrapped_and_errors() {
    let turn = fixture("with_ids").unwrap();
    let [a, b] = &turn.calls[..] else { panic!() };
    let outcomes = [
        completed(b, json!("12:00")),
        failed(a, "bad_args", "city: expected a string"),
    ];
    assert_eq!(
        render_outcomes(&turn.calls, &outcomes).unwrap(),
        [json!({"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "id": "fc-7f3a91c2",
                                  "response": {"error": "error (bad_args): city: expected a string"}}},
            {"functionResponse": {"name": "get_time", "id": "tools/get_time:1", "response": {"result": "12:00"}}},
        ]})]
    );

    let positional = fixture("parallel_calls").unwrap();
    let outcomes: Vec<_> = positional
        .calls
        .iter()
        .map(|c| completed(c, json!({"ok": true})))
        .collect();
    let rendered = render_outcomes(&positional.calls, &outcomes).unwrap();
    assert_eq!(
        rendered[0]["parts"][0],
        json!({"functionResponse": {"name": "get_weather", "response": {"ok": true}}})
    );
    assert_eq!(rendered[0]["parts"].as_array().unwrap().len(), 3);
}

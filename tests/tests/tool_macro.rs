//! What `#[tool]` and the registry do, driven through the public API as a user would.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aaa_tools::{
    CallError, CallId, Delivery, LostLease, RegistryCallError, State, ToolContext, ToolError,
    ToolRegistry, tool, tools,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Celsius,
    Fahrenheit,
}

#[derive(Debug, Serialize)]
struct Weather {
    city: String,
    degrees: f64,
}

/// Get the current weather for a city.
///
/// # Arguments
/// * `city` - City name, e.g. "Paris".
/// * `unit` - Temperature unit; Celsius when left out.
#[tool(timeout_s = 10)]
async fn get_weather(city: String, unit: Option<Unit>) -> Result<Weather, ToolError> {
    if city.is_empty() {
        return Err(ToolError::new("the city is empty; send a city name"));
    }
    let degrees = match unit {
        Some(Unit::Fahrenheit) => 68.0,
        _ => 20.0,
    };
    Ok(Weather { city, degrees })
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Stop {
    city: String,
    nights: u32,
}

/// Plan a trip.
///
/// Wrapped prose
/// continues here.
///
/// # Arguments
/// * `stops` - The stops.
///
/// # Errors
/// Never; this section is not shown to the model.
#[tool]
async fn plan(
    #[arg(description = "Where to go, in order.")] stops: Vec<Stop>,
    ctx: &ToolContext,
) -> Result<String, ToolError> {
    let nights: u32 = stops.iter().map(|s| s.nights).sum();
    let first = stops.first().map_or("", |s| s.city.as_str());
    Ok(format!(
        "{} stops from {first}, {nights} nights, for {}",
        stops.len(),
        ctx.call_id()
    ))
}

fn order_key(order: &u64, customer: &str) -> String {
    format!("order-{customer}-{order}")
}

/// Refund an order.
#[tool(
    requires_approval = true,
    delivery = "at_most_once",
    pool = "payments",
    timeout_s = 2.5,
    idempotency_key = order_key,
    guard(max_attempts = 1, lease_ttl_s = 30, lost_lease = "finish")
)]
async fn refund(order: u64, ctx: ToolContext, customer: String) -> Result<String, ToolError> {
    Ok(format!(
        "{customer}/{order} with key {}",
        ctx.idempotency_key()
    ))
}

struct Counter(AtomicUsize);

/// Count calls.
#[tool]
async fn count(counter: State<Counter>) -> Result<usize, ToolError> {
    Ok(counter.0.fetch_add(1, Ordering::SeqCst) + 1)
}

/// Shout, on the blocking pool.
#[tool]
fn shout(text: String) -> String {
    text.to_uppercase()
}

/// Fails with an error not written for the model.
#[tool]
async fn parse_number(text: String) -> Result<i64, ToolError> {
    Ok(text.parse::<i64>()?)
}

/// Panics.
#[tool]
async fn explode() -> Result<(), ToolError> {
    panic!("boom at the launch pad")
}

/// Panics on the blocking pool.
#[tool]
fn explode_sync() -> u8 {
    panic!("sync boom")
}

/// Takes a map.
#[tool]
async fn tally(scores: BTreeMap<String, u32>) -> u32 {
    scores.values().sum()
}

fn ctx() -> ToolContext {
    ToolContext::builder()
        .call_id(CallId::new("call_1").unwrap())
        .build()
}

fn registry() -> ToolRegistry {
    ToolRegistry::builder()
        .tools(tools![
            get_weather,
            plan,
            refund,
            count,
            shout,
            parse_number,
            explode,
            explode_sync,
            tally
        ])
        .state(Counter(AtomicUsize::new(0)))
        .max_args_bytes(4096)
        .build()
        .unwrap()
}

async fn call_err(name: &str, args: Value) -> String {
    registry()
        .call(name, ctx(), args)
        .await
        .unwrap_err()
        .to_string()
}

#[tokio::test]
async fn the_fn_stays_callable() {
    let weather = get_weather("Oslo".into(), Some(Unit::Fahrenheit))
        .await
        .unwrap();
    assert_eq!(weather.degrees, 68.0);
    assert_eq!(shout("hi".into()), "HI");
}

#[test]
fn schema_follows_parameters_and_docs() {
    let tool = get_weather::tool();
    assert_eq!(tool.name(), "get_weather");
    assert_eq!(tool.description(), "Get the current weather for a city.");
    let params = tool.parameters();
    assert_eq!(params["type"], "object");
    assert_eq!(params["required"], json!(["city"]));
    assert_eq!(params["additionalProperties"], false);
    assert_eq!(
        params["properties"]["city"]["description"],
        "City name, e.g. \"Paris\"."
    );
    assert_eq!(
        params["properties"]["unit"]["description"],
        "Temperature unit; Celsius when left out."
    );
    assert_eq!(tool.timeout().as_secs_f64(), 10.0);
    assert_eq!(tool.pool(), "default");
    assert_eq!(tool.delivery(), None);
    assert!(!tool.requires_approval());
    assert!(!tool.is_blocking());
}

#[test]
fn context_and_state_are_not_in_the_schema() {
    let plan = plan::tool();
    assert_eq!(
        plan.description(),
        "Plan a trip.\n\nWrapped prose continues here."
    );
    let props = plan.parameters()["properties"].as_object().unwrap();
    assert_eq!(props.keys().collect::<Vec<_>>(), ["stops"]);
    // The attribute wins over the docs.
    assert_eq!(props["stops"]["description"], "Where to go, in order.");

    let refund = refund::tool();
    let props = refund.parameters()["properties"].as_object().unwrap();
    assert_eq!(props.keys().collect::<Vec<_>>(), ["order", "customer"]);
    assert!(
        count::tool().parameters()["properties"]
            .as_object()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn options_reach_the_tool() {
    let tool = refund::tool();
    assert!(tool.requires_approval());
    assert_eq!(tool.delivery(), Some(Delivery::AtMostOnce));
    assert_eq!(tool.pool(), "payments");
    assert_eq!(tool.timeout().as_millis(), 2500);
    let guard = tool.guard_overrides();
    assert_eq!(guard.max_attempts, Some(1));
    assert_eq!(guard.lease_ttl_s, Some(30.0));
    assert_eq!(guard.lost_lease, Some(LostLease::Finish));
    assert_eq!(guard.heartbeat_s, None);
    assert!(shout::tool().is_blocking());
}

#[test]
fn the_schema_is_built_once() {
    let a = get_weather::tool();
    let b = get_weather::tool();
    assert!(std::ptr::eq(a.parameters(), b.parameters()));
}

#[tokio::test]
async fn calls_run_with_context_and_state() {
    let registry = registry();
    let out = registry
        .call(
            "plan",
            ctx(),
            json!({"stops": [{"city": "Oslo", "nights": 2}]}),
        )
        .await
        .unwrap();
    assert_eq!(out, "1 stops from Oslo, 2 nights, for call_1");
    assert_eq!(registry.call("count", ctx(), json!({})).await.unwrap(), 1);
    assert_eq!(registry.call("count", ctx(), json!({})).await.unwrap(), 2);
    assert_eq!(
        registry
            .call("shout", ctx(), json!({"text": "é ok"}))
            .await
            .unwrap(),
        "É OK"
    );
    assert_eq!(
        registry
            .call("get_weather", ctx(), json!({"city": "Oslo", "unit": null}))
            .await
            .unwrap(),
        json!({"city": "Oslo", "degrees": 20.0})
    );
}

#[tokio::test]
async fn the_idempotency_key_comes_from_the_arguments() {
    let tool = refund::tool();
    let args = json!({"order": 7, "customer": "ada"});
    let key = tool
        .idempotency_key(&args, || unreachable!("the tool has a key fn"))
        .unwrap();
    assert_eq!(key, "order-ada-7");
    assert_eq!(
        get_weather::tool()
            .idempotency_key(&json!({"city": "x"}), || "run/call".into())
            .unwrap(),
        "run/call"
    );
    let err = tool
        .idempotency_key(&json!({"order": "seven", "customer": "ada"}), String::new)
        .unwrap_err();
    assert!(err.to_string().contains("order: expected integer"), "{err}");
}

#[tokio::test]
async fn bad_arguments_say_what_and_where() {
    let cases = [
        (
            "get_weather",
            json!({"city": "Oslo", "unit": "kelvin"}),
            r#"unit: expected one of "celsius", "fahrenheit"; got "kelvin""#,
        ),
        (
            "get_weather",
            json!({"city": 42}),
            "city: expected string; got integer 42",
        ),
        ("get_weather", json!({}), "city: is required but missing"),
        (
            "get_weather",
            json!({"city": "Oslo", "country": "NO"}),
            "unknown argument `country`; expected only: city, unit",
        ),
        (
            "get_weather",
            json!(["Oslo"]),
            "(arguments): expected a JSON object of named arguments; got array",
        ),
        (
            "plan",
            json!({"stops": [{"city": "Oslo", "nights": 1}, {"city": "Rome", "nights": -1}]}),
            "stops[1].nights: must be >= 0; got -1",
        ),
        (
            "tally",
            json!({"scores": {"a": "x"}}),
            "scores.a: expected integer; got string \"x\"",
        ),
    ];
    for (tool, args, expected) in cases {
        let err = call_err(tool, args.clone()).await;
        assert!(
            err.starts_with(&format!("invalid arguments for `{tool}`: ")),
            "{err}"
        );
        assert!(
            err.contains(expected),
            "for {args}: {err:?} should contain {expected:?}"
        );
    }
}

#[tokio::test]
async fn oversized_and_malformed_arguments_are_refused_before_parsing() {
    let registry = registry();
    let big = "x".repeat(5000);
    let err = registry
        .call("shout", ctx(), json!({ "text": big }))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("the limit is 4096 bytes"), "{err}");

    let err = registry
        .parse_args("shout", &format!("{{\"text\": \"{big}\"}}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("the limit is 4096 bytes"), "{err}");
    let err = registry
        .parse_args("shout", "{\"text\": ")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("invalid arguments for `shout`: (arguments): are not valid JSON"),
        "{err}"
    );
    assert_eq!(registry.parse_args("count", "").unwrap(), json!({}));
}

#[tokio::test]
async fn unknown_tools_name_the_closest() {
    let err = registry()
        .call("get_wether", ctx(), json!({}))
        .await
        .unwrap_err();
    assert!(matches!(err, RegistryCallError::UnknownTool(_)));
    assert_eq!(
        err.to_string(),
        "there is no tool named `get_wether`; did you mean `get_weather`?"
    );
    let err = call_err("zzzz", json!({})).await;
    assert!(
        err.starts_with("there is no tool named `zzzz`; the tools are: get_weather, plan, refund"),
        "{err}"
    );
}

#[tokio::test]
async fn tool_errors_keep_model_words_and_hide_internal_detail() {
    let err = registry()
        .call("get_weather", ctx(), json!({"city": ""}))
        .await
        .unwrap_err();
    let RegistryCallError::Call(CallError::Tool(err)) = err else {
        panic!("{err:?}")
    };
    assert_eq!(err.message(), "the city is empty; send a city name");

    let err = registry()
        .call("parse_number", ctx(), json!({"text": "x1"}))
        .await
        .unwrap_err();
    let RegistryCallError::Call(CallError::Tool(err)) = err else {
        panic!("{err:?}")
    };
    assert_eq!(err.message(), ToolError::INTERNAL_MESSAGE);
    assert_eq!(err.detail(), Some("invalid digit found in string"));
}

#[tokio::test]
async fn a_panic_is_a_failure_not_a_dead_caller() {
    let registry = registry();
    for tool in ["explode", "explode_sync"] {
        let err = registry.call(tool, ctx(), json!({})).await.unwrap_err();
        let RegistryCallError::Call(CallError::Panic(message)) = err else {
            panic!("{err:?}")
        };
        assert!(message.contains("boom"), "{message}");
    }
    // The caller goes on.
    assert_eq!(
        registry
            .call("shout", ctx(), json!({"text": "still here"}))
            .await
            .unwrap(),
        "STILL HERE"
    );
}

#[test]
fn registry_errors_name_the_problem() {
    let err = ToolRegistry::new(tools![shout, get_weather, shout]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "two tools are named `shout` (registered at positions 0 and 2)"
    );

    let err = ToolRegistry::new(tools![count]).unwrap_err().to_string();
    assert!(
        err.contains("takes `State<") && err.contains("Counter>`"),
        "{err}"
    );

    let err = ToolRegistry::builder()
        .tools(tools![tally])
        .require_descriptions(true)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool `tally` lacks a description for parameter `scores`: providers choose tools and fill arguments by these words"
    );
    ToolRegistry::builder()
        .tools(tools![get_weather, plan])
        .require_descriptions(true)
        .build()
        .unwrap();
}

#[tokio::test]
async fn hand_built_tools_are_first_class() {
    #[derive(Deserialize, JsonSchema)]
    struct Args {
        /// Text to repeat.
        text: String,
        /// How often.
        times: Option<usize>,
    }
    let repeat = aaa_tools::Tool::from_fn(
        "repeat",
        "Repeat text.",
        |_ctx: ToolContext, args: Args| async move {
            Ok::<_, ToolError>(args.text.repeat(args.times.unwrap_or(2)))
        },
    )
    .unwrap()
    .with_pool("text");
    let echo = aaa_tools::Tool::from_json_fn(
        "echo",
        "Echo.",
        json!({"type": "object", "properties": {"v": {"type": "integer", "minimum": 1}}, "required": ["v"]}),
        |_ctx, args: Value| async move { Ok::<_, ToolError>(args["v"].clone()) },
    )
    .unwrap();
    let registry = ToolRegistry::new([repeat, echo]).unwrap();
    assert_eq!(
        registry
            .call("repeat", ctx(), json!({"text": "ab"}))
            .await
            .unwrap(),
        "abab"
    );
    assert_eq!(
        registry.get("repeat").unwrap().parameters()["additionalProperties"],
        false
    );
    assert_eq!(
        registry.call("echo", ctx(), json!({"v": 3})).await.unwrap(),
        3
    );
    let err = registry
        .call("echo", ctx(), json!({"v": 0}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("v: must be >= 1; got 0"), "{err}");

    let err = aaa_tools::Tool::from_json_fn(
        "bad name",
        "x",
        json!({"type": "object"}),
        |_c, a: Value| async move { Ok::<_, ToolError>(a) },
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid tool name \"bad name\"")
    );
    let err = aaa_tools::Tool::from_json_fn(
        "arr",
        "x",
        json!({"type": "array"}),
        |_c, a: Value| async move { Ok::<_, ToolError>(a) },
    )
    .unwrap_err();
    assert!(err.to_string().contains("\"type\": \"object\""), "{err}");
}

#[test]
fn shared_state_can_be_an_arc() {
    let counter = Arc::new(Counter(AtomicUsize::new(5)));
    let registry = ToolRegistry::builder()
        .tool(count::tool())
        .state_arc(counter.clone())
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(
        rt.block_on(registry.call("count", ctx(), json!({})))
            .unwrap(),
        6
    );
    assert_eq!(counter.0.load(Ordering::SeqCst), 6);
}

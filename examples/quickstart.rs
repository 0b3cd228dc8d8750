//! The tour: tools declared with `#[tool]`, their schema, a model turn that calls
//! several tools at once, and the failures a model sees, all through the embedded
//! engine.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! There is no model here: the "model" is a script of tool calls. Every outcome printed
//! comes from a real call through the engine.

use std::collections::HashMap;
use std::time::Duration;

use aaa_tools::event::{APPROVAL_REQUESTED, ApprovalRequested};
use aaa_tools::export::Format;
use aaa_tools::{
    ApprovalDecision, CallId, Engine, GuardPolicy, Outcome, PreCall, RunHandle, RunId, State,
    ToolCall, ToolContext, ToolError, ToolHandler, ToolRegistry, tool, tools,
};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A temperature unit.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    /// Degrees Celsius.
    Celsius,
    /// Degrees Fahrenheit.
    Fahrenheit,
}

/// The weather in a city.
#[derive(Debug, Serialize)]
struct Weather {
    city: String,
    temperature: f64,
    unit: &'static str,
}

/// Get the current weather for a city.
///
/// # Arguments
/// * `city` - City name, e.g. "Paris".
/// * `unit` - Temperature unit; Celsius when left out.
#[tool(timeout_s = 5)]
async fn get_weather(city: String, unit: Option<Unit>) -> Result<Weather, ToolError> {
    let celsius = match city.to_lowercase().as_str() {
        "paris" => 18.5,
        "oslo" => 4.0,
        other => {
            return Err(ToolError::new(format!(
                "no weather station in {other:?}; try a capital city"
            )));
        }
    };
    Ok(match unit.unwrap_or(Unit::Celsius) {
        Unit::Celsius => Weather {
            city,
            temperature: celsius,
            unit: "celsius",
        },
        Unit::Fahrenheit => Weather {
            city,
            temperature: celsius * 9.0 / 5.0 + 32.0,
            unit: "fahrenheit",
        },
    })
}

/// The shop's orders: shared state, registered once.
struct Orders(HashMap<u64, &'static str>);

/// Look up the status of an order.
///
/// # Arguments
/// * `order_id` - The order number.
#[tool]
async fn order_status(
    orders: State<Orders>,
    ctx: &ToolContext,
    order_id: u64,
) -> Result<String, ToolError> {
    let status = orders
        .0
        .get(&order_id)
        .ok_or_else(|| ToolError::new(format!("no order {order_id}")))?;
    Ok(format!(
        "order {order_id}: {status} (call {} in run {})",
        ctx.call_id(),
        ctx.run_id()
    ))
}

/// Send money to an account. A human approves every payment.
///
/// # Arguments
/// * `to` - The payee's account, e.g. "acct-bob".
/// * `amount_cents` - The amount, in cents.
#[tool(requires_approval = true, delivery = "at_most_once", pool = "payments")]
async fn send_payment(
    ctx: ToolContext,
    to: String,
    amount_cents: u64,
) -> Result<String, ToolError> {
    Ok(format!(
        "sent {amount_cents} cents to {to} (idempotency key {})",
        ctx.idempotency_key()
    ))
}

/// Build the quarterly report (slow).
#[tool(timeout_s = 0.3)]
async fn quarterly_report() -> String {
    tokio::time::sleep(Duration::from_secs(30)).await;
    "report".into()
}

fn show(label: &str, outcome: &Outcome) {
    let mark = if outcome.is_ok() { "ok  " } else { "fail" };
    println!("  [{mark}] {label:<34} -> {}", outcome.for_model());
}

/// Waits for the approval request of `call_id`, as an approval UI would.
async fn approval_request(
    run: &RunHandle,
    call_id: &CallId,
) -> Result<ApprovalRequested, Box<dyn std::error::Error>> {
    let mut facts = run.facts().await?;
    while let Some(fact) = facts.next().await {
        let fact = fact?;
        if fact.kind == APPROVAL_REQUESTED {
            let request: ApprovalRequested = fact.data_as()?;
            if &request.call_id == call_id {
                return Ok(request);
            }
        }
    }
    Err("the run ended without an approval request".into())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = ToolRegistry::builder()
        .tools(tools![
            get_weather,
            order_status,
            send_payment,
            quarterly_report
        ])
        .state(Orders(HashMap::from([
            (1001, "shipped"),
            (1002, "packing"),
        ])))
        .require_descriptions(true)
        .build()?;

    println!("== The tools, as OpenAI strict mode sees `get_weather`:");
    let openai = registry
        .export(Format::OpenAiChat { strict: true })
        .into_result()?;
    println!("{}\n", serde_json::to_string_pretty(&openai[0])?);

    // Guardrails the model cannot see or skip: payments only to known accounts.
    let guards = GuardPolicy::new()
        .before(
            |call| match call.arguments.get("to").and_then(|t| t.as_str()) {
                Some(to) if &*call.tool == "send_payment" && !to.starts_with("acct-") => {
                    PreCall::Reject(format!(
                        "{to:?} is not a known account; payees look like \"acct-name\""
                    ))
                }
                _ => PreCall::Allow,
            },
        )
        .max_calls_per_run(20);

    let engine = Engine::embedded();
    let worker = ToolHandler::new(registry)
        .pool("payments", 1)
        .guards(guards)
        .attach(&engine)
        .await?;
    let run = engine.run(RunId::new("demo-run")?);
    println!("== Run {}", run.run_id());

    println!("\n-- A model turn with three tool calls, run concurrently, answered in call order:");
    let turn = vec![
        ToolCall::new("get_weather", json!({"city": "Paris"})).with_id(CallId::new("call_1")?),
        // Providers send arguments as a string of JSON; that works too.
        ToolCall::new(
            "get_weather",
            json!(r#"{"city": "Oslo", "unit": "fahrenheit"}"#),
        )
        .with_id(CallId::new("call_2")?),
        ToolCall::new("order_status", json!({"order_id": 1001})).with_id(CallId::new("call_3")?),
    ];
    for (outcome, label) in run.call_all(turn).await?.iter().zip([
        "get_weather(Paris)",
        "get_weather(Oslo, °F)",
        "order_status(1001)",
    ]) {
        show(label, outcome);
    }

    println!("\n-- Bad arguments, and the model's correction:");
    show(
        "get_weather(unit: kelvin)",
        &run.call("get_weather", json!({"city": "Paris", "unit": "kelvin"}))
            .await?,
    );
    show(
        "get_weather(unit: celsius)",
        &run.call("get_weather", json!({"city": "Paris", "unit": "celsius"}))
            .await?,
    );
    show(
        "get_wether(Paris)",
        &run.call("get_wether", json!({"city": "Paris"})).await?,
    );

    println!("\n-- A tool that takes too long:");
    show(
        "quarterly_report()",
        &run.call("quarterly_report", json!({})).await?,
    );

    println!("\n-- A payment, approved by a human:");
    let call_id = run
        .request_call(
            ToolCall::new(
                "send_payment",
                json!({"to": "acct-bob", "amount_cents": 1250}),
            )
            .with_id(CallId::new("call_pay_1")?),
        )
        .await?;
    let asked = approval_request(&run, &call_id).await?;
    println!(
        "  approval requested for {} {} (fingerprint {}…)",
        asked.name,
        asked.arguments,
        &asked.fingerprint[..12]
    );
    run.grant(ApprovalDecision::for_request(&asked).with_approver("ops@example.com"))
        .await?;
    show(
        "send_payment(acct-bob, 1250)",
        &run.outcome(&call_id).await?,
    );

    println!("\n-- A payment, denied by a human:");
    let call_id = run
        .request_call(
            ToolCall::new(
                "send_payment",
                json!({"to": "acct-mallory", "amount_cents": 990000}),
            )
            .with_id(CallId::new("call_pay_2")?),
        )
        .await?;
    let asked = approval_request(&run, &call_id).await?;
    println!(
        "  approval requested for {} {}",
        asked.name, asked.arguments
    );
    run.deny(ApprovalDecision::for_request(&asked).with_reason("amount above the daily limit"))
        .await?;
    show(
        "send_payment(acct-mallory, 990000)",
        &run.outcome(&call_id).await?,
    );

    println!("\n-- A payment a guardrail refuses before anyone is asked:");
    show(
        "send_payment(bitcoin-wallet, 100)",
        &run.call(
            "send_payment",
            json!({"to": "bitcoin-wallet", "amount_cents": 100}),
        )
        .await?,
    );

    worker.shutdown(Duration::from_secs(1)).await;
    println!("\nDone: every line above came from a call through the engine.");
    Ok(())
}

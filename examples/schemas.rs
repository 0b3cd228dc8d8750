//! Declares a few tools with `#[tool]` and prints the registry in every provider's
//! format.
//!
//! ```text
//! cargo run --example schemas
//! ```

use std::collections::BTreeMap;

use aaa_tools::export::Format;
use aaa_tools::{ToolContext, ToolError, ToolRegistry, tool, tools};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A temperature unit.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    /// Degrees Celsius.
    Celsius,
    /// Degrees Fahrenheit.
    Fahrenheit,
}

/// The weather at a place.
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
    let degrees = match unit {
        Some(Unit::Fahrenheit) => 68.0,
        _ => 20.0,
    };
    Ok(Weather { city, degrees })
}

/// One stop of a trip.
#[derive(Debug, Deserialize, JsonSchema)]
struct Stop {
    /// Where.
    city: String,
    /// How many nights.
    nights: u32,
}

/// Plan a trip through several stops.
///
/// # Arguments
/// * `stops` - The stops, in order.
/// * `budget` - Spending limits per category, in euros.
#[tool(annotations(title = "Trip planner", read_only_hint = true))]
async fn plan_trip(
    ctx: &ToolContext,
    stops: Vec<Stop>,
    budget: BTreeMap<String, u32>,
) -> Result<String, ToolError> {
    let nights: u32 = stops.iter().map(|s| s.nights).sum();
    let first = stops.first().map_or("nowhere", |s| s.city.as_str());
    Ok(format!(
        "from {first}: {} stops, {nights} nights, {} budget lines (call {})",
        stops.len(),
        budget.len(),
        ctx.call_id()
    ))
}

/// Send money. Runs at most once.
///
/// # Arguments
/// * `to` - The payee's account.
/// * `amount_cents` - The amount, in cents.
#[tool(
    requires_approval = true,
    delivery = "at_most_once",
    pool = "payments",
    timeout_s = 30.0
)]
async fn send_payment(to: String, amount_cents: u64) -> Result<String, ToolError> {
    Ok(format!("sent {amount_cents} cents to {to}"))
}

/// What time is it?
#[tool]
fn now() -> String {
    "12:00".to_owned()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = ToolRegistry::new(tools![get_weather, plan_trip, send_payment, now])?;
    for format in [
        Format::OpenAiChat { strict: false },
        Format::OpenAiChat { strict: true },
        Format::OpenAiResponses { strict: true },
        Format::Anthropic,
        Format::Gemini,
        Format::Mcp,
    ] {
        let export = registry.export(format);
        println!("== {} ({} tools)", format.name(), export.tools.len());
        println!("{}", serde_json::to_string_pretty(&export.to_json())?);
        for error in &export.errors {
            println!("left out: {error}");
        }
        println!();
    }
    Ok(())
}

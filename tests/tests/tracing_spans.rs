//! Each executed call is one `execute_tool` span with the OpenTelemetry GenAI
//! attributes, the attempt, fence, pool and outcome.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aaa_tools::{CallId, Engine, ToolCall, ToolHandler, ToolRegistry, tool, tools};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Add two integers.
#[tool(pool = "math")]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

type Spans = Arc<Mutex<BTreeMap<u64, (String, BTreeMap<String, String>)>>>;

/// Records every span's name and fields, including fields recorded later.
struct Capture(Spans);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0
            .lock()
            .unwrap()
            .insert(id.into_u64(), (attrs.metadata().name().to_owned(), fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if let Some((_, fields)) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
}

#[tokio::test]
async fn every_call_is_an_execute_tool_span() {
    let spans: Spans = Arc::default();
    let subscriber = Registry::default().with(Capture(spans.clone()));
    let _guard = tracing::subscriber::set_default(subscriber);

    let engine = Engine::embedded();
    let _worker = ToolHandler::new(ToolRegistry::new(tools![add]).unwrap())
        .pool("math", 2)
        .attach(&engine)
        .await
        .unwrap();
    let run = engine.new_run();
    let call =
        ToolCall::new("add", json!({"a": 1, "b": 2})).with_id(CallId::new("call_span").unwrap());
    let outcome = run.call_all(vec![call]).await.unwrap().remove(0);
    assert_eq!(outcome.result(), Some(&json!(3)));

    let spans = spans.lock().unwrap();
    let executed: Vec<&BTreeMap<String, String>> = spans
        .values()
        .filter(|(name, _)| name == "execute_tool")
        .map(|(_, fields)| fields)
        .collect();
    assert_eq!(executed.len(), 1, "one span per executed call");
    let fields = executed[0];
    let expected = [
        ("otel.name", "execute_tool add"),
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "add"),
        ("gen_ai.tool.call.id", "call_span"),
        ("attempt", "1"),
        ("fence", "1"),
        ("pool", "math"),
        ("outcome", "completed"),
    ];
    for (key, value) in expected {
        assert_eq!(
            fields.get(key).map(String::as_str),
            Some(value),
            "{key} in {fields:?}"
        );
    }
}

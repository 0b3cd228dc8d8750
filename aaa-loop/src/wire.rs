//! [`Fact`]: a loop fact published as the value it is, written to its CloudEvents JSON
//! only when something reads its bytes.
//!
//! The engine's own events travel that way on the embedded bus (see
//! [`Payload::deferred`]); so do the loop's. Recording a turn then costs the loop a
//! reference to the turn (which the conversation shares: see
//! [`Message::assistant`](crate::Message::assistant)) and an append to the log, not
//! a JSON document per turn (which doubled the cost of a turn in the `loop_overhead`
//! bench). A bus that sends bytes (JetStream) writes them at once, and any reader (a
//! replay of the run, another program) gets exactly the JSON of an
//! [`Event`](aaa_tools::event::Event) with the same attributes: the tests read it
//! back with `Event::from_bytes`.

use std::sync::Arc;
use std::time::SystemTime;

use aaa_tools::bus::{Bus, BusError, Encode, Payload};
use aaa_tools::{RunHandle, RunId, TenantId};
use serde::Serialize;

/// A fact of `kind` about a run, with data `T`, as it goes on the bus.
pub(crate) struct Fact<T> {
    id: String,
    source: Arc<str>,
    kind: &'static str,
    time: SystemTime,
    tenant: TenantId,
    run: RunId,
    data: T,
}

impl<T: Serialize + Send + Sync + 'static> Fact<T> {
    /// A fact of `kind` on `run`, under the event id `id`, published now by `source`.
    pub(crate) fn new(
        run: &RunHandle,
        source: Arc<str>,
        kind: &'static str,
        id: String,
        data: T,
    ) -> Self {
        Fact {
            id,
            source,
            kind,
            time: SystemTime::now(),
            tenant: run.tenant().clone(),
            run: run.run_id().clone(),
            data,
        }
    }

    /// Publishes the fact on `subject` (the run's subject for its kind).
    pub(crate) async fn publish(
        self,
        bus: &dyn Bus,
        subject: &str,
        dedupe: Dedupe,
    ) -> Result<(), BusError> {
        let msg_id = match dedupe {
            Dedupe::ById => Some(self.id.clone()),
            Dedupe::No => None,
        };
        bus.publish(subject, Payload::deferred(self), msg_id.as_deref())
            .await
    }
}

/// Whether the bus drops a later publish of a fact's id.
#[derive(Clone, Copy)]
pub(crate) enum Dedupe {
    /// Within the bus's window, as it would a retried publish of the same fact.
    ById,
    /// Never: for a fact whose id is fresh (no other publish has it), and for a
    /// turn, whose readers take the first fact of each number (see
    /// [`facts`](crate::facts)).
    No,
}

/// The attributes of [`Event`](aaa_tools::event::Event), in its order.
#[derive(Serialize)]
struct Wire<'a, T> {
    specversion: &'static str,
    id: &'a str,
    source: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    time: String,
    datacontenttype: &'static str,
    aaarunid: &'a RunId,
    aaatenant: &'a TenantId,
    data: &'a T,
}

impl<T: Serialize + Send + Sync + 'static> Encode for Fact<T> {
    fn encode(&self) -> Vec<u8> {
        let wire = Wire {
            specversion: "1.0",
            id: &self.id,
            source: &self.source,
            kind: self.kind,
            time: rfc3339(self.time),
            datacontenttype: "application/json",
            aaarunid: &self.run,
            aaatenant: &self.tenant,
            data: &self.data,
        };
        // Strings, ids and JSON-shaped data: serializing cannot fail.
        serde_json::to_vec(&wire).unwrap_or_default()
    }
}

/// `time` in RFC 3339, UTC, with microseconds (`2026-12-03T10:20:30.123456Z`), as the
/// engine writes it (crate `humantime`, which the engine uses too).
pub(crate) fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_micros(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aaa_tools::Engine;
    use aaa_tools::event::Event;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn times_are_rfc3339_utc_with_microseconds() {
        let at = |secs: u64, micros: u64| {
            rfc3339(
                std::time::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros),
            )
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_825_599, 7), "2000-02-29T11:59:59.000007Z");
        assert_eq!(at(1_798_761_600, 999_999), "2027-01-01T00:00:00.999999Z");
        assert_eq!(at(4_107_542_399, 0), "2100-02-28T23:59:59.000000Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000000Z");
    }

    #[test]
    fn a_fact_reads_back_as_the_event_it_is() {
        let run = Engine::embedded().new_run();
        let source = Arc::from(run.engine().source());
        let kind = "aaa.loop.turn";
        let fact = Fact::new(&run, source, kind, "loop-turn.x".into(), json!({"turn": 3}));
        let event = Event::from_bytes(&fact.encode()).unwrap();
        assert_eq!(event.id, "loop-turn.x");
        assert_eq!(event.kind, "aaa.loop.turn");
        assert_eq!(&event.aaarunid, run.run_id());
        assert_eq!(event.source, run.engine().source());
        assert_eq!(event.data, json!({"turn": 3}));
        assert_eq!(
            event.bus_subject(),
            format!("aaa.default.{}.loop.turn", run.run_id())
        );
    }
}

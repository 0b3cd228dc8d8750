//! The fast paths of the wire format: [`Parsed`] reads an event and its data in one
//! pass, [`Draft`] writes one (through serde) without an intermediate JSON value. Both
//! speak exactly the format of [`Event`]; the engine uses them on every call, [`Event`]
//! stays the public, general form.
//!
//! Times are written by `humantime`, whose `format_rfc3339_micros` is exactly the
//! event format (RFC 3339, UTC, microseconds): the crate is already in the tree, and
//! the `time` crate, which parses incoming times, is built here without its formatting.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::{Event, EventError, fast_uuid};
use crate::bus::{Encode, Payload};
use crate::ids::{CallId, RunId, TenantId};

/// An event whose `data` was decoded as `T` while it was parsed.
#[derive(Debug)]
pub(crate) struct Parsed<T> {
    /// The event type.
    pub(crate) kind: Cow<'static, str>,
    /// The tenant.
    pub(crate) tenant: TenantId,
    /// The run.
    pub(crate) run: RunId,
    /// The payload.
    pub(crate) data: T,
}

impl<T> Parsed<T> {
    /// The same event with its data turned into `U`.
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Parsed<U> {
        Parsed {
            kind: self.kind,
            tenant: self.tenant,
            run: self.run,
            data: f(self.data),
        }
    }
}

/// The wire form, read in one pass: the attributes the engine needs, the required
/// ones it does not need checked for presence only, `data` straight into `T`.
#[derive(Deserialize)]
struct WireIn<'a, T> {
    #[serde(borrow)]
    specversion: std::borrow::Cow<'a, str>,
    #[allow(dead_code)]
    id: serde::de::IgnoredAny,
    #[allow(dead_code)]
    source: serde::de::IgnoredAny,
    #[serde(default, borrow)]
    time: Option<Cow<'a, str>>,
    #[serde(rename = "type")]
    kind: String,
    aaarunid: RunId,
    aaatenant: TenantId,
    data: T,
}

impl<T: serde::de::DeserializeOwned> Parsed<T> {
    /// Parses an event and its data in one pass (the hot path: no intermediate JSON
    /// value). What does not parse goes through [`Event::from_bytes`] and
    /// [`Event::into_data`] again, for their precise errors.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Parsed<T>, EventError> {
        if let Ok(wire) = serde_json::from_slice::<WireIn<'_, T>>(bytes)
            && wire.specversion == "1.0"
        {
            super::check_time(wire.time.as_deref())?;
            return Ok(Parsed {
                kind: Cow::Owned(wire.kind),
                tenant: wire.aaatenant,
                run: wire.aaarunid,
                data: wire.data,
            });
        }
        let event = Event::from_bytes(bytes)?;
        let (kind, tenant, run) = (
            event.kind.clone(),
            event.aaatenant.clone(),
            event.aaarunid.clone(),
        );
        Ok(Parsed {
            kind: Cow::Owned(kind),
            tenant,
            run,
            data: event.into_data()?,
        })
    }
}

impl<T: serde::de::DeserializeOwned + Clone + 'static> Parsed<T> {
    /// Reads an event from a payload: the [`Draft`] it carries unwritten, when it
    /// carries one of this data type (nothing to parse, nothing to check: the engine
    /// made it), else its bytes, as [`from_bytes`](Self::from_bytes) does.
    pub(crate) fn from_payload(payload: &Payload) -> Result<Parsed<T>, EventError> {
        Ok(Self::borrow_payload(payload)?.map(Cow::into_owned))
    }

    /// As [`from_payload`](Self::from_payload), with the data of an unwritten draft
    /// borrowed from the payload rather than copied (a consumer that only reads it, or
    /// keeps a part of it, copies only that).
    pub(crate) fn borrow_payload(payload: &Payload) -> Result<Parsed<Cow<'_, T>>, EventError> {
        match payload.value::<Draft<T>>() {
            Some(draft) => Ok(Parsed {
                kind: draft.kind.clone(),
                tenant: draft.aaatenant.clone(),
                run: draft.aaarunid.clone(),
                data: Cow::Borrowed(&draft.data),
            }),
            None => Ok(Self::from_bytes(payload)?.map(Cow::Owned)),
        }
    }
}

/// An event to send, owning what it says (ids and the source are shared, not copied):
/// written straight to bytes in the same form as [`Event`] (no intermediate JSON value
/// for `data`), or carried unwritten in a [`Payload`] ([`Draft::into_payload`]) for a
/// consumer in the same process to read back with [`Parsed::from_payload`].
#[derive(Serialize)]
pub(crate) struct Draft<T> {
    specversion: &'static str,
    /// The event id (the bus de-duplicates by it).
    #[serde(serialize_with = "draft_id")]
    pub(crate) id: DraftId,
    #[serde(serialize_with = "shared_str")]
    source: Arc<str>,
    #[serde(rename = "type")]
    kind: Cow<'static, str>,
    /// Written out only when the event is (most never are on the embedded bus).
    #[serde(serialize_with = "rfc3339_time")]
    time: SystemTime,
    datacontenttype: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject: Option<CallId>,
    aaarunid: RunId,
    aaatenant: TenantId,
    data: T,
}

fn shared_str<S: serde::Serializer>(text: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(text)
}

fn draft_id<S: serde::Serializer>(id: &DraftId, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&id.text())
}

fn rfc3339_time<S: serde::Serializer>(time: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&humantime::format_rfc3339_micros(*time))
}

/// A draft's event id: a fresh UUID, kept as its 36 characters (no allocation, and a
/// copy costs no more), or a call's outcome id, by which a republished outcome is
/// de-duplicated, kept as the shared ids it is made of and written out when needed
/// (an event the log keeps holds no allocation of its own for its id).
#[derive(Clone, Debug)]
pub(crate) enum DraftId {
    /// A random UUID, hyphenated, lower case.
    Fresh([u8; 36]),
    /// `outcome.<tenant>.<run>.<call>` (see [`names`](crate::names)).
    Outcome {
        tenant: TenantId,
        run: RunId,
        call: CallId,
    },
}

impl DraftId {
    /// A fresh random id.
    pub(crate) fn fresh() -> DraftId {
        let mut text = [0; 36];
        fast_uuid().hyphenated().encode_lower(&mut text);
        DraftId::Fresh(text)
    }

    /// The id of the outcome of call `call` of a run.
    pub(crate) fn outcome(tenant: &TenantId, run: &RunId, call: &CallId) -> DraftId {
        DraftId::Outcome {
            tenant: tenant.clone(),
            run: run.clone(),
            call: call.clone(),
        }
    }

    /// The id as text.
    pub(crate) fn text(&self) -> String {
        match self {
            DraftId::Fresh(text) => std::str::from_utf8(text)
                .expect("a hyphenated UUID is ASCII")
                .to_owned(),
            DraftId::Outcome { tenant, run, call } => {
                crate::names::CallName::OutcomeId.of(tenant, run, call)
            }
        }
    }
}

impl<T: Serialize> Draft<T> {
    /// A new event of `kind` for a run, with the id given and the current time.
    pub(crate) fn new(
        id: DraftId,
        kind: impl Into<Cow<'static, str>>,
        source: &Arc<str>,
        tenant: &TenantId,
        run: &RunId,
        call: Option<&CallId>,
        data: T,
    ) -> Self {
        Draft {
            specversion: "1.0",
            id,
            source: source.clone(),
            kind: kind.into(),
            time: SystemTime::now(),
            datacontenttype: "application/json",
            subject: call.cloned(),
            aaarunid: run.clone(),
            aaatenant: tenant.clone(),
            data,
        }
    }

    /// The event type.
    pub(crate) fn kind(&self) -> Cow<'static, str> {
        self.kind.clone()
    }

    /// The bus subject this event travels on.
    pub(crate) fn bus_subject(&self) -> String {
        crate::names::event_subject(
            &self.aaatenant,
            &self.aaarunid,
            &self.kind,
            self.subject.as_ref(),
        )
    }

    /// The JSON bytes of the event, as `serde_json` writes it.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        // Room for the envelope (about 330 bytes) and small data: no growth for most
        // events, and little unused room kept with them in a log.
        let mut out = Vec::with_capacity(512);
        // Ids, constants, times and the data types of events, whose maps have string
        // keys: nothing here fails to serialize.
        serde_json::to_writer(&mut out, self).expect("an event serializes to JSON");
        out
    }
}

impl<T: Serialize + Send + Sync + 'static> Draft<T> {
    /// The event as a [`Payload`] carrying it unwritten: an in-process bus hands it to
    /// in-process consumers as it is, and a bus that sends bytes writes them.
    pub(crate) fn into_payload(self) -> Payload {
        Payload::deferred(self)
    }
}

/// Writes the event as [`Draft::to_bytes`] does.
impl<T: Serialize + Send + Sync + 'static> Encode for Draft<T> {
    fn encode(&self) -> Vec<u8> {
        self.to_bytes()
    }
}

/// A fresh event id: a random UUID, hyphenated.
pub(super) fn new_event_id() -> String {
    DraftId::fresh().text()
}

/// The current time in RFC 3339 with microseconds, UTC (`2026-12-03T10:20:30.123456Z`).
pub(super) fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{TOOL_COMPLETED, ToolCompleted};
    use serde_json::{Value, json};

    /// A `tool.completed` draft for call `c-1` of run `run-1` with `result`, its run
    /// and its data.
    fn completed_draft(result: Value) -> (RunId, ToolCompleted, Draft<ToolCompleted>) {
        let (tenant, run, call) = (
            TenantId::default(),
            RunId::new("run-1").unwrap(),
            CallId::new("c-1").unwrap(),
        );
        let data = ToolCompleted {
            call_id: call.clone(),
            name: "add".into(),
            result,
            attempt: 1,
        };
        let source: Arc<str> = Arc::from("src");
        let draft = Draft::new(
            DraftId::fresh(),
            TOOL_COMPLETED,
            &source,
            &tenant,
            &run,
            Some(&call),
            data.clone(),
        );
        (run, data, draft)
    }

    #[test]
    fn drafts_are_events_and_parse_in_one_pass() {
        let (run, data, draft) = completed_draft(json!(5));
        // The bytes are serde's writing of the draft, envelope and data alike.
        assert_eq!(draft.to_bytes(), serde_json::to_vec(&draft).unwrap());
        let odd = Draft::new(
            DraftId::fresh(),
            "a\"b\\c\u{1}é",
            &Arc::from("src"),
            &TenantId::default(),
            &run,
            None,
            json!({"k": [1]}),
        );
        assert_eq!(odd.to_bytes(), serde_json::to_vec(&odd).unwrap());
        let event = Event::from_bytes(&draft.to_bytes()).unwrap();
        assert_eq!(event.bus_subject(), &*draft.bus_subject());
        assert_eq!(
            (event.id.as_str(), event.subject.as_deref()),
            (&*draft.id.text(), Some("c-1"))
        );
        assert_eq!(event.data_as::<ToolCompleted>().unwrap(), data);
        let bytes = draft.to_bytes();
        let wire = serde_json::from_slice::<WireIn<'_, ToolCompleted>>(&bytes);
        assert!(
            wire.is_ok(),
            "the one-pass parse reads a draft: {:?}",
            wire.err().map(|e| e.to_string())
        );
        let parsed = Parsed::<ToolCompleted>::from_bytes(&draft.to_bytes()).unwrap();
        assert_eq!(
            (&*parsed.kind, parsed.run, parsed.data),
            (TOOL_COMPLETED, run.clone(), data.clone())
        );
        // What the one-pass parse rejects gets the two-pass errors.
        let no_data = json!({"specversion": "1.0", "id": "1", "source": "s", "type": "t", "aaarunid": "r", "aaatenant": "t"});
        let error =
            Parsed::<ToolCompleted>::from_bytes(no_data.to_string().as_bytes()).unwrap_err();
        assert!(error.to_string().contains("invalid data"), "{error}");
        let old = json!({"specversion": "0.3", "id": "1", "source": "s", "type": "t", "time": "x", "aaarunid": "r", "aaatenant": "t", "data": {}});
        let error = Parsed::<Value>::from_bytes(old.to_string().as_bytes()).unwrap_err();
        assert!(error.to_string().contains("specversion"), "{error}");
    }

    #[test]
    fn events_follow_cloudevents_on_optional_attributes() {
        let minimal = json!({"specversion": "1.0", "id": "1", "source": "s", "type": "t",
            "aaarunid": "r", "aaatenant": "t", "data": {"x": 1}});
        let with = |key: &str, value: Value| {
            let mut event = minimal.clone();
            event[key] = value;
            event.to_string()
        };
        // No `time`, `datacontenttype` or `subject`: accepted, on both paths.
        let parsed = Parsed::<Value>::from_bytes(minimal.to_string().as_bytes()).unwrap();
        assert_eq!(parsed.data, json!({"x": 1}));
        let event = Event::from_bytes(minimal.to_string().as_bytes()).unwrap();
        assert_eq!((event.time, event.subject), (None, None));
        // A `time` with an offset and a fraction, and an unknown extension: accepted.
        for ok in [
            with("time", json!("2026-12-06T10:20:30.5+02:00")),
            with("someextension", json!("whatever")),
        ] {
            Parsed::<Value>::from_bytes(ok.as_bytes()).unwrap();
            Event::from_bytes(ok.as_bytes()).unwrap();
        }
        // A `time` that is not RFC 3339: refused, naming it, on both paths.
        for bad in ["not a time", "2026-12-06 10:20:30", "2026-13-06T10:20:30Z"] {
            let text = with("time", json!(bad));
            let error = Parsed::<Value>::from_bytes(text.as_bytes()).unwrap_err();
            assert!(
                error.to_string().contains("not an RFC 3339 time"),
                "{error}"
            );
            assert!(Event::from_bytes(text.as_bytes()).is_err());
        }
    }

    #[test]
    fn a_draft_in_a_payload_is_read_back_unwritten() {
        let (run, _, draft) = completed_draft(json!({"sum": 5}));
        let expected = draft.to_bytes();
        let payload = draft.into_payload();
        let parsed = Parsed::<ToolCompleted>::from_payload(&payload).unwrap();
        assert_eq!((&*parsed.kind, &parsed.run), (TOOL_COMPLETED, &run));
        assert_eq!(parsed.data.result, json!({"sum": 5}));
        assert!(!payload.is_written(), "read back without writing it");
        // Asked as another data type, it is parsed from its bytes (and fails here).
        assert!(Parsed::<crate::event::ToolFailed>::from_payload(&payload).is_err());
        assert!(payload.is_written());
        // Written out, it is what the draft writes, times and ids included.
        assert_eq!(&payload[..], &expected[..]);
        let from_bytes = Parsed::<ToolCompleted>::from_payload(&expected.into()).unwrap();
        assert_eq!(from_bytes.data, parsed.data);
    }

    #[test]
    fn event_times_are_rfc3339_with_microseconds() {
        for _ in 0..3 {
            let ours = now_rfc3339();
            let parsed = humantime::parse_rfc3339(&ours).expect("parses");
            let age = SystemTime::now()
                .duration_since(parsed)
                .expect("not in the future");
            assert!(age < std::time::Duration::from_secs(5), "{ours}");
            assert_eq!(
                (ours.len(), &ours[19..20], &ours[26..]),
                (27, ".", "Z"),
                "{ours}"
            );
        }
        let id = new_event_id();
        assert_eq!(
            uuid::Uuid::parse_str(&id).unwrap().hyphenated().to_string(),
            id
        );
    }
}

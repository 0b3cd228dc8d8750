//! Events: CloudEvents 1.0 in JSON structured mode, the wire format of every fact.
//!
//! # Wire format
//!
//! Every message on the bus is one JSON object (UTF-8) with these attributes:
//!
//! | attribute | value |
//! |---|---|
//! | `specversion` | `"1.0"` |
//! | `id` | unique per event (a UUID); the bus de-duplicates publishes by it |
//! | `source` | who published it, e.g. `aaa-tools/engine/4f1c…` |
//! | `type` | one of the types below |
//! | `time` | RFC 3339, UTC |
//! | `datacontenttype` | `"application/json"` |
//! | `subject` | the call id, when the event is about one call |
//! | `aaarunid` | extension: the run id |
//! | `aaatenant` | extension: the tenant id |
//! | `data` | the payload, a JSON object |
//!
//! Types and their `data`:
//!
//! | `type` | `data` |
//! |---|---|
//! | `aaa.tool.requested` | `{call_id, name, arguments, meta?}`; `arguments` is an object, or a string of JSON as providers send it |
//! | `aaa.tool.completed` | `{call_id, name, result, attempt}` |
//! | `aaa.tool.failed` | `{call_id, name, kind, message, attempt}`; `kind` is a [`FailureKind`] |
//! | `aaa.approval.requested` | `{call_id, name, arguments, fingerprint, reason?}` |
//! | `aaa.approval.granted` | `{call_id, fingerprint?, approver?}` |
//! | `aaa.approval.denied` | `{call_id, reason?, fingerprint?, approver?}` |
//! | `aaa.guard.attempt_started` | `{call_id, name, attempt, worker}` |
//! | `aaa.guard.taken_over` | `{call_id, name, attempt, worker, previous_attempt, previous_worker}` |
//! | `aaa.guard.lease_lost` | `{call_id, name, attempt, worker}` |
//! | `aaa.tool.stale_result` | `{call_id, name, attempt, current_attempt}`: a result from a superseded attempt, dropped |
//! | `aaa.tool.resolved` | `{call_id, name, outcome, result?, message?, resolved_by}`: an operator settled an `outcome_unknown` call |
//!
//! On a bus, an event travels on the subject `aaa.<tenant>.<run>.<type without
//! "aaa.">`, e.g. `aaa.default.run-1.tool.completed`, so a run's facts can be read back
//! with the filter `aaa.<tenant>.<run>.>`. Ids are restricted to `[A-Za-z0-9_-]` (see
//! [`RunId`]), so no id can add a subject token or a wildcard.
//!
//! A program in another language requests a call by publishing a `aaa.tool.requested`
//! event on `aaa.<tenant>.<run>.tool.requested` and reads the outcome from
//! `aaa.<tenant>.<run>.tool.completed` or `.tool.failed`.

use std::fmt;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::{CallId, RunId, TenantId};

/// `aaa.tool.requested`.
pub const TOOL_REQUESTED: &str = "aaa.tool.requested";
/// `aaa.tool.completed`.
pub const TOOL_COMPLETED: &str = "aaa.tool.completed";
/// `aaa.tool.failed`.
pub const TOOL_FAILED: &str = "aaa.tool.failed";
/// `aaa.approval.requested`.
pub const APPROVAL_REQUESTED: &str = "aaa.approval.requested";
/// `aaa.approval.granted`.
pub const APPROVAL_GRANTED: &str = "aaa.approval.granted";
/// `aaa.approval.denied`.
pub const APPROVAL_DENIED: &str = "aaa.approval.denied";
/// `aaa.guard.attempt_started`.
pub const ATTEMPT_STARTED: &str = "aaa.guard.attempt_started";
/// `aaa.guard.taken_over`.
pub const TAKEN_OVER: &str = "aaa.guard.taken_over";
/// `aaa.guard.lease_lost`.
pub const LEASE_LOST: &str = "aaa.guard.lease_lost";
/// `aaa.tool.stale_result`.
pub const STALE_RESULT: &str = "aaa.tool.stale_result";
/// `aaa.tool.resolved`.
pub const TOOL_RESOLVED: &str = "aaa.tool.resolved";

/// A CloudEvents 1.0 event (see the [module docs](self) for the wire format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Always `"1.0"`.
    pub specversion: String,
    /// Unique id of this event.
    pub id: String,
    /// The publisher.
    pub source: String,
    /// The event type, e.g. `aaa.tool.completed`.
    #[serde(rename = "type")]
    pub kind: String,
    /// When it was published, RFC 3339.
    pub time: String,
    /// Always `"application/json"`.
    #[serde(default = "json_content_type")]
    pub datacontenttype: String,
    /// The call id, for events about one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Extension attribute: the run.
    pub aaarunid: RunId,
    /// Extension attribute: the tenant.
    pub aaatenant: TenantId,
    /// The payload.
    #[serde(default)]
    pub data: Value,
}

fn json_content_type() -> String {
    "application/json".to_owned()
}

impl Event {
    /// A new event of `kind` for a run, with a fresh id and the current time.
    pub fn new(
        kind: &str,
        source: &str,
        tenant: &TenantId,
        run: &RunId,
        call: Option<&CallId>,
        data: Value,
    ) -> Self {
        Event {
            specversion: "1.0".to_owned(),
            id: new_event_id(),
            source: source.to_owned(),
            kind: kind.to_owned(),
            time: now_rfc3339(),
            datacontenttype: json_content_type(),
            subject: call.map(|c| c.as_str().to_owned()),
            aaarunid: run.clone(),
            aaatenant: tenant.clone(),
            data,
        }
    }

    /// The bus subject this event travels on.
    pub fn bus_subject(&self) -> String {
        subject(&self.aaatenant, &self.aaarunid, &self.kind)
    }

    /// The JSON bytes of the event.
    pub fn to_bytes(&self) -> Vec<u8> {
        // An Event holds only strings and a JSON value: serializing cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses an event, checking that it is a CloudEvents 1.0 event.
    pub fn from_bytes(bytes: &[u8]) -> Result<Event, EventError> {
        let event: Event = serde_json::from_slice(bytes)
            .map_err(|e| EventError(format!("not a valid event: {e}")))?;
        if event.specversion != "1.0" {
            return Err(EventError(format!(
                "unsupported specversion {:?}; expected \"1.0\"",
                event.specversion
            )));
        }
        Ok(event)
    }

    /// Decodes `data` as `T`, consuming the event.
    pub fn into_data<T: serde::de::DeserializeOwned>(self) -> Result<T, EventError> {
        let kind = self.kind;
        serde_json::from_value(self.data)
            .map_err(|e| EventError(format!("`{kind}` event has invalid data: {e}")))
    }

    /// Decodes `data` as `T`.
    pub fn data_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, EventError> {
        serde_json::from_value(self.data.clone())
            .map_err(|e| EventError(format!("`{}` event has invalid data: {e}", self.kind)))
    }
}

/// An event whose `data` was decoded as `T` while it was parsed.
#[derive(Debug)]
pub(crate) struct Parsed<T> {
    /// The event type.
    pub(crate) kind: String,
    /// The tenant.
    pub(crate) tenant: TenantId,
    /// The run.
    pub(crate) run: RunId,
    /// The payload.
    pub(crate) data: T,
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
    #[allow(dead_code)]
    time: serde::de::IgnoredAny,
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
            return Ok(Parsed {
                kind: wire.kind,
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
            kind,
            tenant,
            run,
            data: event.into_data()?,
        })
    }
}

/// An event to send, borrowing what it can: serialized straight to bytes, in the same
/// form as [`Event`] (no intermediate JSON value for `data`).
#[derive(Serialize)]
pub(crate) struct Draft<'a, T> {
    specversion: &'static str,
    /// The event id (the bus de-duplicates by it).
    pub(crate) id: String,
    source: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    time: String,
    datacontenttype: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject: Option<&'a str>,
    aaarunid: &'a RunId,
    aaatenant: &'a TenantId,
    data: T,
}

impl<'a, T: Serialize> Draft<'a, T> {
    /// A new event of `kind` for a run, with a fresh id and the current time.
    pub(crate) fn new(
        kind: &'a str,
        source: &'a str,
        tenant: &'a TenantId,
        run: &'a RunId,
        call: Option<&'a CallId>,
        data: T,
    ) -> Self {
        Draft {
            specversion: "1.0",
            id: new_event_id(),
            source,
            kind,
            time: now_rfc3339(),
            datacontenttype: "application/json",
            subject: call.map(CallId::as_str),
            aaarunid: run,
            aaatenant: tenant,
            data,
        }
    }

    /// The event type.
    pub(crate) fn kind(&self) -> &str {
        self.kind
    }

    /// The bus subject this event travels on.
    pub(crate) fn bus_subject(&self) -> String {
        subject(self.aaatenant, self.aaarunid, self.kind)
    }

    /// The JSON bytes of the event: the same object `serde_json` would write for it,
    /// with the envelope written directly (its strings are ids, constants and times,
    /// which rarely need escaping) and only `data` going through serde.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(320);
        out.extend_from_slice(b"{\"specversion\":\"1.0\",\"id\":");
        write_json_str(&mut out, &self.id);
        out.extend_from_slice(b",\"source\":");
        write_json_str(&mut out, self.source);
        out.extend_from_slice(b",\"type\":");
        write_json_str(&mut out, self.kind);
        out.extend_from_slice(b",\"time\":");
        write_json_str(&mut out, &self.time);
        out.extend_from_slice(b",\"datacontenttype\":\"application/json\"");
        if let Some(subject) = self.subject {
            out.extend_from_slice(b",\"subject\":");
            write_json_str(&mut out, subject);
        }
        out.extend_from_slice(b",\"aaarunid\":");
        write_json_str(&mut out, self.aaarunid.as_str());
        out.extend_from_slice(b",\"aaatenant\":");
        write_json_str(&mut out, self.aaatenant.as_str());
        out.extend_from_slice(b",\"data\":");
        if serde_json::to_writer(&mut out, &self.data).is_err() {
            // Data types of events serialize to JSON without fail; should one not,
            // the event still parses, with no data.
            out.extend_from_slice(b"null");
        }
        out.push(b'}');
        out
    }
}

/// Writes `text` as a JSON string: as is when nothing in it needs escaping (the usual
/// case for envelope attributes), through `serde_json` otherwise.
fn write_json_str(out: &mut Vec<u8>, text: &str) {
    // No early exit, so the check vectorizes.
    let plain = text.bytes().fold(true, |plain, b| {
        plain & (b >= 0x20) & (b != b'"') & (b != b'\\') & (b < 0x7f)
    });
    if plain {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, text).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

/// A fresh event id: a random UUID, hyphenated, written without the formatting
/// machinery (every event gets one).
fn new_event_id() -> String {
    let mut buffer = uuid::Uuid::encode_buffer();
    fast_uuid()
        .hyphenated()
        .encode_lower(&mut buffer)
        .to_owned()
}

/// The current time in RFC 3339 with microseconds, UTC. The date and time down to the
/// second are formatted once per second per thread; only the microseconds are added
/// per event.
fn now_rfc3339() -> String {
    use std::cell::RefCell;
    thread_local! {
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let Ok(since) = now.duration_since(SystemTime::UNIX_EPOCH) else {
        return humantime::format_rfc3339_micros(now).to_string();
    };
    let (secs, micros) = (since.as_secs(), since.subsec_micros());
    SECOND.with_borrow_mut(|(cached, prefix)| {
        if *cached != secs {
            // `YYYY-MM-DDTHH:MM:SS` of this second.
            let whole = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            let text = humantime::format_rfc3339_seconds(whole).to_string();
            *prefix = text.trim_end_matches('Z').to_owned();
            *cached = secs;
        }
        let mut out = String::with_capacity(prefix.len() + 8);
        out.push_str(prefix);
        out.push('.');
        let digits = micros.to_string();
        for _ in digits.len()..6 {
            out.push('0');
        }
        out.push_str(&digits);
        out.push('Z');
        out
    })
}

/// A random (version 4) UUID from the thread-local generator: no system call per id.
pub(crate) fn fast_uuid() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid()
}

/// The subject for events of `kind` in a run.
pub fn subject(tenant: &TenantId, run: &RunId, kind: &str) -> String {
    let suffix = kind.strip_prefix("aaa.").unwrap_or(kind);
    let (tenant, run) = (tenant.as_str(), run.as_str());
    let mut out = String::with_capacity(6 + tenant.len() + run.len() + suffix.len());
    for part in ["aaa.", tenant, ".", run, ".", suffix] {
        out.push_str(part);
    }
    out
}

/// The filter matching every event of a run.
pub fn run_filter(tenant: &TenantId, run: &RunId) -> String {
    format!("aaa.{tenant}.{run}.>")
}

/// An event that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EventError(pub String);

/// Why a call failed, as the model and the program see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// The arguments did not fit the schema.
    BadArgs,
    /// No tool has that name.
    UnknownTool,
    /// The tool ran past its timeout.
    Timeout,
    /// The tool returned an error.
    Error,
    /// The tool panicked.
    Panic,
    /// A human denied the call.
    Denied,
    /// Nobody approved the call in time.
    ApprovalTimeout,
    /// A guardrail or budget refused the call or its result.
    Policy,
    /// The request itself could not be read.
    BadRequest,
    /// Every allowed attempt was lost (`at_least_once`).
    Abandoned,
    /// An `at_most_once` attempt was lost: it may or may not have had its effect.
    OutcomeUnknown,
}

impl FailureKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::BadArgs => "bad_args",
            FailureKind::UnknownTool => "unknown_tool",
            FailureKind::Timeout => "timeout",
            FailureKind::Error => "error",
            FailureKind::Panic => "panic",
            FailureKind::Denied => "denied",
            FailureKind::ApprovalTimeout => "approval_timeout",
            FailureKind::Policy => "policy",
            FailureKind::BadRequest => "bad_request",
            FailureKind::Abandoned => "abandoned",
            FailureKind::OutcomeUnknown => "outcome_unknown",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `data` of `aaa.tool.requested`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolRequested {
    /// The call.
    pub call_id: CallId,
    /// The tool's name as the model sent it.
    pub name: String,
    /// The arguments: an object, or a string of JSON.
    #[serde(default)]
    pub arguments: Value,
    /// Free-form metadata, handed to the tool as `ToolContext::meta`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub meta: Map<String, Value>,
}

/// `data` of `aaa.tool.completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCompleted {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub name: String,
    /// What it returned.
    pub result: Value,
    /// The attempt that produced it.
    pub attempt: u32,
}

/// `data` of `aaa.tool.failed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolFailed {
    /// The call.
    pub call_id: CallId,
    /// The tool's name as requested.
    pub name: String,
    /// Why.
    pub kind: FailureKind,
    /// What the model reads.
    pub message: String,
    /// The attempt (0 when the tool never started).
    pub attempt: u32,
}

/// `data` of `aaa.approval.requested`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApprovalRequested {
    /// The call waiting for approval.
    pub call_id: CallId,
    /// The tool.
    pub name: String,
    /// The arguments it would run with.
    pub arguments: Value,
    /// Binds a grant to this exact call and these arguments.
    pub fingerprint: String,
    /// Why approval is needed (a guardrail's reason), if not the tool's own setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `data` of `aaa.approval.granted` and `aaa.approval.denied`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApprovalDecision {
    /// The call.
    pub call_id: CallId,
    /// The fingerprint from `aaa.approval.requested`; when given, the decision applies
    /// only to a call with exactly those arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// For a denial: the reason the model reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
}

impl ApprovalDecision {
    /// A decision on `call_id`.
    pub fn new(call_id: CallId) -> Self {
        ApprovalDecision {
            call_id,
            fingerprint: None,
            reason: None,
            approver: None,
        }
    }

    /// Binds the decision to a fingerprint.
    pub fn with_fingerprint(mut self, fingerprint: impl Into<String>) -> Self {
        self.fingerprint = Some(fingerprint.into());
        self
    }

    /// Sets the reason (for a denial).
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Names the approver.
    pub fn with_approver(mut self, approver: impl Into<String>) -> Self {
        self.approver = Some(approver.into());
        self
    }
}

/// `data` of the guard's facts about attempts (`aaa.guard.attempt_started`,
/// `aaa.guard.taken_over`, `aaa.guard.lease_lost`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AttemptFact {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub name: String,
    /// The attempt (the fence).
    pub attempt: u32,
    /// The worker running it.
    pub worker: String,
    /// For a takeover: the attempt that was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_attempt: Option<u32>,
    /// For a takeover: the worker that lost it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_worker: Option<String>,
}

/// `data` of `aaa.tool.stale_result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StaleResult {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub name: String,
    /// The superseded attempt whose result was dropped.
    pub attempt: u32,
    /// The attempt that holds the call now.
    pub current_attempt: u32,
}

/// `data` of `aaa.tool.resolved`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Resolved {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub name: String,
    /// `"completed"` or `"failed"`.
    pub outcome: String,
    /// The result, when completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// What happened, when failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Who resolved it.
    pub resolved_by: String,
}

/// The fingerprint binding an approval to a call: SHA-256 over the tenant, run, call id,
/// tool name and the arguments in canonical JSON (object keys sorted).
pub fn fingerprint(
    tenant: &TenantId,
    run: &RunId,
    call: &CallId,
    name: &str,
    arguments: &Value,
) -> String {
    use sha2::{Digest, Sha256};
    let mut canonical = String::new();
    write_canonical(arguments, &mut canonical);
    let mut hasher = Sha256::new();
    for part in [
        tenant.as_str(),
        run.as_str(),
        call.as_str(),
        name,
        canonical.as_str(),
    ] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_round_trip_with_their_subject() {
        let tenant = TenantId::new("acme").unwrap();
        let run = RunId::new("run-1").unwrap();
        let call = CallId::new("call_1").unwrap();
        let event = Event::new(
            TOOL_COMPLETED,
            "test",
            &tenant,
            &run,
            Some(&call),
            json!({"x": 1}),
        );
        assert_eq!(event.bus_subject(), "aaa.acme.run-1.tool.completed");
        let back = Event::from_bytes(&event.to_bytes()).unwrap();
        assert_eq!(back, event);
        let wire: Value = serde_json::from_slice(&event.to_bytes()).unwrap();
        assert_eq!(wire["type"], "aaa.tool.completed");
        assert_eq!(wire["aaarunid"], "run-1");
        assert_eq!(wire["subject"], "call_1");
    }

    #[test]
    fn drafts_are_events_and_parse_in_one_pass() {
        let (tenant, run, call) = (
            TenantId::default(),
            RunId::new("run-1").unwrap(),
            CallId::new("c-1").unwrap(),
        );
        let data = ToolCompleted {
            call_id: call.clone(),
            name: "add".into(),
            result: json!(5),
            attempt: 1,
        };
        let draft = Draft::new(TOOL_COMPLETED, "src", &tenant, &run, Some(&call), &data);
        // The hand-written envelope is what serde writes for the same draft.
        assert_eq!(draft.to_bytes(), serde_json::to_vec(&draft).unwrap());
        let odd = Draft::new(
            "a\"b\\c\u{1}é",
            "src",
            &tenant,
            &run,
            None,
            json!({"k": [1]}),
        );
        assert_eq!(odd.to_bytes(), serde_json::to_vec(&odd).unwrap());
        let event = Event::from_bytes(&draft.to_bytes()).unwrap();
        assert_eq!(event.bus_subject(), draft.bus_subject());
        assert_eq!(
            (event.id.as_str(), event.subject.as_deref()),
            (draft.id.as_str(), Some("c-1"))
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
            (parsed.kind.as_str(), parsed.run, parsed.data),
            (TOOL_COMPLETED, run, data)
        );
        // What the one-pass parse rejects gets the two-pass errors.
        let no_data = json!({"specversion": "1.0", "id": "1", "source": "s", "type": "t", "time": "x", "aaarunid": "r", "aaatenant": "t"});
        let error =
            Parsed::<ToolCompleted>::from_bytes(no_data.to_string().as_bytes()).unwrap_err();
        assert!(error.to_string().contains("invalid data"), "{error}");
        let old = json!({"specversion": "0.3", "id": "1", "source": "s", "type": "t", "time": "x", "aaarunid": "r", "aaatenant": "t", "data": {}});
        let error = Parsed::<Value>::from_bytes(old.to_string().as_bytes()).unwrap_err();
        assert!(error.to_string().contains("specversion"), "{error}");
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

    #[test]
    fn bad_events_are_errors() {
        assert!(
            Event::from_bytes(b"not json")
                .unwrap_err()
                .0
                .starts_with("not a valid event")
        );
        let wrong = json!({"specversion": "0.3", "id": "1", "source": "s", "type": "t", "time": "x", "aaarunid": "r", "aaatenant": "t"});
        assert!(
            Event::from_bytes(wrong.to_string().as_bytes())
                .unwrap_err()
                .0
                .contains("specversion")
        );
        let odd = json!({"specversion": "1.0", "id": "1", "source": "s", "type": "t", "time": "x", "aaarunid": "r.*", "aaatenant": "t"});
        assert!(
            Event::from_bytes(odd.to_string().as_bytes())
                .unwrap_err()
                .0
                .contains("invalid run id")
        );
    }

    #[test]
    fn fingerprints_ignore_key_order_but_not_values() {
        let (t, r, c) = (
            TenantId::default(),
            RunId::new("r").unwrap(),
            CallId::new("c").unwrap(),
        );
        let a = fingerprint(&t, &r, &c, "pay", &json!({"to": "x", "cents": 5}));
        let b = fingerprint(&t, &r, &c, "pay", &json!({"cents": 5, "to": "x"}));
        let other = fingerprint(&t, &r, &c, "pay", &json!({"cents": 6, "to": "x"}));
        assert_eq!(a, b);
        assert_ne!(a, other);
        assert_eq!(a.len(), 64);
    }
}

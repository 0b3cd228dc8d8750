//! Events: CloudEvents 1.0 in JSON structured mode, the wire format of every fact.
//!
//! # Wire format
//!
//! Every message on the bus is one JSON object (UTF-8) with these attributes:
//!
//! | attribute | value |
//! |---|---|
//! | `specversion` | `"1.0"` |
//! | `id` | unique per event (a UUID; for an outcome fact, see below); the bus de-duplicates outcome facts and signals (`Engine::publish`) by it |
//! | `source` | who published it, e.g. `aaa-tools/engine/4f1c…` |
//! | `type` | one of the types below |
//! | `time` | RFC 3339, UTC (OPTIONAL on input; when present it must be RFC 3339) |
//! | `datacontenttype` | `"application/json"` (OPTIONAL on input) |
//! | `subject` | the call id, when the event is about one call (OPTIONAL on input) |
//! | `aaarunid` | extension: the run id |
//! | `aaatenant` | extension: the tenant id |
//! | `data` | the payload, a JSON object |
//!
//! What the engine writes has every attribute above. What it reads follows
//! CloudEvents 1.0: only `specversion`, `id`, `source` and `type` are REQUIRED by the
//! spec (the engine also needs its two extensions and `data`); absent OPTIONAL
//! attributes are accepted, and unknown extension attributes are ignored.
//!
//! Types and their `data`:
//!
//! | `type` | `data` |
//! |---|---|
//! | `aaa.tool.requested` | `{call_id, name, arguments, meta?, attachment?}`; `arguments` is an object, or a string of JSON as providers send it; `attachment` (`{type, data}`) is the caller's own record, which only readers of the run read ([`Attachment`]) |
//! | `aaa.tool.completed` | `{call_id, name, result, attempt}` |
//! | `aaa.tool.failed` | `{call_id, name, kind, message, attempt}`; `kind` is a [`FailureKind`] |
//! | `aaa.approval.requested` | `{call_id, name, arguments, fingerprint, reason?}` |
//! | `aaa.approval.granted` | `{call_id, fingerprint?, any_arguments?, approver?}` |
//! | `aaa.approval.denied` | `{call_id, reason?, fingerprint?, any_arguments?, approver?}` |
//! | `aaa.approval.refused` | `{call_id, decision, decision_id, reason}`: a decision that did not apply (`decision` is its type, `decision_id` its event id); nothing changed |
//! | `aaa.guard.attempt_started` | `{call_id, name, attempt, worker}` |
//! | `aaa.guard.taken_over` | `{call_id, name, attempt, worker, previous_attempt, previous_worker}` |
//! | `aaa.guard.lease_lost` | `{call_id, name, attempt, worker}` |
//! | `aaa.tool.stale_result` | `{call_id, name, attempt, current_attempt}`: a result from a superseded attempt, dropped |
//! | `aaa.tool.resolved` | `{call_id, name, outcome, result?, message?, resolved_by}`: an operator settled an `outcome_unknown` call |
//! | `aaa.tool.cancelled` | `{call_id, reason?}`: the caller asked to cancel the call; its outcome follows as `aaa.tool.failed` of kind `cancelled` (unless it had one) |
//!
//! On a bus, an event travels on the subject `aaa.<tenant>.<run>.<type without
//! "aaa.">`, e.g. `aaa.default.run-1.tool.requested`, so a run's facts can be read back
//! with the filter `aaa.<tenant>.<run>.>`. An outcome fact adds its call's id as one
//! more token (`aaa.default.run-1.tool.completed.call-7`), so one call's outcome is
//! found by its subject, without reading the run; so does a cancel
//! (`aaa.default.run-1.tool.cancelled.call-7`), which every worker hears and looks up
//! the same way (before version 0.2 outcomes travelled
//! on `aaa.<tenant>.<run>.tool.completed`: a run's facts read back with both, a waiter
//! looks only for the new subjects). Ids are restricted to `[A-Za-z0-9_-]` (see
//! [`RunId`]), so no id can add a subject token or a wildcard.
//!
//! The guard's `aaa.guard.attempt_started` and `aaa.guard.taken_over` are records of
//! what happened, sent without waiting for the bus to store them (on NATS, a plain
//! publish with no receipt; see [`Bus::emit`](crate::bus::Bus::emit)): they precede the
//! call's outcome in the log, and a bus failure at that moment loses the record, never
//! the call. Sent once, they carry no de-duplication id. Nothing the guard decides
//! reads them; the guard record in the store is the source of truth about attempts.
//! (On NATS those records live on the same stream under `aaa.$g.…`, outside every
//! run's subjects; they are not events. See the crate `aaa-tools-nats`.)
//!
//! An outcome fact's id (its de-duplication id on the bus) is
//! `outcome.<tenant>.<run>.<call id>`, the same for every attempt, so a republished
//! outcome is dropped by the bus's de-duplication; an approval request's is
//! `approval-requested.<tenant>.<run>.<call id>`, an operator's `aaa.tool.resolved`'s
//! `resolved.<tenant>.<run>.<call id>`. Ids never hold `.`, so no two calls share any
//! of them (every id, key and subject the engine derives is built by one function and
//! splits back into its parts). Versions before
//! 0.2 joined these ids with `-`, which let two calls collide (run `c-1` call `x` and
//! run `c` call `1-x`); nothing reads a message id back, so a stream written by an
//! older version reads as before. A request is published with no
//! de-duplication id: its id is fresh, so no other publish repeats it (asking again
//! for the same call publishes a new event), and the guard runs a call id once however
//! often its request arrives.
//!
//! On the embedded bus ([`MemoryBus`](crate::bus::MemoryBus)) the engine's own events
//! travel unwritten: a request, an outcome or a guard fact is handed to the
//! executor and the run's watcher in the same process as the value it was made from
//! (see [`Payload`](crate::bus::Payload)), and written to the JSON above only when
//! something reads its bytes (a replay of the run's facts, another program's
//! consumer). What that reader gets is the same event, id and time included. Events
//! that arrive as bytes (from any other publisher, and everything on NATS) are parsed
//! and checked as always.
//!
//! A program in another language requests a call by publishing a `aaa.tool.requested`
//! event on `aaa.<tenant>.<run>.tool.requested` and reads the outcome from
//! `aaa.<tenant>.<run>.tool.completed.<call>` or `.tool.failed.<call>`; it cancels one
//! by publishing `aaa.tool.cancelled` on `aaa.<tenant>.<run>.tool.cancelled.<call>`.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::{CallId, RunId, TenantId};

mod attachment;
mod codec;
pub(crate) mod kinds;

pub use attachment::Attachment;
pub(crate) use codec::{Draft, DraftId, Parsed};
use codec::{new_event_id, now_rfc3339};
pub use kinds::*;

/// A CloudEvents 1.0 event (see the [module docs](self) for the wire format). Made
/// with [`Event::new`] or read with [`Event::from_bytes`]; its fields are public to read
/// and change, and it may gain attributes (so no struct literal outside this crate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// When it was published, RFC 3339. OPTIONAL in CloudEvents: an event without it is
    /// accepted; one with a `time` that is not RFC 3339 is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// `"application/json"` (assumed when absent).
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
            time: Some(now_rfc3339()),
            datacontenttype: json_content_type(),
            subject: call.map(|c| c.as_str().to_owned()),
            aaarunid: run.clone(),
            aaatenant: tenant.clone(),
            data,
        }
    }

    /// The bus subject this event travels on.
    pub fn bus_subject(&self) -> String {
        let call = self.subject.as_deref().and_then(|c| CallId::new(c).ok());
        crate::names::event_subject(&self.aaatenant, &self.aaarunid, &self.kind, call.as_ref())
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
        check_time(event.time.as_deref())?;
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

/// Checks an event's `time`, when it has one: RFC 3339, as CloudEvents requires. The
/// `time` crate parses it (offsets and fractions included); async-nats uses it too,
/// so a NATS deployment builds it once.
pub(crate) fn check_time(time: Option<&str>) -> Result<(), EventError> {
    use time::format_description::well_known::Rfc3339;
    match time {
        Some(text) if time::OffsetDateTime::parse(text, &Rfc3339).is_err() => {
            let shown: String = text.chars().take(40).collect();
            Err(EventError(format!(
                "`time` {shown:?} is not an RFC 3339 time (e.g. 2026-12-06T10:20:30Z)"
            )))
        }
        _ => Ok(()),
    }
}

/// A random (version 4) UUID from the thread-local generator: no system call per id.
pub(crate) fn fast_uuid() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid()
}

/// The subject for events of `kind` in a run.
pub fn subject(tenant: &TenantId, run: &RunId, kind: &str) -> String {
    crate::names::subject(tenant, run, kind)
}

/// The filter matching every event of a run.
pub fn run_filter(tenant: &TenantId, run: &RunId) -> String {
    crate::names::run_filter(tenant, run)
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
    /// The caller cancelled the call ([`RunHandle::cancel`](crate::RunHandle::cancel)):
    /// it did not start, or it was stopped while it ran. Never retried.
    Cancelled,
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
            FailureKind::Cancelled => "cancelled",
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
    pub name: Arc<str>,
    /// The arguments: an object, or a string of JSON. Shared with the
    /// [`ToolCall`](crate::ToolCall) that made the request.
    #[serde(default)]
    pub arguments: Arc<Value>,
    /// Free-form metadata, handed to the tool as `ToolContext::meta`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub meta: Map<String, Value>,
    /// The caller's own record, stored with the request and read by nobody else (an
    /// agent loop's model turn): see [`Attachment`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<Attachment>,
}

/// `data` of `aaa.tool.completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCompleted {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub name: Arc<str>,
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
    pub name: Arc<str>,
    /// Why.
    pub kind: FailureKind,
    /// What the model reads.
    pub message: String,
    /// The attempt (0 when the tool never started).
    pub attempt: u32,
}

/// `data` of `aaa.tool.cancelled`: the caller asked to cancel the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCancelled {
    /// The call.
    pub call_id: CallId,
    /// Why, as the caller said it (it reaches the model in the failure's message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `data` of `aaa.approval.requested`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApprovalRequested {
    /// The call waiting for approval.
    pub call_id: CallId,
    /// The tool.
    pub name: Arc<str>,
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
    /// Set when the decision names no fingerprint on purpose: it applies to the pending
    /// call whatever its arguments. Without it (and without a fingerprint) a decision
    /// is refused. Never pre-approves a request not yet seen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub any_arguments: bool,
}

/// `data` of `aaa.approval.refused`: a decision that did not apply. Nothing changed;
/// a pending call stays pending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApprovalRefused {
    /// The call the decision named.
    pub call_id: CallId,
    /// The decision's type (`aaa.approval.granted` or `aaa.approval.denied`).
    pub decision: String,
    /// The decision's event id.
    pub decision_id: String,
    /// Why it did not apply.
    pub reason: String,
}

impl ApprovalDecision {
    /// A decision on `call_id`.
    pub fn new(call_id: CallId) -> Self {
        ApprovalDecision {
            call_id,
            fingerprint: None,
            reason: None,
            approver: None,
            any_arguments: false,
        }
    }

    /// A decision bound to the call and the arguments of `request`, by its fingerprint:
    /// the way to decide on what a human saw.
    pub fn for_request(request: &ApprovalRequested) -> Self {
        ApprovalDecision::new(request.call_id.clone()).with_fingerprint(request.fingerprint.clone())
    }

    /// Applies the decision to the pending call whatever its arguments (no fingerprint):
    /// recorded in the decision fact as `any_arguments: true`.
    pub fn any_arguments(mut self) -> Self {
        self.any_arguments = true;
        self
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
    pub name: Arc<str>,
    /// The attempt (the fence).
    pub attempt: u32,
    /// The worker running it.
    pub worker: Arc<str>,
    /// For a takeover: the attempt that was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_attempt: Option<u32>,
    /// For a takeover: the worker that lost it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_worker: Option<Arc<str>>,
}

/// `data` of `aaa.tool.stale_result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StaleResult {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub name: Arc<str>,
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
    pub name: Arc<str>,
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
    let canonical = canonical_json(arguments);
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

/// `value` in canonical JSON: object keys sorted, no spaces; what
/// [`fingerprint`] hashes. Two values that differ only in the order of their keys
/// give the same text.
///
/// ```
/// use aaa_tools::event::canonical_json;
/// use serde_json::json;
///
/// let text = canonical_json(&json!({"b": [1, {"d": 2, "c": 3}], "a": "x"}));
/// assert_eq!(text, r#"{"a":"x","b":[1,{"c":3,"d":2}]}"#);
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
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
        assert_eq!(event.bus_subject(), "aaa.acme.run-1.tool.completed.call_1");
        let back = Event::from_bytes(&event.to_bytes()).unwrap();
        assert_eq!(back, event);
        let wire: Value = serde_json::from_slice(&event.to_bytes()).unwrap();
        assert_eq!(wire["type"], "aaa.tool.completed");
        assert_eq!(wire["aaarunid"], "run-1");
        assert_eq!(wire["subject"], "call_1");
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

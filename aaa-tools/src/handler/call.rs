//! One call being handled: what it is, how it ended, publishing its outcome and facts,
//! settling the message that carried it. (Running it: [`attempt`](super::attempt).)

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use aaa_guard::RecordedOutcome;
use serde_json::{Map, Value};

use super::RetryPolicy;
use super::bounds;
use super::core::Core;
use super::policy::PolicyCall;
use crate::bus::{BusError, Message};
use crate::event::{
    Draft, DraftId, FailureKind, TOOL_COMPLETED, TOOL_FAILED, ToolCompleted, ToolFailed,
};
use crate::ids::{CallId, RunId, TenantId};

/// A call being handled.
pub(super) struct Call {
    pub(super) tenant: TenantId,
    pub(super) run: RunId,
    pub(super) call_id: CallId,
    pub(super) name: Arc<str>,
    pub(super) meta: Map<String, Value>,
}

/// How a call ended.
pub(super) enum Outcome {
    Completed(ToolCompleted),
    Failed(ToolFailed),
}

/// What to do with the message that carried a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Disposition {
    /// The outcome is durable: acknowledge.
    Ack,
    /// Try again later: the bus delivers it again.
    Nak,
    /// This worker was superseded: touch nothing (an ack would settle the message its
    /// successor holds).
    Leave,
    /// The message can never be handled (unreadable): never deliver it again.
    Term,
}

impl Call {
    pub(super) fn policy(&self, arguments: &Value) -> PolicyCall {
        PolicyCall {
            tenant: self.tenant.clone(),
            run: self.run.clone(),
            call_id: self.call_id.clone(),
            tool: self.name.clone(),
            arguments: arguments.clone(),
        }
    }

    pub(super) fn failed(
        &self,
        kind: FailureKind,
        message: impl Into<String>,
        attempt: u32,
    ) -> Outcome {
        Outcome::Failed(self.failure(kind, message, attempt))
    }

    /// The data of a failure of this call; the message is cut to
    /// [`MESSAGE_ECHO`](bounds::MESSAGE_ECHO) bytes.
    fn failure(&self, kind: FailureKind, message: impl Into<String>, attempt: u32) -> ToolFailed {
        let message = message.into();
        let message = match bounds::cut(&message, bounds::MESSAGE_ECHO) {
            Cow::Borrowed(_) => message,
            Cow::Owned(short) => short,
        };
        ToolFailed {
            call_id: self.call_id.clone(),
            name: self.name.clone(),
            kind,
            message,
            attempt,
        }
    }

    /// The outcome fact of this call, of type `kind`: named by [`outcome_id`], so a
    /// republished outcome is de-duplicated.
    pub(super) fn outcome_draft<T: serde::Serialize>(
        &self,
        core: &Core,
        kind: impl Into<Cow<'static, str>>,
        data: T,
    ) -> Draft<T> {
        let id = DraftId::outcome(&self.tenant, &self.run, &self.call_id);
        self.draft(core, id, kind, data)
    }

    /// An event of `kind` about this call, to send, with the id given.
    pub(super) fn draft<T: serde::Serialize>(
        &self,
        core: &Core,
        id: DraftId,
        kind: impl Into<Cow<'static, str>>,
        data: T,
    ) -> Draft<T> {
        Draft::new(
            id,
            kind,
            core.engine.shared_source(),
            &self.tenant,
            &self.run,
            Some(&self.call_id),
            data,
        )
    }
}

impl Outcome {
    pub(super) fn label(&self) -> &'static str {
        match self {
            Outcome::Completed(_) => "completed",
            Outcome::Failed(f) => f.kind.as_str(),
        }
    }

    /// The outcome as the guard records it: its event type and its data written as
    /// JSON once, to be stored and published as they are.
    pub(super) fn recorded(&self) -> RecordedOutcome {
        let written = match self {
            Outcome::Completed(data) => RecordedOutcome::new(TOOL_COMPLETED, data),
            Outcome::Failed(data) => RecordedOutcome::new(TOOL_FAILED, data),
        };
        // Ids, strings, numbers and a JSON value always serialize.
        written.expect("an outcome serializes to JSON")
    }
}

/// A fact ready to publish: what the bus needs of it, apart from the event it was
/// drafted as. A publishing future holds this across its awaits instead of the draft
/// (the handler's futures nest several publishes, and every byte of each is moved
/// with the call). The event travels unwritten ([`Draft::into_payload`]): the embedded
/// bus hands it to the run's watcher as it is, a server-backed bus writes it once (a
/// retry sends the same bytes).
struct Prepared {
    subject: String,
    id: String,
    kind: Cow<'static, str>,
    payload: crate::bus::Payload,
}

impl Prepared {
    fn of<T: serde::Serialize + Send + Sync + 'static>(event: Draft<T>) -> Prepared {
        Prepared {
            subject: event.bus_subject(),
            id: event.id.text(),
            kind: event.kind(),
            payload: event.into_payload(),
        }
    }

    /// Publishes the fact with `retry`, de-duplicated by its id.
    #[allow(
        clippy::manual_async_fn,
        reason = "an `async fn` would hold `self` twice: as its argument and as a local"
    )]
    fn publish<'a>(
        self,
        core: &'a Core,
        retry: &'a RetryPolicy,
    ) -> impl Future<Output = bool> + Send + use<'a> {
        async move { self.try_publish(core, retry).await.is_ok() }
    }

    /// As [`publish`](Self::publish), with the error (logged once here).
    async fn try_publish(&self, core: &Core, retry: &RetryPolicy) -> Result<(), BusError> {
        let bus = core.engine.bus();
        let published = retry
            .run(|| bus.publish(&self.subject, self.payload.clone(), Some(&self.id)))
            .await;
        if let Err(error) = &published {
            let kind = &self.kind;
            tracing::error!(%error, %kind, "could not publish a fact");
        }
        published
    }
}

/// What an outcome is replaced by when the bus refuses it as too large: the call's
/// ids and name (shared), made into a short failure fact only when needed. Kept only
/// where the bus has a size limit ([`Bus::max_payload`](crate::bus::Bus::max_payload)):
/// the embedded bus has none, and its calls skip the four reference counts (and the
/// larger future) this costs.
struct TooLargeFallback {
    /// Boxed: every outcome's publishing future holds this, nearly always `None`.
    call: Option<Box<Call>>,
}

// One pointer, however large a `Call` grows.
const _: () = assert!(std::mem::size_of::<TooLargeFallback>() == std::mem::size_of::<usize>());

impl TooLargeFallback {
    fn of(core: &Core, call: &Call) -> TooLargeFallback {
        let limited = core.engine.bus().max_payload().is_some();
        TooLargeFallback {
            call: limited.then(|| {
                Box::new(Call {
                    tenant: call.tenant.clone(),
                    run: call.run.clone(),
                    call_id: call.call_id.clone(),
                    name: call.name.clone(),
                    meta: Map::new(),
                })
            }),
        }
    }

    /// Publishes `prepared`; when the bus refuses it for its size, publishes a short
    /// failure under the same outcome id instead.
    async fn publish(self, prepared: Prepared, core: &Core, retry: &RetryPolicy) -> bool {
        match (prepared.try_publish(core, retry).await, self.call) {
            (Ok(()), _) => true,
            (Err(BusError::TooLarge { size, limit }), Some(call)) => {
                let text = format!(
                    "the outcome of this call ({size} bytes) does not fit in one message on \
                     this bus (limit {limit} bytes), so it is not kept; ask for less"
                );
                let data = call.failure(FailureKind::BadRequest, text, 0);
                let short = Prepared::of(call.outcome_draft(core, TOOL_FAILED, data));
                short.try_publish(core, retry).await.is_ok()
            }
            (Err(_), _) => false,
        }
    }
}

/// The message id of a call's outcome fact: one per call, so a republished outcome
/// within the de-duplication window is dropped.
pub(super) fn outcome_id(call: &Call) -> String {
    DraftId::outcome(&call.tenant, &call.run, &call.call_id).text()
}

/// Publishes an outcome fact of type `kind` with `data`, under the call's outcome id.
pub(super) fn publish_outcome_parts<'a, K, T>(
    core: &'a Core,
    retry: &'a RetryPolicy,
    call: &Call,
    kind: K,
    data: T,
) -> impl Future<Output = bool> + Send + use<'a, K, T>
where
    K: Into<Cow<'static, str>>,
    T: serde::Serialize + Send + Sync + 'static,
{
    let prepared = Prepared::of(call.outcome_draft(core, kind, data));
    TooLargeFallback::of(core, call).publish(prepared, core, retry)
}

/// Publishes the outcome of `call` with its typed data (what a watcher in this process
/// reads without parsing).
pub(super) fn publish_outcome<'a>(
    core: &'a Core,
    retry: &'a RetryPolicy,
    call: &Call,
    outcome: Outcome,
) -> impl Future<Output = bool> + Send + use<'a> {
    let prepared = match outcome {
        Outcome::Completed(data) => Prepared::of(call.outcome_draft(core, TOOL_COMPLETED, data)),
        Outcome::Failed(data) => Prepared::of(call.outcome_draft(core, TOOL_FAILED, data)),
    };
    TooLargeFallback::of(core, call).publish(prepared, core, retry)
}

/// Settles a message; returns whether the bus took the settlement.
pub(super) async fn settle(message: &Message, disposition: Disposition) -> bool {
    let result = match disposition {
        Disposition::Ack => message.ack().await,
        Disposition::Nak => message.nak(Duration::from_secs(1)).await,
        Disposition::Leave => Ok(()),
        Disposition::Term => message.term().await,
    };
    if let Err(error) = &result {
        tracing::warn!(%error, seq = message.seq, "could not settle a message; it will be delivered again");
    }
    result.is_ok()
}

/// `Ack` when `published`, else `Nak`.
pub(super) fn ack_if(published: bool) -> Disposition {
    if published {
        Disposition::Ack
    } else {
        Disposition::Nak
    }
}

/// Emits a guard fact for the record ([`Bus::emit`](crate::bus::Bus::emit)): nobody
/// waits for it to be stored, it goes out ahead of everything this worker publishes
/// later (so it precedes the call's outcome), and a bus that cannot take it loses it
/// with a warning here at most. The guard's decisions never read these facts. Sent
/// once and never again, they carry no de-duplication id (which would cost the bus an
/// entry in its de-duplication window per fact for nothing).
pub(super) async fn emit_fact(
    core: &Core,
    call: &Call,
    kind: &'static str,
    data: impl serde::Serialize + Send + Sync + 'static,
) {
    let event = call.draft(core, DraftId::fresh(), kind, data);
    let subject = event.bus_subject();
    if let Err(error) = core
        .engine
        .bus()
        .emit(&subject, event.into_payload(), None)
        .await
    {
        tracing::warn!(%error, kind, "could not send a fact");
    }
}

/// Publishes a guard fact (best effort: the guard's decisions do not wait on it).
pub(super) fn publish_fact<'a, D: serde::Serialize + Send + Sync + 'static>(
    core: &'a Core,
    call: &Call,
    kind: &'static str,
    data: D,
) -> impl Future<Output = ()> + Send + use<'a, D> {
    let prepared = Prepared::of(call.draft(core, DraftId::fresh(), kind, data));
    async move {
        prepared.publish(core, &RetryPolicy::default()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outcome_data_is_what_serde_writes_for_the_fact() {
        let call_id = CallId::new("c-1").unwrap();
        let completed = ToolCompleted {
            call_id: call_id.clone(),
            name: "add".into(),
            result: json!({"sum": 5}),
            attempt: 2,
        };
        let failed = ToolFailed {
            call_id,
            name: "add".into(),
            kind: FailureKind::OutcomeUnknown,
            message: "lost".into(),
            attempt: 1,
        };
        let expected = serde_json::to_string(&completed).unwrap();
        let recorded = Outcome::Completed(completed).recorded();
        assert_eq!(
            (&*recorded.kind, recorded.data.get()),
            (TOOL_COMPLETED, expected.as_str())
        );
        let expected = serde_json::to_string(&failed).unwrap();
        let recorded = Outcome::Failed(failed).recorded();
        assert_eq!(
            (&*recorded.kind, recorded.data.get()),
            (TOOL_FAILED, expected.as_str())
        );
    }
}

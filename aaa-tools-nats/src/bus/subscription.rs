//! How a worker takes messages from a durable pull consumer: [`NatsSubscription`],
//! and the [`Acker`] that settles each delivery.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::message::Acker as JsAcker;
use async_nats::jetstream::{self, AckKind};
use futures::StreamExt;

use aaa_tools::bus::{Acker, BusError, BusFuture, Message, Subscription};

use super::unavailable;

/// A worker's handle on a durable pull consumer over one inbox subscription held for
/// its life (no subscription churn on the server). It pulls only as many messages as
/// the caller has room for, so nothing waits in a buffer while its ack wait runs out.
pub(super) struct NatsSubscription {
    js: jetstream::Context,
    inbox: async_nats::Subject,
    replies: async_nats::Subscriber,
    /// `$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>`.
    next_subject: String,
    expires: Duration,
    /// The pull in flight, if one is: when it expires on the client's clock, and how
    /// many messages it may still bring.
    outstanding: Option<(tokio::time::Instant, usize)>,
}

/// The most messages one pull asks for.
const MAX_PULL: usize = 256;

impl NatsSubscription {
    pub(super) async fn open(
        js: jetstream::Context,
        stream: &str,
        durable: &str,
        expires: Duration,
    ) -> Result<Self, BusError> {
        let client = js.client();
        let inbox = async_nats::Subject::from(client.new_inbox());
        let replies = client.subscribe(inbox.clone()).await.map_err(unavailable)?;
        Ok(NatsSubscription {
            js,
            inbox,
            replies,
            next_subject: format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"),
            expires,
            outstanding: None,
        })
    }

    async fn pull(&mut self, batch: usize) -> Result<(), BusError> {
        let batch = batch.clamp(1, MAX_PULL);
        let body = format!(
            "{{\"batch\":{batch},\"expires\":{}}}",
            self.expires.as_nanos()
        );
        self.js
            .client()
            .publish_with_reply(self.next_subject.clone(), self.inbox.clone(), body.into())
            .await
            .map_err(unavailable)?;
        // The server answers within `expires` (messages, or a timeout status); a pull
        // lost with a connection is given up after a grace period.
        let deadline = tokio::time::Instant::now() + self.expires + Duration::from_secs(2);
        self.outstanding = Some((deadline, batch));
        Ok(())
    }

    /// Waits for the next message, pulling up to `room` when no pull is in flight.
    async fn receive(&mut self, room: usize) -> Result<Message, BusError> {
        loop {
            let deadline = match self.outstanding {
                Some((deadline, _)) if deadline > tokio::time::Instant::now() => deadline,
                _ => {
                    self.pull(room).await?;
                    self.outstanding
                        .map_or_else(tokio::time::Instant::now, |(deadline, _)| deadline)
                }
            };
            let reply = match tokio::time::timeout_at(deadline, self.replies.next()).await {
                Ok(Some(reply)) => reply,
                Ok(None) => return Err(BusError::Closed),
                Err(_) => {
                    self.outstanding = None;
                    continue;
                }
            };
            match reply.status {
                None | Some(async_nats::StatusCode::OK) => {
                    self.outstanding = match self.outstanding {
                        Some((deadline, left)) if left > 1 => Some((deadline, left - 1)),
                        _ => None,
                    };
                    return to_message(jetstream::Message {
                        message: reply,
                        context: self.js.clone(),
                    });
                }
                Some(async_nats::StatusCode::IDLE_HEARTBEAT) => {}
                // Expired with nothing (more) to deliver: pull again.
                Some(async_nats::StatusCode::TIMEOUT | async_nats::StatusCode::NOT_FOUND) => {
                    self.outstanding = None;
                }
                // Ended by the server (leadership change, consumer deleted, no
                // JetStream): the caller backs off and asks again.
                Some(status) => {
                    self.outstanding = None;
                    let why = reply.description.as_deref().unwrap_or("");
                    return Err(BusError::Unavailable(format!(
                        "the pull ended with status {status} {why}"
                    )));
                }
            }
        }
    }
}

impl Subscription for NatsSubscription {
    fn next(&mut self) -> BusFuture<'_, Message> {
        BusFuture::new(self.receive(1))
    }

    fn next_with_room(&mut self, room: usize) -> BusFuture<'_, Message> {
        BusFuture::new(self.receive(room))
    }
}

fn to_message(message: jetstream::Message) -> Result<Message, BusError> {
    let (seq, delivered) = {
        let info = message.info().map_err(unavailable)?;
        (info.stream_sequence, info.delivered)
    };
    let (message, acker) = message.split();
    Ok(Message::new(
        message.subject.to_string(),
        message.payload.into(),
        seq,
        u32::try_from(delivered).unwrap_or(u32::MAX),
        Arc::new(NatsAcker(acker)),
    ))
}

/// Settles one delivery through its reply subject (JetStream matches it by sequence).
struct NatsAcker(JsAcker);

impl NatsAcker {
    fn send(&self, kind: AckKind) -> BusFuture<'_, ()> {
        BusFuture::new(async move { self.0.ack_with(kind).await.map_err(unavailable) })
    }

    /// Sends `kind` and waits for the server to confirm it: a message ended for good
    /// is known ended.
    fn confirm(&self, kind: AckKind) -> BusFuture<'_, ()> {
        BusFuture::new(async move { self.0.double_ack_with(kind).await.map_err(unavailable) })
    }
}

impl Acker for NatsAcker {
    fn ack(&self, _seq: u64) -> BusFuture<'_, ()> {
        // Not confirmed: a lost ack only brings the message back, and the guard then
        // finds the call finished and acks again.
        self.send(AckKind::Ack)
    }
    fn nak(&self, _seq: u64, delay: Duration) -> BusFuture<'_, ()> {
        self.send(AckKind::Nak(Some(delay)))
    }
    fn in_progress(&self, _seq: u64) -> BusFuture<'_, ()> {
        self.send(AckKind::Progress)
    }
    fn term(&self, _seq: u64) -> BusFuture<'_, ()> {
        self.confirm(AckKind::Term)
    }
}

//! How a worker takes messages from a durable pull consumer: [`NatsSubscription`],
//! and the [`Acker`] that settles each delivery.

use std::collections::{HashMap, VecDeque};
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
    counts: Counts,
}

/// The most messages one pull asks for.
const MAX_PULL: usize = 256;

/// The delivery counts of the messages a subscription handed out lately, so that a
/// message it delivered before comes back counted higher than it went, whatever the
/// server's count says.
///
/// The server counts a delivery when it sends one, and takes the count back when it
/// judges that one failed (nats-server's consumer lowers it in `didNotDeliver`, and
/// when a redelivery finds no pull waiting for it). Such a judgment about a delivery
/// that did arrive would leave a message coming back with the count it had, which is
/// most likely what the contract case
/// `an_unsettled_message_comes_back_after_the_ack_wait` saw in about one CI run of
/// sixteen: its redelivery counted 1 again. What a subscription received itself it
/// knows for sure, so that is the floor of the count it reports. Its memory is the last [`Counts::REMEMBERED`]
/// messages; a message older than that takes the server's count as it is.
#[derive(Default)]
struct Counts {
    by_seq: HashMap<u64, u32>,
    /// The sequence numbers of `by_seq`, oldest first.
    order: VecDeque<u64>,
}

impl Counts {
    /// How many deliveries it remembers: four of the largest pulls.
    const REMEMBERED: usize = 4 * MAX_PULL;

    /// The count of a delivery of `seq` that the server counted `server`.
    fn count(&mut self, seq: u64, server: u32) -> u32 {
        let count = match self.by_seq.get(&seq) {
            Some(&before) => server.max(before.saturating_add(1)),
            None => server,
        };
        if self.by_seq.insert(seq, count).is_none() {
            self.order.push_back(seq);
            if self.order.len() > Self::REMEMBERED
                && let Some(oldest) = self.order.pop_front()
            {
                self.by_seq.remove(&oldest);
            }
        }
        count
    }
}

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
            counts: Counts::default(),
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
                    let message = jetstream::Message {
                        message: reply,
                        context: self.js.clone(),
                    };
                    return to_message(message, &mut self.counts);
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

fn to_message(message: jetstream::Message, counts: &mut Counts) -> Result<Message, BusError> {
    let (seq, delivered) = {
        let info = message.info().map_err(unavailable)?;
        (info.stream_sequence, info.delivered)
    };
    let delivered = counts.count(seq, u32::try_from(delivered).unwrap_or(u32::MAX));
    let (message, acker) = message.split();
    Ok(Message::new(
        message.subject.to_string(),
        message.payload.into(),
        seq,
        delivered,
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

#[cfg(test)]
mod tests {
    use super::Counts;

    #[test]
    fn a_message_delivered_before_comes_back_counted_higher() {
        let mut counts = Counts::default();
        assert_eq!(
            counts.count(7, 1),
            1,
            "a first delivery: the server's count"
        );
        assert_eq!(
            counts.count(7, 1),
            2,
            "counted 1 again: one more than it went"
        );
        assert_eq!(counts.count(7, 5), 5, "a higher count of the server stands");
        assert_eq!(counts.count(7, 2), 6);
        assert_eq!(counts.count(8, 3), 3, "another message: its own count");
        assert_eq!(counts.count(u64::MAX, u32::MAX), u32::MAX);
        assert_eq!(counts.count(u64::MAX, 1), u32::MAX, "no overflow");
    }

    #[test]
    fn it_remembers_the_last_deliveries_only() {
        let mut counts = Counts::default();
        let remembered = u64::try_from(Counts::REMEMBERED).unwrap();
        for seq in 0..=remembered {
            assert_eq!(counts.count(seq, 1), 1);
        }
        assert_eq!(counts.by_seq.len(), Counts::REMEMBERED);
        assert_eq!(counts.count(0, 1), 1, "forgotten: the server's count");
        assert_eq!(counts.count(remembered, 1), 2, "remembered");
        // A repeat does not take another place.
        let kept = Counts::REMEMBERED;
        assert_eq!((counts.by_seq.len(), counts.order.len()), (kept, kept));
    }
}

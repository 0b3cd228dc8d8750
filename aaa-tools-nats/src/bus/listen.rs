//! How a [`NatsBus`] hears of outcomes: the stream republishes each outcome fact
//! once it has stored it, and [`Bus::listen`](aaa_tools::bus::Bus::listen) subscribes to the republished subjects
//! (see the [crate docs](crate) for why).

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::stream;
use futures::StreamExt;
use futures::stream::BoxStream;

use aaa_tools::bus::{BusError, Stored};

use super::{NatsBus, unavailable};
use crate::check_filter;

/// The first token of the subjects the stream republishes outcome facts on, once they
/// are stored: `aaa-stored.<tenant>.<run>.tool.<how>.<call>`.
const STORED: &str = "aaa-stored";

/// The stream's republish rule: every outcome fact (and every cancel, which shares
/// the `tool.<how>.<call>` layout), once stored, goes out again on
/// [`STORED`]`.<the rest of its subject>`, with the stream's sequence number in its
/// headers. A [`NatsBus`] listens there: a listener hears of an outcome only
/// once the stream holds it (a publish the stream refuses, a repeat it drops as a
/// duplicate, is never republished), in the stream's order.
pub(crate) fn outcome_republish() -> stream::Republish {
    stream::Republish {
        source: "aaa.*.*.tool.*.*".into(),
        destination: format!(
            "{STORED}.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}.tool.{{{{wildcard(3)}}}}.{{{{wildcard(4)}}}}"
        ),
        headers_only: false,
    }
}

/// The subject `listen` subscribes to for `filter`: the republished outcome subjects
/// it stands for; an error for a filter outside the outcome facts.
fn republished(filter: &str) -> Result<String, BusError> {
    check_filter(filter)?;
    let tokens: Vec<&str> = filter.split('.').collect();
    match tokens.as_slice() {
        ["aaa", _, _, "tool", _, _] => Ok(format!("{STORED}{}", &filter[3..])),
        _ => Err(aaa_tools::bus::invalid_filter(
            filter,
            "the JetStream bus listens to the facts of one call only, outcomes and \
             cancels (`aaa.<tenant>.<run>.tool.<how>.<call>`, wildcards allowed)"
                .into(),
        )),
    }
}

/// A republished message as the stream stored it: its original subject and sequence
/// number come in the republish headers.
fn from_republished(message: async_nats::Message) -> Result<Stored, BusError> {
    let headers = message.headers.as_ref();
    let header = |name| headers.and_then(|h| h.get(name)).map(|v| v.as_str());
    let subject = header(async_nats::header::NATS_SUBJECT)
        .ok_or_else(|| unavailable("a republished message without Nats-Subject"))?;
    let seq = header(async_nats::header::NATS_SEQUENCE)
        .and_then(|seq| seq.parse().ok())
        .ok_or_else(|| unavailable("a republished message without Nats-Sequence"))?;
    Ok(Stored {
        seq,
        subject: Arc::from(subject),
        payload: message.payload.into(),
    })
}

/// How often a listener looks at the connection's count of connects, to tell its
/// reader that messages may have been missed while it was down.
const RECONNECT_CHECK: Duration = Duration::from_millis(250);

impl NatsBus {
    /// [`Bus::listen`](aaa_tools::bus::Bus::listen): one core subscription per filter, on the subjects the stream
    /// republishes outcomes on. A reconnect (the connection's count of connects moves)
    /// comes out as an error item once the subscriptions are back on the server, and
    /// so does each election of a new stream leader (the server's advisory).
    pub(super) async fn listen_republished(
        &self,
        filters: &[String],
    ) -> Result<BoxStream<'static, Result<Stored, BusError>>, BusError> {
        let subjects = filters
            .iter()
            .map(|f| republished(f))
            .collect::<Result<Vec<_>, _>>()?;
        if subjects.is_empty() {
            return Err(aaa_tools::bus::no_filters());
        }
        let client = self.js.client();
        let mut subscribers = Vec::with_capacity(subjects.len());
        for subject in subjects {
            subscribers.push(client.subscribe(subject).await.map_err(unavailable)?);
        }
        // Once the server answers a ping sent after the subscriptions, it holds them:
        // whatever it stores from now on reaches the listener.
        client.flush().await.map_err(unavailable)?;
        // A new leader of the stream may take over from one that stored an outcome
        // and died before republishing it: each election is a reason to look up.
        let elections = client
            .subscribe(format!(
                "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.{}",
                self.options.stream
            ))
            .await
            .map_err(unavailable)?
            .map(|_| {
                Err(BusError::Unavailable(
                    "the stream has a new leader; outcomes may have been missed".into(),
                ))
            });
        let messages = futures::stream::select(
            futures::stream::select_all(subscribers).map(from_republished),
            elections,
        );
        let statistics = client.statistics();
        let connects = statistics
            .connects
            .load(std::sync::atomic::Ordering::Relaxed);
        let reconnects = futures::stream::unfold(
            (client, statistics, connects),
            |(client, statistics, seen)| async move {
                let mut tick = tokio::time::interval(RECONNECT_CHECK);
                loop {
                    tick.tick().await;
                    let now = statistics
                        .connects
                        .load(std::sync::atomic::Ordering::Relaxed);
                    if now != seen {
                        // The subscriptions are sent again on reconnect; after this
                        // answer the server holds them.
                        let _ = client.flush().await;
                        let gap = Err(BusError::Unavailable(
                            "the connection to the server was re-made; messages may have been missed".into(),
                        ));
                        return Some((gap, (client, statistics, now)));
                    }
                }
            },
        );
        // The subscriptions end only when the client closes (or drains), and the
        // listener with them: the end of the messages is marked (`None`) so that the
        // reconnect watch, which would tick on forever, ends there too.
        let ended = futures::stream::once(futures::future::ready(None));
        let listened =
            futures::stream::select(messages.map(Some).chain(ended), reconnects.map(Some))
                .take_while(|item| {
                    futures::future::ready(
                        matches!(item, Some(i) if !matches!(i, Err(BusError::Closed))),
                    )
                })
                .filter_map(futures::future::ready);
        Ok(listened.boxed())
    }
}

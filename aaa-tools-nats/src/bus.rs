//! [`NatsBus`]: the [`Bus`] on a JetStream stream with durable pull consumers.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use async_nats::jetstream::message::Acker as JsAcker;
use async_nats::jetstream::stream::{self, RetentionPolicy, StorageType};
use async_nats::jetstream::{self, AckKind};
use futures::StreamExt;
use futures::stream::BoxStream;

use aaa_tools::bus::{
    Acker, Bus, BusError, BusFuture, Confirmation, ConsumerSpec, Message, Payload, Stored,
    Subscription,
};

use crate::{NatsError, NatsOptions, Storage, check_filter, check_subject};

/// The JetStream [`Bus`] (see the [crate docs](crate) for the layout and guarantees).
/// Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct NatsBus {
    js: jetstream::Context,
    stream: stream::Stream,
    options: Arc<NatsOptions>,
    /// Whether the server takes several filters per consumer (2.10 and later).
    multi_filter: bool,
    /// The server's `max_payload`, as it announced it when the connection was made.
    max_payload: usize,
}

impl std::fmt::Debug for NatsBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsBus")
            .field("stream", &self.options.stream)
            .finish()
    }
}

pub(crate) fn storage_type(storage: Storage) -> StorageType {
    match storage {
        Storage::File => StorageType::File,
        Storage::Memory => StorageType::Memory,
    }
}

/// Checks a subject to publish on and a payload's size against the server's
/// `max_payload`, and sets the dedup header for `msg_id`. A message too large is
/// refused here, as [`BusError::TooLarge`], never sent to be refused (and retried).
fn publish_headers(
    subject: &str,
    msg_id: Option<&str>,
    payload: usize,
    max_payload: usize,
) -> Result<async_nats::HeaderMap, BusError> {
    check_subject(subject)?;
    let mut headers = async_nats::HeaderMap::new();
    if let Some(id) = msg_id {
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
    }
    // The server counts the header block against `max_payload`: `NATS/1.0\r\n`, each
    // `Name: value\r\n`, and a closing `\r\n`.
    let header_bytes = msg_id.map_or(0, |id| {
        "NATS/1.0\r\n\r\n".len() + "Nats-Msg-Id: \r\n".len() + id.len()
    });
    let size = payload + header_bytes;
    if size > max_payload {
        return Err(BusError::TooLarge {
            size,
            limit: max_payload,
        });
    }
    Ok(headers)
}

fn unavailable(error: impl std::fmt::Display) -> BusError {
    BusError::Unavailable(error.to_string())
}

/// The settings of the facts stream.
pub(crate) fn facts_stream(options: &NatsOptions) -> stream::Config {
    stream::Config {
        name: options.stream.clone(),
        subjects: vec!["aaa.>".into()],
        retention: RetentionPolicy::Limits,
        storage: storage_type(options.storage),
        num_replicas: options.replicas,
        max_age: options.max_age,
        duplicate_window: options.duplicate_window,
        description: Some("aaa-tools: the facts of every run".into()),
        republish: Some(outcome_republish()),
        ..Default::default()
    }
}

/// The first token of the subjects the stream republishes outcome facts on, once they
/// are stored: `aaa-stored.<tenant>.<run>.tool.<how>.<call>`.
const STORED: &str = "aaa-stored";

/// The stream's republish rule: every outcome fact (and every cancel, which shares
/// the `tool.<how>.<call>` layout), once stored, goes out again on
/// [`STORED`]`.<the rest of its subject>`, with the stream's sequence number in its
/// headers. [`NatsBus::listen`] subscribes there: a listener hears of an outcome only
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
    /// Opens the bus over `client`, creating the stream when it is missing.
    pub async fn connect(
        client: async_nats::Client,
        options: NatsOptions,
    ) -> Result<Self, NatsError> {
        options.validate()?;
        let options = Arc::new(options);
        // Servers from 2.10 take several filters per consumer.
        let multi_filter = crate::server_at_least(&client.server_info().version, (2, 10));
        let max_payload = client.server_info().max_payload;
        let js = jetstream::new(client);
        let config = facts_stream(&options);
        let what = format!("stream {}", options.stream);
        let stream = js
            .get_or_create_stream(config.clone())
            .await
            .map_err(|error| crate::setup_error(what.clone(), error))?;
        crate::check_stream(&what, &stream.cached_info().config, &config, true)?;
        Ok(NatsBus {
            js,
            stream,
            options,
            multi_filter,
            max_payload,
        })
    }

    /// The stream's messages through an ordered consumer (from the start) configured
    /// by `config`.
    async fn ordered(
        &self,
        config: pull::OrderedConfig,
    ) -> Result<BoxStream<'static, Result<Stored, BusError>>, BusError> {
        let consumer = self
            .stream
            .create_consumer(pull::OrderedConfig {
                deliver_policy: DeliverPolicy::All,
                ..config
            })
            .await
            .map_err(unavailable)?;
        let name = consumer.cached_info().name.clone();
        let messages = consumer.messages().await.map_err(unavailable)?;
        let cleanup = ReplayConsumer {
            stream: self.stream.clone(),
            name,
        };
        let stored = messages.map(|message| {
            let message = message.map_err(unavailable)?;
            let seq = message.info().map_err(unavailable)?.stream_sequence;
            Ok(Stored {
                seq,
                subject: Arc::from(message.subject.as_str()),
                payload: message.payload.clone().into(),
            })
        });
        // The consumer goes with the stream: `cleanup` moves into the stream's state.
        let stored = stored.map(move |item| {
            let _held = &cleanup;
            item
        });
        Ok(stored.boxed())
    }

    /// The consumer named `spec.durable`, created (or updated to `spec`) as needed.
    async fn consumer(&self, spec: &ConsumerSpec) -> Result<PullConsumer, BusError> {
        let [filter] = spec.filters.as_slice() else {
            return Err(BusError::Invalid {
                what: "consumer",
                detail: format!(
                    "the JetStream bus takes exactly one filter per consumer; {:?} has {}",
                    spec.durable,
                    spec.filters.len()
                ),
            });
        };
        check_filter(filter)?;
        let name_ok = !spec.durable.is_empty()
            && spec
                .durable
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(BusError::Invalid {
                what: "consumer name",
                detail: format!("{:?}: use only A-Z, a-z, 0-9, '_' and '-'", spec.durable),
            });
        }
        let max_ack_pending = spec.max_in_flight.saturating_mul(self.options.max_workers);
        let config = pull::Config {
            durable_name: Some(spec.durable.clone()),
            filter_subject: filter.clone(),
            deliver_policy: DeliverPolicy::All,
            ack_policy: AckPolicy::Explicit,
            ack_wait: spec.ack_wait,
            // No MaxDeliver: the guard's attempt cap ends a call, and ending it acks it.
            max_deliver: -1,
            max_ack_pending: i64::try_from(max_ack_pending).unwrap_or(i64::MAX),
            description: Some("aaa-tools workers".into()),
            ..Default::default()
        };
        let consumer: PullConsumer = self
            .stream
            .get_or_create_consumer(&spec.durable, config.clone())
            .await
            .map_err(unavailable)?;
        let current = &consumer.cached_info().config;
        if current.ack_wait != spec.ack_wait || current.max_ack_pending < config.max_ack_pending {
            // Another worker created it with other settings: the newest worker's win
            // (both fields can be updated in place).
            match self.stream.create_consumer(config).await {
                Ok(updated) => return Ok(updated),
                Err(error) => {
                    tracing::warn!(%error, consumer = %spec.durable, "could not update the consumer's settings; keeping the server's");
                }
            }
        }
        Ok(consumer)
    }

    /// How many messages the durable consumer `durable` has delivered and not yet seen
    /// settled, and how many it has not delivered yet: `(ack_pending, pending)`. For
    /// operators and tests.
    pub async fn consumer_pending(&self, durable: &str) -> Result<(u64, u64), BusError> {
        let info = self
            .stream
            .consumer_info(durable)
            .await
            .map_err(unavailable)?;
        Ok((info.num_ack_pending as u64, info.num_pending))
    }

    /// **Escape hatch**: the connection's raw async-nats JetStream context, for what the
    /// bus does not cover (reading the stream's or a consumer's state, an operator's
    /// tool, a test that looks under the bus).
    ///
    /// The returned type is async-nats', so code that calls this depends on the
    /// async-nats version this crate was built with (see `Cargo.toml`), not only on
    /// this crate: an async-nats upgrade here may break it even in a release of this
    /// crate that changes nothing else. Add the same async-nats version to your own
    /// dependencies to name its types. Everything else in this crate hides async-nats.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let (bus, _store) = aaa_tools_nats::NatsOptions::new("nats://127.0.0.1:4222")
    ///     .connect_parts()
    ///     .await?;
    /// let stream = bus.raw_jetstream().get_stream("AAA").await?;
    /// println!("{} messages", stream.cached_info().state.messages);
    /// # Ok(()) }
    /// ```
    pub fn raw_jetstream(&self) -> &jetstream::Context {
        &self.js
    }
}

impl Bus for NatsBus {
    fn publish<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, ()> {
        BusFuture::new(async move { self.send(subject, payload, msg_id).await?.await })
    }

    fn send<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, Confirmation> {
        BusFuture::new(async move {
            let headers = publish_headers(subject, msg_id, payload.len(), self.max_payload)?;
            let ack = self
                .js
                .publish_with_headers(subject.to_owned(), headers, payload.into_bytes())
                .await
                .map_err(unavailable)?;
            Ok(Confirmation::new(async move {
                ack.await.map(|_| ()).map_err(unavailable)
            }))
        })
    }

    /// A plain NATS publish with no reply subject: the stream stores it as it stores
    /// any message on its subjects (deduplicated by `Nats-Msg-Id` alike), and the
    /// server sends no receipt back. On the same connection as every other publish, so
    /// it keeps its place in their order.
    fn emit<'a>(
        &'a self,
        subject: &'a str,
        payload: Payload,
        msg_id: Option<&'a str>,
    ) -> BusFuture<'a, ()> {
        BusFuture::new(async move {
            let headers = publish_headers(subject, msg_id, payload.len(), self.max_payload)?;
            self.js
                .client()
                .publish_with_headers(subject.to_owned(), headers, payload.into_bytes())
                .await
                .map_err(unavailable)
        })
    }

    fn max_payload(&self) -> Option<usize> {
        Some(self.max_payload)
    }

    fn subscribe<'a>(&'a self, spec: &'a ConsumerSpec) -> BusFuture<'a, Box<dyn Subscription>> {
        BusFuture::new(async move {
            self.consumer(spec).await?;
            // A pull lives no longer than an ack wait: a worker that stalls (a long
            // pause, SIGSTOP) with a pull open would otherwise keep receiving messages
            // it cannot take until the pull expires.
            let expires = spec
                .ack_wait
                .clamp(Duration::from_secs(1), self.options.pull_expires);
            let subscription = NatsSubscription::open(
                self.js.clone(),
                &self.options.stream,
                &spec.durable,
                expires,
            )
            .await?;
            Ok(Box::new(subscription) as Box<dyn Subscription>)
        })
    }

    fn replay<'a>(
        &'a self,
        filter: &'a str,
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        BusFuture::new(async move {
            check_filter(filter)?;
            self.ordered(pull::OrderedConfig {
                filter_subject: filter.to_owned(),
                ..Default::default()
            })
            .await
        })
    }

    fn replay_any<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        BusFuture::new(async move {
            for filter in filters {
                check_filter(filter)?;
            }
            if self.multi_filter && filters.len() > 1 {
                let config = pull::OrderedConfig {
                    filter_subjects: filters.to_vec(),
                    ..Default::default()
                };
                match self.ordered(config).await {
                    Ok(stream) => return Ok(stream),
                    // A server of the cluster that takes one filter: cover them.
                    Err(error) => {
                        tracing::debug!(%error, "several filters refused; replaying a covering filter")
                    }
                }
            }
            aaa_tools::bus::replay_covering(self, filters).await
        })
    }

    fn listen<'a>(
        &'a self,
        filters: &'a [String],
    ) -> BusFuture<'a, BoxStream<'static, Result<Stored, BusError>>> {
        BusFuture::new(self.listen_republished(filters))
    }

    fn first<'a>(&'a self, filter: &'a str) -> BusFuture<'a, Option<Stored>> {
        BusFuture::new(self.first_stored(filter))
    }

    /// The stream's last sequence number, from its info (one request to the server).
    fn last_seq(&self) -> BusFuture<'_, Option<u64>> {
        BusFuture::new(async move {
            let info = self.stream.get_info().await.map_err(unavailable)?;
            Ok(Some(info.state.last_sequence))
        })
    }
}

impl NatsBus {
    /// [`Bus::listen`]: one core subscription per filter, on the subjects the stream
    /// republishes outcomes on. A reconnect (the connection's count of connects moves)
    /// comes out as an error item once the subscriptions are back on the server, and
    /// so does each election of a new stream leader (the server's advisory).
    async fn listen_republished(
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

    /// [`Bus::first`]: the stream's next message on `filter` from its first sequence
    /// number, asked of the stream's leader (so a message just stored is found).
    async fn first_stored(&self, filter: &str) -> Result<Option<Stored>, BusError> {
        check_filter(filter)?;
        match self
            .stream
            .get_first_raw_message_by_subject(filter, 1)
            .await
        {
            Ok(message) => Ok(Some(Stored {
                seq: message.sequence,
                subject: Arc::from(message.subject.as_str()),
                payload: message.payload.into(),
            })),
            Err(error)
                if error.kind()
                    == async_nats::jetstream::stream::LastRawMessageErrorKind::NoMessageFound =>
            {
                Ok(None)
            }
            Err(error) => Err(unavailable(error)),
        }
    }
}

/// The server-side consumer of one replay, deleted when the replay is dropped. A
/// replay's consumer is ephemeral: the server also deletes it by itself 30 s after its
/// reader stops asking for messages (async-nats sets that `inactive_threshold` on
/// ordered consumers), which is what happens when the reading process dies; and should
/// the consumer be recreated while it is read (after a gap), its successor expires the
/// same way.
struct ReplayConsumer {
    stream: stream::Stream,
    name: String,
}

impl Drop for ReplayConsumer {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (stream, name) = (self.stream.clone(), std::mem::take(&mut self.name));
        runtime.spawn(async move {
            if let Err(error) = stream.delete_consumer(&name).await {
                tracing::debug!(%error, consumer = name, "could not delete a replay's consumer; it expires by itself");
            }
        });
    }
}

/// A worker's handle on a durable pull consumer over one inbox subscription held for
/// its life (no subscription churn on the server). It pulls only as many messages as
/// the caller has room for, so nothing waits in a buffer while its ack wait runs out.
struct NatsSubscription {
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
    async fn open(
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

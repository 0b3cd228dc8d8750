//! [`NatsBus`]: the [`Bus`] on a JetStream stream with durable pull consumers.
//!
//! - This module: the stream's settings, publishing (acknowledged by the stream,
//!   de-duplicated by id, sized against the server's `max_payload`), the durable
//!   consumers and the replays.
//! - [`listen`]: how an engine hears of outcomes, through the stream's republish rule.
//! - [`subscription`]: how a worker pulls from a durable consumer, only as many
//!   messages as it has room for, and settles each delivery.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use async_nats::jetstream::stream::{self, RetentionPolicy, StorageType};
use futures::StreamExt;
use futures::stream::BoxStream;

use aaa_tools::bus::{
    Bus, BusError, BusFuture, Confirmation, ConsumerSpec, Payload, Stored, Subscription,
};

use crate::{NatsError, NatsOptions, Storage, check_filter, check_subject};

mod listen;
mod subscription;

pub(crate) use listen::outcome_republish;
use subscription::NatsSubscription;

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

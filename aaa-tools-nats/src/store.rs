//! [`NatsStore`]: the [`GuardStore`] on a JetStream KV bucket, with call records on the
//! facts stream (see [`records`]).

use std::ops::ControlFlow;
use std::time::Duration;

use aaa_guard::{
    Entry, GuardStore, OutcomeLog, RecordKind, Revision, StoreError, StoreFuture, check_key,
};
use async_nats::jetstream::consumer::{DeliverPolicy, ReplayPolicy, push};
use async_nats::jetstream::kv::{self, CreateErrorKind, Operation, UpdateErrorKind};
use async_nats::jetstream::stream::{self, DiscardPolicy};
use async_nats::jetstream::{self};

use crate::bus::storage_type;
use crate::records::{self, StreamRecords};
use crate::{NatsError, NatsOptions};

/// The JetStream [`GuardStore`]: one key per record, compare-and-set on the key's
/// revision (the stream sequence of its last write). Where a record lives follows its
/// [`RecordKind`], never its key: [`Call`](RecordKind::Call) records live on the facts
/// stream, next to the outcomes they fence (on nats-server 2.11 and later an outcome is
/// committed and published in one write: [`outcome_log`](GuardStore::outcome_log));
/// [`Handler`](RecordKind::Handler) records (pending approvals, budgets) live in the KV
/// bucket. Cheap to clone.
///
/// Keeps a clock: every revision carries the server's time, so
/// [`age`](GuardStore::age) tells how long ago a record was written by the server's
/// clock (it writes a small key of its own to the bucket, `clock=<id>`, to read the
/// server's "now"; `=` is in no record's key, so no listing shows it).
#[derive(Clone)]
pub struct NatsStore {
    client: async_nats::Client,
    kv: kv::Store,
    stream: stream::Stream,
    prefix: String,
    clock_key: String,
    records: StreamRecords,
}

impl std::fmt::Debug for NatsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsStore")
            .field("stream", &self.stream.cached_info().config.name)
            .finish()
    }
}

fn unavailable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

impl NatsStore {
    /// Opens the store over `client`, creating the bucket when it is missing.
    pub async fn connect(
        client: async_nats::Client,
        options: NatsOptions,
    ) -> Result<Self, NatsError> {
        options.validate()?;
        let js = jetstream::new(client.clone());
        let bucket = &options.bucket;
        let what = format!("KV bucket {bucket}");
        let setup = |detail: String| crate::setup_error(what.clone(), detail);
        let kv = match js.get_key_value(bucket.as_str()).await {
            Ok(kv) => kv,
            Err(_) => create_bucket(&js, &options).await.map_err(setup)?,
        };
        let stream = js
            .get_stream(format!("KV_{bucket}"))
            .await
            .map_err(|e| setup(e.to_string()))?;
        let wanted = stream::Config {
            num_replicas: options.replicas,
            storage: storage_type(options.storage),
            ..Default::default()
        };
        crate::check_stream(&what, &stream.cached_info().config, &wanted, false)?;
        let clock_key = format!("clock={}", uuid::Uuid::new_v4().simple());
        let facts = js
            .get_or_create_stream(crate::bus::facts_stream(&options))
            .await
            .map_err(|error| crate::setup_error(format!("stream {}", options.stream), error))?;
        let fences = options.fenced_outcomes
            && crate::server_at_least(&client.server_info().version, (2, 11));
        Ok(NatsStore {
            records: StreamRecords::new(js, facts, fences),
            client,
            kv,
            stream,
            prefix: format!("$KV.{bucket}."),
            clock_key,
        })
    }

    /// The server's time now, read back from a write of this store's clock key.
    async fn server_now(&self) -> Result<i128, StoreError> {
        self.kv
            .put(&self.clock_key, bytes::Bytes::new())
            .await
            .map_err(unavailable)?;
        let entry = self
            .kv
            .entry(&self.clock_key)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| StoreError::Unavailable("the clock key vanished".into()))?;
        Ok(entry.created.unix_timestamp_nanos())
    }

    /// The record `key` of `kind` and when the server stored it (Unix nanoseconds).
    async fn written(
        &self,
        kind: RecordKind,
        key: &str,
    ) -> Result<Option<(Entry, i128)>, StoreError> {
        if kind == RecordKind::Call {
            return self.records.get(key).await;
        }
        let entry = self.kv.entry(key).await.map_err(unavailable)?;
        Ok(entry.filter(|e| e.operation == Operation::Put).map(|e| {
            let written = e.created.unix_timestamp_nanos();
            let entry = Entry {
                value: e.value.to_vec(),
                revision: e.revision,
            };
            (entry, written)
        }))
    }
}

/// Creates the bucket: through async-nats first, else (nats-server 2.9, where
/// `create_key_value` fails) by creating its `KV_<bucket>` stream directly.
async fn create_bucket(
    js: &jetstream::Context,
    options: &NatsOptions,
) -> Result<kv::Store, String> {
    let bucket = options.bucket.clone();
    let config = kv::Config {
        bucket: bucket.clone(),
        history: 1,
        storage: storage_type(options.storage),
        num_replicas: options.replicas,
        description: "aaa-tools: guard records, approvals, budgets".into(),
        ..Default::default()
    };
    match js.create_key_value(config).await {
        Ok(kv) => return Ok(kv),
        Err(error) => {
            tracing::debug!(%error, "create_key_value failed; creating the bucket's stream directly");
        }
    }
    // The settings a KV bucket's stream has.
    let stream = stream::Config {
        name: format!("KV_{bucket}"),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        discard: DiscardPolicy::New,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        duplicate_window: Duration::from_secs(120),
        storage: storage_type(options.storage),
        num_replicas: options.replicas,
        description: Some("aaa-tools: guard records, approvals, budgets".into()),
        ..Default::default()
    };
    js.get_or_create_stream(stream)
        .await
        .map_err(|e| e.to_string())?;
    js.get_key_value(bucket.as_str())
        .await
        .map_err(|e| e.to_string())
}

impl GuardStore for NatsStore {
    fn create<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
    ) -> StoreFuture<'a, Revision> {
        StoreFuture::new(async move {
            check_key(key)?;
            match kind {
                RecordKind::Call => self.records.create(key, value).await,
                RecordKind::Handler => {
                    self.kv
                        .create(key, value.into())
                        .await
                        .map_err(|error| match error.kind() {
                            CreateErrorKind::AlreadyExists => StoreError::Exists {
                                key: key.to_owned(),
                            },
                            CreateErrorKind::InvalidKey => StoreError::InvalidKey(key.to_owned()),
                            _ => unavailable(error),
                        })
                }
            }
        })
    }

    fn update<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
        value: Vec<u8>,
        expected: Revision,
    ) -> StoreFuture<'a, Revision> {
        StoreFuture::new(async move {
            check_key(key)?;
            match kind {
                RecordKind::Call => self.records.update(key, value, expected).await,
                RecordKind::Handler => {
                    self.kv
                        .update(key, value.into(), expected)
                        .await
                        .map_err(|error| match error.kind() {
                            UpdateErrorKind::WrongLastRevision => StoreError::Conflict {
                                key: key.to_owned(),
                                expected,
                                found: None,
                            },
                            UpdateErrorKind::InvalidKey => StoreError::InvalidKey(key.to_owned()),
                            _ => unavailable(error),
                        })
                }
            }
        })
    }

    fn get<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, Option<Entry>> {
        StoreFuture::new(async move {
            check_key(key)?;
            Ok(self.written(kind, key).await?.map(|(entry, _)| entry))
        })
    }

    fn delete<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, ()> {
        StoreFuture::new(async move {
            check_key(key)?;
            match kind {
                RecordKind::Call => self.records.delete(key).await,
                RecordKind::Handler => self.kv.delete(key).await.map_err(unavailable),
            }
        })
    }

    fn keys<'a>(&'a self, kind: RecordKind, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        StoreFuture::new(async move {
            let (stream, subjects) = match kind {
                RecordKind::Call => (self.records.stream(), records::SUBJECT_PREFIX),
                RecordKind::Handler => (&self.stream, self.prefix.as_str()),
            };
            let mut keys = last_written(&self.client, stream, subjects, prefix).await?;
            keys.sort();
            Ok(keys)
        })
    }

    fn age<'a>(
        &'a self,
        kind: RecordKind,
        key: &'a str,
    ) -> StoreFuture<'a, Option<(Revision, Duration)>> {
        StoreFuture::new(async move {
            check_key(key)?;
            let Some((entry, written)) = self.written(kind, key).await? else {
                return Ok(None);
            };
            let now = self.server_now().await?;
            let nanos = now.saturating_sub(written).max(0);
            let age = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
            Ok(Some((entry.revision, age)))
        })
    }

    /// From nats-server 2.11: an outcome is published only if its call's record is
    /// unchanged, in one write (see [the crate docs](crate)).
    fn outcome_log(&self) -> Option<&dyn OutcomeLog> {
        self.records
            .fences()
            .then_some(&self.records as &dyn OutcomeLog)
    }
}

/// The keys starting with `prefix` among the subjects `subjects` + key of `stream`,
/// by the last message of each subject (deleted keys left out).
async fn last_written(
    client: &async_nats::Client,
    stream: &stream::Stream,
    subjects: &str,
    prefix: &str,
) -> Result<Vec<String>, StoreError> {
    // A prefix that ends a token is a server-side filter; others filter here.
    let filter = match prefix.strip_suffix('.') {
        Some(head) if check_key(head).is_ok() => format!("{subjects}{prefix}>"),
        _ => format!("{subjects}>"),
    };
    let consumer = stream
        .create_consumer(push::OrderedConfig {
            deliver_subject: client.new_inbox(),
            filter_subject: filter,
            headers_only: true,
            replay_policy: ReplayPolicy::Instant,
            deliver_policy: DeliverPolicy::LastPerSubject,
            ..Default::default()
        })
        .await
        .map_err(unavailable)?;
    // Deleted once read, not left to expire: workers list approval deadlines every
    // second, and each listing's consumer would otherwise stay on the server for its
    // inactivity threshold (the `scale` bench saw 30 of them at any time).
    let name = consumer.cached_info().name.clone();
    let keys = keys_of(consumer, subjects, prefix).await;
    if let Err(error) = stream.delete_consumer(&name).await {
        tracing::debug!(%error, consumer = name, "could not delete a listing's consumer; it expires by itself");
    }
    keys
}

/// The keys `consumer` (over the last message of each subject) delivers.
async fn keys_of(
    consumer: async_nats::jetstream::consumer::Consumer<push::OrderedConfig>,
    subjects: &str,
    prefix: &str,
) -> Result<Vec<String>, StoreError> {
    let mut keys = Vec::new();
    if consumer.cached_info().num_pending == 0 {
        return Ok(keys);
    }
    let messages = consumer.messages().await.map_err(unavailable)?;
    records::read_to_end(messages, |message| {
        let deleted = message.headers.as_ref().is_some_and(|h| {
            h.get("KV-Operation")
                .is_some_and(|op| op.as_str() == "DEL" || op.as_str() == "PURGE")
        });
        // A key that is no record's key is the store's own (its clock).
        if let Some(key) = message.subject.strip_prefix(subjects)
            && !deleted
            && key.starts_with(prefix)
            && check_key(key).is_ok()
        {
            keys.push(key.to_owned());
        }
        ControlFlow::Continue(())
    })
    .await?;
    Ok(keys)
}

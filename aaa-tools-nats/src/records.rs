//! Call records on the facts stream, and the outcome log they make of it.
//!
//! A record of [`RecordKind::Call`](aaa_guard::RecordKind::Call) with key `<key>` is
//! kept on the facts stream under `aaa.$g.<key>` rather than in the KV bucket, with the
//! same compare-and-set: every write is a publish with
//! `Nats-Expected-Last-Subject-Sequence` (0 for "absent"), the revision is the stream
//! sequence of the last write, a read is the subject's last message. `$g` is no tenant
//! (ids are `[A-Za-z0-9_-]`), so no run's filter ever matches a record; the handler's
//! call keys (`guard.<tenant>.<run>.<call>`) make subjects of six tokens, which no
//! consumer of requests or approvals (five) matches.
//!
//! Living in the same stream as the outcome facts is what makes the one-write commit
//! possible on nats-server 2.11 and later: an outcome is published with
//! `Nats-Expected-Last-Subject-Sequence-Subject` naming its record's subject, so the
//! server stores it only if the attempt still holds the call (see
//! [`OutcomeLog`]): the outcome's address is the subject it is published on, its id
//! the `Nats-Msg-Id`. Older servers ignore that header, so there the store offers no
//! fence and the guard commits on the record before publishing, as on every other
//! store. The records stay on the stream either way, so workers on servers of
//! different versions never read different places.
//!
//! Every write of a record is a message of its own and stays until the stream's
//! `max_age` (the KV bucket kept only the last): a call writes its record when it starts,
//! once per heartbeat while it runs and when it ends.

use std::ops::ControlFlow;

use aaa_guard::{Committed, Entry, OutcomeFact, OutcomeLog, Revision, StoreError, StoreFuture};
use async_nats::HeaderMap;
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::stream::{self, LastRawMessageErrorKind};
use async_nats::jetstream::{self};
use futures::StreamExt;

/// Where call records are kept: the subject of record `<key>` is this and `<key>`.
pub(crate) const SUBJECT_PREFIX: &str = "aaa.$g.";

/// The server's header naming the subject an expected last sequence applies to.
const EXPECTED_SUBJECT: &str = "Nats-Expected-Last-Subject-Sequence-Subject";

fn unavailable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

/// `key` was not at revision `expected`.
fn conflict(key: &str, expected: Revision) -> StoreError {
    StoreError::Conflict {
        key: key.to_owned(),
        expected,
        found: None,
    }
}

/// Reads an ordered consumer's `messages` to the last one stored when it was created
/// (the caller skips this when it had none pending), handing each to `visit` until it
/// breaks.
pub(crate) async fn read_to_end<S, E>(
    mut messages: S,
    mut visit: impl FnMut(jetstream::Message) -> ControlFlow<()>,
) -> Result<(), StoreError>
where
    S: futures::Stream<Item = Result<jetstream::Message, E>> + Unpin,
    E: std::fmt::Display,
{
    while let Some(message) = messages.next().await {
        let message = message.map_err(unavailable)?;
        let pending = message.info().map_err(unavailable)?.pending;
        if visit(message).is_break() || pending == 0 {
            break;
        }
    }
    Ok(())
}

/// The call records on the facts stream.
#[derive(Clone)]
pub(crate) struct StreamRecords {
    js: jetstream::Context,
    stream: stream::Stream,
    /// Whether the server takes [`EXPECTED_SUBJECT`] (2.11 and later).
    fences: bool,
}

impl StreamRecords {
    pub(crate) fn new(js: jetstream::Context, stream: stream::Stream, fences: bool) -> Self {
        StreamRecords { js, stream, fences }
    }

    pub(crate) fn fences(&self) -> bool {
        self.fences
    }

    pub(crate) fn stream(&self) -> &stream::Stream {
        &self.stream
    }

    fn subject(key: &str) -> String {
        format!("{SUBJECT_PREFIX}{key}")
    }

    /// Publishes `payload` at `subject` if the last message at `on` has sequence
    /// `expected` (0: there is none): the new sequence, or whether it was a duplicate.
    async fn publish_if(
        &self,
        subject: String,
        payload: Vec<u8>,
        expected: Revision,
        on: Option<&str>,
        msg_id: Option<&str>,
    ) -> Result<(Revision, bool), PublishError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
            expected.to_string().as_str(),
        );
        if let Some(on) = on {
            headers.insert(EXPECTED_SUBJECT, on);
        }
        if let Some(id) = msg_id {
            headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
        }
        let ack = self
            .js
            .publish_with_headers(subject, headers, payload.into())
            .await?
            .await?;
        Ok((ack.sequence, ack.duplicate))
    }

    /// Writes `key` if its revision is `expected` (0: absent).
    async fn write(
        &self,
        key: &str,
        value: Vec<u8>,
        expected: Revision,
    ) -> Result<Revision, StoreError> {
        match self
            .publish_if(Self::subject(key), value, expected, None, None)
            .await
        {
            Ok((revision, _)) => Ok(revision),
            Err(error) if error.kind() != PublishErrorKind::WrongLastSequence => {
                Err(unavailable(error))
            }
            Err(_) if expected == 0 => Err(StoreError::Exists {
                key: key.to_owned(),
            }),
            Err(_) => Err(conflict(key, expected)),
        }
    }

    pub(crate) async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision, StoreError> {
        self.write(key, value, 0).await
    }

    pub(crate) async fn update(
        &self,
        key: &str,
        value: Vec<u8>,
        expected: Revision,
    ) -> Result<Revision, StoreError> {
        if expected == 0 {
            // 0 means "absent" to the server: no record is ever at revision 0.
            return Err(conflict(key, expected));
        }
        self.write(key, value, expected).await
    }

    /// The record and when the server stored it (Unix nanoseconds).
    pub(crate) async fn get(&self, key: &str) -> Result<Option<(Entry, i128)>, StoreError> {
        match self
            .stream
            .get_last_raw_message_by_subject(&Self::subject(key))
            .await
        {
            Ok(message) => Ok(Some((
                Entry {
                    value: message.payload.to_vec(),
                    revision: message.sequence,
                },
                message.time.unix_timestamp_nanos(),
            ))),
            Err(error) if error.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(error) => Err(unavailable(error)),
        }
    }

    /// The stream sequence of the oldest write of the record `key` still kept, if any.
    async fn first_write(&self, key: &str) -> Result<Option<u64>, StoreError> {
        match self
            .stream
            .get_first_raw_message_by_subject(Self::subject(key), 1)
            .await
        {
            Ok(message) => Ok(Some(message.sequence)),
            Err(error) if error.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(error) => Err(unavailable(error)),
        }
    }

    /// The stream's first message on `subject` from sequence number `from` on.
    async fn next_on(
        &self,
        subject: &str,
        from: u64,
    ) -> Result<Option<async_nats::jetstream::message::StreamMessage>, StoreError> {
        match self
            .stream
            .get_first_raw_message_by_subject(subject, from)
            .await
        {
            Ok(message) => Ok(Some(message)),
            Err(error) if error.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(error) => Err(unavailable(error)),
        }
    }

    pub(crate) async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.stream
            .purge()
            .filter(Self::subject(key))
            .await
            .map(|_| ())
            .map_err(unavailable)
    }
}

impl OutcomeLog for StreamRecords {
    fn commit_outcome<'a>(
        &'a self,
        key: &'a str,
        revision: Revision,
        outcome: OutcomeFact<'a>,
    ) -> StoreFuture<'a, Committed> {
        StoreFuture::new(async move {
            let OutcomeFact { address, id, bytes } = outcome;
            aaa_guard::check_key(key)?;
            crate::check_subject(address).map_err(|error| {
                StoreError::Unavailable(format!("cannot publish the outcome: {error}"))
            })?;
            if revision == 0 {
                return Err(conflict(key, revision));
            }
            let record = Self::subject(key);
            match self
                .publish_if(address.to_owned(), bytes, revision, Some(&record), Some(id))
                .await
            {
                Ok((_, false)) => Ok(Committed::Stored),
                Ok((_, true)) => Ok(Committed::Duplicate),
                Err(error) if error.kind() == PublishErrorKind::WrongLastSequence => {
                    Err(conflict(key, revision))
                }
                Err(error) => Err(unavailable(error)),
            }
        })
    }

    fn find_outcome<'a>(
        &'a self,
        key: &'a str,
        subjects: &'a [String],
        msg_id: &'a str,
    ) -> StoreFuture<'a, Option<Vec<u8>>> {
        StoreFuture::new(async move {
            aaa_guard::check_key(key)?;
            for subject in subjects {
                crate::check_subject(subject).map_err(|error| {
                    StoreError::Unavailable(format!("cannot look for the outcome: {error}"))
                })?;
            }
            // The search starts at the record's oldest write still kept: every fenced
            // append follows it. Each subject is a call's own outcome subject, so the
            // stream's next message on it (one lookup, no consumer) is nearly always the
            // one: any other (an outcome under another id) is stepped past.
            let Some(since) = self.first_write(key).await? else {
                return Ok(None);
            };
            let mut found: Option<(u64, Vec<u8>)> = None;
            for subject in subjects {
                let mut from = since;
                while let Some(message) = self.next_on(subject, from).await? {
                    if found
                        .as_ref()
                        .is_some_and(|(seq, _)| *seq < message.sequence)
                    {
                        break;
                    }
                    let id = message.headers.get(async_nats::header::NATS_MESSAGE_ID);
                    if id.is_some_and(|id| id.as_str() == msg_id) {
                        found = Some((message.sequence, message.payload.to_vec()));
                        break;
                    }
                    from = message.sequence + 1;
                }
            }
            let found = found.map(|(_, payload)| payload);
            Ok(found)
        })
    }
}

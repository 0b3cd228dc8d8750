//! Many machines: the [aaa-tools](aaa_tools) engine on NATS JetStream, a
//! [`Bus`](aaa_tools::bus::Bus) ([`NatsBus`]) and a [`GuardStore`](aaa_guard::GuardStore)
//! ([`NatsStore`]) on one server or cluster.
//!
//! Workers on several machines serve the same tools against one NATS server or
//! cluster, with the same API and guarantees as the embedded engine:
//!
//! ```no_run
//! use aaa_tools_nats::NatsOptions;
//! use aaa_tools::{ToolHandler, ToolRegistry, tool};
//!
//! /// Adds two numbers.
//! #[tool]
//! async fn add(a: i64, b: i64) -> i64 { a + b }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = NatsOptions::new("nats://127.0.0.1:4222").connect().await?;
//! let registry = ToolRegistry::builder().tool(add::tool()).build()?;
//! let _worker = ToolHandler::new(registry).attach(&engine).await?;
//! let outcome = engine.new_run().call("add", serde_json::json!({"a": 2, "b": 3})).await?;
//! assert_eq!(outcome.result(), Some(&serde_json::json!(5)));
//! # Ok(()) }
//! ```
//!
//! # Layout on the server
//!
//! - **One stream** (default `AAA`, subjects `aaa.>`, file storage, limits retention,
//!   facts kept `max_age`) holds every fact of every run under
//!   `aaa.<tenant>.<run>.<type>`, so a run replays by the filter `aaa.<tenant>.<run>.>`.
//!   Ids are limited to `[A-Za-z0-9_-]` (see [`RunId`](aaa_tools::RunId)), and every
//!   subject and filter is checked before it reaches the server, so no id can widen a
//!   subscription.
//! - **Outcome waiting** costs the server nothing per run or per call. The stream
//!   republishes each outcome fact once it has stored it (`RePublish`
//!   `aaa.*.*.tool.*.*` → `aaa-stored.<tenant>.<run>.tool.<how>.<call>`, nats-server
//!   2.9 and later), and an engine holds one core subscription per tenant it waits in
//!   on `aaa-stored.<tenant>.*.tool.completed.*` and `…failed.*` (and one on the
//!   stream's leader-elected advisory; no consumer), routing what it hears to its runs. Republished, not merely published:
//!   a listener hears only of an outcome the stream holds, in the stream's order, and
//!   never of a repeat the stream dropped. An outcome the listener cannot have heard
//!   (stored before the wait, for a call requested elsewhere; anything while the
//!   connection was being re-made, which the listener notices by the connection's
//!   count of connects) is looked up by its subject, one `STREAM.MSG.GET`
//!   (`next_by_subj` on the call's outcome subjects, answered by the stream's leader).
//!   Outcome subjects end in the call id for that lookup. Why this and not the
//!   alternatives: a consumer per run (what versions before 0.2 did) ran a default
//!   server out of consumers at about a thousand concurrent runs; a subscription on
//!   the stream's own subjects would hear of publishes the stream refused or dropped
//!   as repeats; and reading a run to find one call costs as much as the run is long.
//! - **Cancels** (`aaa.<tenant>.<run>.tool.cancelled.<call>`) share the outcome
//!   subjects' layout, so the same `RePublish` rule carries them: each executor holds
//!   one core subscription on `aaa-stored.*.*.tool.cancelled.*`, and asks the stream
//!   for its last sequence number when it starts listening (and after a gap), so that
//!   only calls requested before that look a cancel up (one `STREAM.MSG.GET`). A
//!   stream made by an earlier version needs no change.
//! - **Replays** ([`RunHandle::facts`](aaa_tools::RunHandle::facts)) read through an
//!   ordered (ephemeral) consumer, deleted when the replay is dropped, and by the
//!   server 30 s after its reader stops asking when the reading process dies. Servers
//!   from 2.10 take several filters on one consumer (async-nats' `server_2_10`
//!   feature); with 2.9, which takes one, a replay of several filters uses their
//!   covering filter and the client drops what matches none.
//! - **Durable pull consumers** `aaa-tool-requests` (`aaa.*.*.tool.requested`) and
//!   `aaa-approval-signals` (`aaa.*.*.approval.*`), explicit acks, `AckWait` = the
//!   handler's [`ack_wait`](aaa_tools::ToolHandler::ack_wait), no `MaxDeliver` (the guard's
//!   attempt cap decides when a call is abandoned, and abandoning acks it),
//!   `MaxAckPending` = `max_in_flight` × [`max_workers`](NatsOptions::max_workers).
//!   A worker pulls **only for free pool slots**: it asks for at most as many messages
//!   as its pools have free permits (less the calls it already holds that wait for
//!   one), over one inbox subscription, with pulls that expire within an ack wait. So
//!   nothing waits in a client buffer while its ack wait runs out, and a busy worker
//!   leaves new calls to idle ones. (The embedded engine gates its consumers the same
//!   way.)
//! - **Publishing** waits for the server's ack and sets `Nats-Msg-Id`: a second publish
//!   of the same id within the `duplicate_window` is dropped.
//! - **Call records** (records of [`RecordKind::Call`](aaa_guard::RecordKind::Call), the
//!   guard's `guard.<tenant>.<run>.<call>`) live on the same stream under
//!   `aaa.$g.<key>`: every write is a publish with `Nats-Expected-Last-Subject-Sequence`
//!   (compare-and-set on the subject's last sequence, which is the revision), a read is
//!   the subject's last message. `$g` is no tenant, so no run's filter matches one, and
//!   the handler's keys make subjects of six tokens, which no consumer of requests or
//!   approvals matches. Every write stays until `max_age` (a call writes its record
//!   when it starts, every heartbeat while it runs, and when it ends, if it is not
//!   finished through the outcome log below).
//! - **One KV bucket** (default `aaa_guard`, history 1) holds the records of
//!   [`RecordKind::Handler`](aaa_guard::RecordKind::Handler): pending approvals and run
//!   budgets (and one clock key per store, `clock=<id>`, which no listing shows), so any
//!   worker can continue any call. Every transition is one compare-and-set on the key's
//!   revision.
//!
//! The store learns where a record goes from its kind alone, never from its key: the
//! same key of both kinds names two records, one in each place.
//!
//! # Outcomes committed in one write (nats-server 2.11 and later)
//!
//! A call's outcome fact is published with `Nats-Expected-Last-Subject-Sequence` and
//! `Nats-Expected-Last-Subject-Sequence-Subject` naming its record: the server stores
//! it only if the attempt still holds the call, so the fact *is* the commit (one write
//! where the KV store needed a compare-and-set and then a publish; see
//! [`OutcomeLog`](aaa_guard::OutcomeLog) and [`NatsStore`]'s `outcome_log`). The record keeps
//! showing the attempt running; whoever fences that attempt out later (a takeover, an
//! abandon, `outcome_unknown`) looks for its outcome right after its own
//! compare-and-set, and a delivery that would wait for a live holder looks once before
//! it waits, so a finished call never runs again. A look reads the call's own outcome
//! subjects from its first record write on, not the run: its cost does not grow with
//! the size of the run. (It assumes, as the records do, that a call settles within the
//! stream's `max_age`.) A
//! stale attempt's outcome is refused by the server and audited as
//! `aaa.tool.stale_result`; one refused as a duplicate of the call's outcome id is
//! checked against the record and audited alike when the attempt lost the call. Tools
//! with `fence_results = false` commit on the record first, as before.
//!
//! Servers before 2.11 ignore the second header, so the store offers no fence there
//! and every outcome is committed on the record first, then published. **A cluster
//! whose servers straddle 2.11** (a rolling upgrade) can store a stale attempt's
//! outcome when a worker connected to a 2.11 server publishes through a leader that is
//! older: run the workers with [`NatsOptions::fenced_outcomes`]`(false)` until the
//! upgrade is done.
//!
//! # Acks are not fenced
//!
//! JetStream matches `+ACK`, `-NAK`, `+WPI` and `+TERM` by stream sequence, whichever
//! delivery sent them: a stale ack from a superseded worker would settle the message
//! its successor is working on. So the fence lives in the call's record, and a worker whose
//! attempt was superseded sends nothing for that message (the handler's `Leave`).
//! A worker acks only after the outcome is committed and published. Progress (`+WPI`)
//! goes out every heartbeat, only after the lease was renewed.
//!
//! # Leases and the server's clock
//!
//! The pending ack is a lease on the server's clock; the call's record is the fence. When a
//! worker dies, its message comes back after `AckWait`. The next worker reads the
//! record, and the server's own clock (every stored message carries the server's time)
//! tells how old the last renewal is: once it is older than `lease_ttl_s` and the
//! observer has itself seen it unchanged for 1.5 heartbeats, the call is taken over
//! (see [`LeaseWatch`](aaa_guard::LeaseWatch)). Takeover therefore comes about
//! `lease_ttl_s` after the last renewal **if `ack_wait` ≤ `lease_ttl_s` / 2**, which is
//! the handler's default; a longer `ack_wait` delays it by the difference.
//!
//! # Server versions
//!
//! Works on nats-server 2.9 (Debian's 2.9.10) and current 2.1x. async-nats 0.51's
//! `create_key_value` fails against 2.9 (its account-info query expects fields that
//! arrived in 2.10.8), so when it fails the bucket's `KV_<bucket>` stream is created
//! directly with the settings a KV bucket has. Per-key TTLs (2.11) are not used.
//! Consumers take one filter subject each (several arrived in 2.10). Outcomes are
//! committed in one conditional write from 2.11 on (above); before, in two.
//!
//! # Disconnects
//!
//! The client reconnects forever. While the server is away, publishes and store writes
//! fail after the request timeout; the handler's retry policy retries outcomes, calls in
//! flight keep their records, and nothing is acked: JetStream delivers the requests
//! again once it is back. An ambiguous store write (a timeout) is resolved by reading the
//! key back.
//!
//! # Operator's view
//!
//! [`NatsBus::consumer_pending`] reads a consumer's ack-pending and pending counts;
//! calls in `outcome_unknown` are listed and resolved through the engine as on the
//! embedded engine. A worker's tracing warnings (lost leases, stale results, store
//! errors) name the call.
//!
//! # Why async-nats
//!
//! It is the NATS maintainers' own Rust client, on tokio, with JetStream and KV support
//! and transparent reconnects; the bus uses its pull consumers and publish acks, and
//! the store its publish acks and stream reads (call records) and its KV bucket handle
//! (the rest).
//!
//! # Why a crate of its own
//!
//! `aaa-tools` holds the engine and the embedded backends and knows nothing of NATS;
//! this crate implements its public [`Bus`](aaa_tools::bus::Bus) and
//! [`GuardStore`](aaa_guard::GuardStore) contracts, as any other backend would. So an
//! async-nats release changes this crate only, and a program that runs in one process
//! does not build a NATS client. Nothing of async-nats is in this crate's API but one
//! item named for it, [`NatsBus::raw_jetstream`]: code that uses it depends on the
//! async-nats version this crate was built with.

mod bus;
mod options;
mod records;
mod store;

pub use bus::NatsBus;
pub use options::{NatsOptions, Storage};
pub use store::NatsStore;

use aaa_tools::Engine;
use aaa_tools::bus::BusError;

/// Connecting to NATS or setting up the stream and bucket failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// The options are invalid.
    #[error("invalid NATS options: {0}")]
    Options(String),
    /// The server could not be reached.
    #[error("cannot connect to NATS at {servers}: {detail}")]
    Connect {
        /// The servers tried.
        servers: String,
        /// Why it failed.
        detail: String,
    },
    /// The stream, consumer or bucket could not be created or opened.
    #[error("cannot set up JetStream {what}: {detail}")]
    Setup {
        /// What was being set up.
        what: String,
        /// Why it failed.
        detail: String,
    },
    /// The stream or bucket exists with another configuration than the options ask.
    /// The engine never reconfigures what it finds.
    #[error(
        "JetStream {what} exists with another configuration than the options ask: {}; \
         change the options to match, or change the {what} yourself (the engine never \
         reconfigures it)",
        .differences.join("; ")
    )]
    Mismatch {
        /// The stream or bucket.
        what: String,
        /// Each setting that differs, with both values.
        differences: Vec<String>,
    },
}

/// A setup error for `what`, with what to do where the server's answer is known to
/// puzzle: no JetStream, or replicas on a server outside a cluster.
fn setup_error(what: String, error: impl std::fmt::Display) -> NatsError {
    let detail = error.to_string();
    let lower = detail.to_lowercase();
    let hint = if ["not enabled", "unavailable", "no responders"]
        .iter()
        .any(|word| lower.contains(word))
    {
        "; is JetStream enabled on the server? (`nats-server -js`, or a `jetstream {}` \
         block in its config)"
    } else if lower.contains("replicas > 1") || lower.contains("insufficient resources") {
        "; replicas above 1 need a JetStream cluster of at least that many servers \
         (`NatsOptions::replicas(1)` on a single server)"
    } else {
        ""
    };
    NatsError::Setup {
        what,
        detail: format!("{detail}{hint}"),
    }
}

/// Checks an existing stream's configuration against the one the options ask for:
/// subjects (when `subjects` is set), replicas, republish, storage.
fn check_stream(
    what: &str,
    found: &async_nats::jetstream::stream::Config,
    wanted: &async_nats::jetstream::stream::Config,
    subjects: bool,
) -> Result<(), NatsError> {
    let mut differences = Vec::new();
    if subjects {
        let (mut a, mut b) = (found.subjects.clone(), wanted.subjects.clone());
        a.sort();
        b.sort();
        if a != b {
            differences.push(format!(
                "subjects: it has {:?}, the options ask {:?}",
                found.subjects, wanted.subjects
            ));
        }
    }
    if found.num_replicas.max(1) != wanted.num_replicas.max(1) {
        differences.push(format!(
            "replicas: it has {}, the options ask {}",
            found.num_replicas.max(1),
            wanted.num_replicas.max(1)
        ));
    }
    if found.republish != wanted.republish {
        let show = |r: &Option<async_nats::jetstream::stream::Republish>| match r {
            Some(r) => format!("{} -> {}", r.source, r.destination),
            None => "none".to_owned(),
        };
        differences.push(format!(
            "republish: it has {}, the options ask {} (outcome waiting listens there; \
             streams made before version 0.2 lack it)",
            show(&found.republish),
            show(&wanted.republish)
        ));
    }
    if found.storage != wanted.storage {
        differences.push(format!(
            "storage: it has {:?}, the options ask {:?}",
            found.storage, wanted.storage
        ));
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(NatsError::Mismatch {
            what: what.to_owned(),
            differences,
        })
    }
}

impl NatsOptions {
    /// Connects and opens (creating when missing) the stream and the bucket: an engine
    /// whose bus and store live on the server.
    pub async fn connect(&self) -> Result<Engine, NatsError> {
        let (bus, store) = self.connect_parts().await?;
        Ok(Engine::new(bus, store))
    }

    /// Connects and returns the bus and the store separately (to combine them with
    /// something else, or to share one connection between engines).
    pub async fn connect_parts(&self) -> Result<(NatsBus, NatsStore), NatsError> {
        self.validate()?;
        let client = self
            .connect_options()
            .await?
            .connect(self.servers.as_slice())
            .await
            .map_err(|error| NatsError::Connect {
                servers: self.servers.join(","),
                detail: error.to_string(),
            })?;
        let bus = NatsBus::connect(client.clone(), self.clone()).await?;
        let store = NatsStore::connect(client, self.clone()).await?;
        Ok((bus, store))
    }
}

/// Whether a server of `version` (`major.minor.patch`) is at least `least`.
fn server_at_least(version: &str, least: (u32, u32)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= least
}

/// The start of every subject and filter on the stream.
const STREAM_PREFIX: &str = "aaa.";

/// Checks a subject to publish on as every bus does, and that it lies in the stream.
fn check_subject(subject: &str) -> Result<(), BusError> {
    if !subject.starts_with(STREAM_PREFIX) {
        return Err(BusError::Invalid {
            what: "subject",
            detail: format!("{subject:?}: it must start with `{STREAM_PREFIX}`"),
        });
    }
    aaa_tools::bus::check_publish_subject(subject)
}

/// Checks a filter as every bus does, and that it lies in the stream.
fn check_filter(filter: &str) -> Result<(), BusError> {
    if !filter.starts_with(STREAM_PREFIX) {
        return Err(aaa_tools::bus::invalid_filter(
            filter,
            format!("it must start with `{STREAM_PREFIX}`"),
        ));
    }
    aaa_tools::bus::check_filter(filter)
}

#[cfg(test)]
mod tests {
    use super::{check_filter, check_subject, server_at_least};

    #[test]
    fn server_versions_compare_by_major_and_minor() {
        assert!(server_at_least("2.10.0", (2, 10)));
        assert!(server_at_least("2.15.1", (2, 11)));
        assert!(server_at_least("3.0.0", (2, 11)));
        assert!(!server_at_least("2.9.10", (2, 10)));
        assert!(!server_at_least("2.10.24", (2, 11)));
        assert!(!server_at_least("garbage", (2, 10)));
    }

    #[test]
    fn subjects_cannot_widen() {
        assert!(check_subject("aaa.t.r.tool.requested").is_ok());
        assert!(check_filter("aaa.t.r.>").is_ok());
        assert!(check_filter("aaa.*.*.tool.requested").is_ok());
        assert!(check_subject("aaa.t.r.>").is_err());
        assert!(check_subject("aaa.t.*.x").is_err());
        assert!(check_filter("aaa.t>.r").is_err());
        assert!(check_filter("aaa.>.r").is_err());
        assert!(check_subject("aaa..r").is_err());
        assert!(check_subject("aaa.t r.x").is_err());
        assert!(check_subject("other.t").is_err());
        assert!(check_filter("other.>").is_err());
    }
}

//! [`Retention`]: how much the embedded [`MemoryBus`](super::MemoryBus) keeps (trimming
//! itself is in [`log`](super::log)).

use std::time::Duration;

/// The limits of a [`MemoryBus`](super::MemoryBus)'s log, like a JetStream stream's
/// `max_msgs`, `max_age` and `duplicate_window`, with one difference: a message that a
/// durable consumer has not settled yet, or that a live replay has not read yet, is
/// never removed, whatever its age or the log's length. (A replay reads in batches, up
/// to 64 matching messages of the log at a time, which it then holds itself: a message
/// it has read and not yet handed out may leave the log, never the replay.)
///
/// Once the log holds more than [`max_messages`](Retention::with_max_messages), or its
/// oldest message is older than [`max_age`](Retention::with_max_age), the oldest
/// messages are removed as they are released, at the next publish. The log is trimmed
/// from its oldest end only: a message still held (a long-running call's request, a
/// replay stream nobody polls) keeps every newer message in the log until it is
/// released. Whatever was removed is gone for replays too ([`RunHandle::facts`]
/// starts at the oldest message kept), and a [durable consumer](crate::bus::ConsumerSpec)
/// created after a message was removed never sees it.
///
/// Publish ids are remembered for de-duplication for
/// [`duplicate_window`](Retention::with_duplicate_window), and at most `max_messages`
/// of them (the oldest are forgotten first), so a busy bus holds a bounded number of
/// ids too.
///
/// The default keeps 100 000 messages, with no age limit and a 2-minute duplicate
/// window: a bounded log (the embedded engine's memory levels off however long it runs)
/// that still holds the recent history of every run a process is likely to look at.
/// A much smaller log (a few thousand messages, with a store to match: see
/// [`MemoryStore::with_retired_limit`](aaa_guard::MemoryStore::with_retired_limit))
/// also makes a busy engine faster, as what it keeps then stays in the processor's
/// caches; that trades history for speed.
///
/// ```
/// use std::time::Duration;
/// use aaa_tools::bus::{MemoryBus, Retention};
///
/// let bus = MemoryBus::with_retention(
///     Retention::default()
///         .with_max_messages(10_000)
///         .with_max_age(Duration::from_secs(3600)),
/// );
/// assert_eq!(bus.retention().max_messages(), 10_000);
/// ```
///
/// [`RunHandle::facts`]: crate::RunHandle::facts
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    max_messages: usize,
    max_age: Option<Duration>,
    duplicate_window: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_messages: 100_000,
            max_age: None,
            duplicate_window: Duration::from_secs(120),
        }
    }
}

impl Retention {
    /// No limit on the log's length or age (the log grows for the life of the bus),
    /// and the default 2-minute duplicate window with no limit on the ids it holds.
    pub fn unlimited() -> Self {
        Retention {
            max_messages: usize::MAX,
            ..Retention::default()
        }
    }

    /// Keeps at most `max_messages` released messages (and publish ids).
    pub fn with_max_messages(mut self, max_messages: usize) -> Self {
        self.max_messages = max_messages;
        self
    }

    /// Removes released messages older than `max_age`.
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }

    /// Drops a publish whose id was seen within `window`.
    pub fn with_duplicate_window(mut self, window: Duration) -> Self {
        self.duplicate_window = window;
        self
    }

    /// The most messages kept once released.
    pub fn max_messages(&self) -> usize {
        self.max_messages
    }

    /// How old a released message may grow before it is removed (`None`: any age).
    pub fn max_age(&self) -> Option<Duration> {
        self.max_age
    }

    /// How long a publish id is remembered.
    pub fn duplicate_window(&self) -> Duration {
        self.duplicate_window
    }
}

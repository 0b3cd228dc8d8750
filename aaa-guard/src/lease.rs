//! [`LeaseWatch`]: deciding that a lease lapsed without trusting anyone's wall clock.
//!
//! The holder of a call renews its lease by rewriting the call's record every
//! `heartbeat_s`, which changes the record's revision. An observer that wants the call
//! watches the revision with its **own monotonic clock**: the lease lapsed when the
//! revision has not changed for `lease_ttl_s` of the observer's time.
//!
//! Why it is safe: the observer compares durations it measured itself, so clock skew
//! between machines, wall-clock jumps and NTP steps cannot make a live lease look
//! lapsed. A live holder renews every `heartbeat_s < lease_ttl_s`, so the observer sees
//! a new revision before its window ends. The cost of the scheme is latency, not
//! safety: an observer that starts watching late waits a full `lease_ttl_s` from its
//! first look. A holder that stalls past `lease_ttl_s` (a long GC pause, SIGSTOP)
//! loses the lease; when it resumes, its next renewal or commit fails the
//! compare-and-set and it learns it was superseded.
//!
//! A store that keeps its own clock (JetStream KV stamps every revision with the
//! server's time) lets an observer that arrives late decide sooner: the lease lapsed
//! when the store says the revision is older than `lease_ttl_s` **and** the observer
//! itself has watched it unchanged for a confirmation window longer than a heartbeat
//! ([`LeaseWatch::confirming_for`]). The second condition keeps a store outage from
//! looking like a dead holder: while the store was away nobody could renew, so the
//! store's age of the record includes the outage; a live holder renews within a
//! heartbeat once the store is back, which the observer sees before its window ends.

use std::time::Duration;

use crate::written::Revision;

/// Watches one record's revision on the observer's monotonic clock.
///
/// ```
/// use std::time::Duration;
/// use aaa_guard::LeaseWatch;
///
/// let ttl = Duration::from_secs(15);
/// let mut watch = LeaseWatch::new(ttl);
/// assert!(!watch.observe(7, Duration::from_secs(100)));
/// assert!(!watch.observe(7, Duration::from_secs(114)));
/// assert!(!watch.observe(8, Duration::from_secs(114)), "renewed: the window starts again");
/// assert!(watch.observe(8, Duration::from_secs(129)));
/// ```
#[derive(Debug, Clone)]
pub struct LeaseWatch {
    ttl: Duration,
    confirm: Duration,
    seen: Option<(Revision, Duration)>,
}

impl LeaseWatch {
    /// A watch with lease length `ttl`.
    pub fn new(ttl: Duration) -> Self {
        LeaseWatch {
            ttl,
            confirm: ttl,
            seen: None,
        }
    }

    /// Trusts the store's clock once the observer has watched an unchanged revision for
    /// `window` of its own time (the store's age alone could be an outage, not a dead
    /// holder: see [`GuardStore::age`](crate::GuardStore::age)). `window` should exceed
    /// the holder's heartbeat with room for one store round trip; it is capped at the
    /// lease length.
    ///
    /// ```
    /// use std::time::Duration;
    /// use aaa_guard::LeaseWatch;
    ///
    /// let s = Duration::from_secs;
    /// let mut watch = LeaseWatch::new(s(15)).confirming_for(s(7));
    /// // The store says the revision is 20 s old, but the observer just arrived.
    /// assert!(!watch.observe_aged(7, s(100), Some(s(20))));
    /// assert!(!watch.observe_aged(7, s(106), Some(s(26))));
    /// assert!(watch.observe_aged(7, s(107), Some(s(27))), "old by the store, unchanged for the window");
    /// // A renewal starts everything again, whatever the store's clock says.
    /// assert!(!watch.observe_aged(8, s(108), Some(s(0))));
    /// ```
    pub fn confirming_for(mut self, window: Duration) -> Self {
        self.confirm = window.min(self.ttl);
        self
    }

    /// Like [`observe`](Self::observe), with the store's own age of the revision when
    /// the store keeps a clock: the lease also lapsed when that age reached the lease
    /// length and the observer watched the revision unchanged for the confirmation
    /// window.
    pub fn observe_aged(
        &mut self,
        revision: Revision,
        now: Duration,
        age: Option<Duration>,
    ) -> bool {
        let lapsed = self.observe(revision, now);
        let watched = match self.seen {
            Some((_, since)) => now.saturating_sub(since),
            None => Duration::ZERO,
        };
        lapsed || age.is_some_and(|age| age >= self.ttl && watched >= self.confirm)
    }

    /// Records that the record is at `revision` at monotonic time `now` (any fixed
    /// origin); returns whether the lease lapsed.
    pub fn observe(&mut self, revision: Revision, now: Duration) -> bool {
        match self.seen {
            Some((seen, since)) if seen == revision => now.saturating_sub(since) >= self.ttl,
            _ => {
                self.seen = Some((revision, now));
                false
            }
        }
    }

    /// How long until the lease lapses if the revision does not change.
    pub fn remaining(&self, now: Duration) -> Duration {
        match self.seen {
            Some((_, since)) => self.ttl.saturating_sub(now.saturating_sub(since)),
            None => self.ttl,
        }
    }
}

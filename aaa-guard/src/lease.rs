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

use std::time::Duration;

use crate::store::Revision;

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
    seen: Option<(Revision, Duration)>,
}

impl LeaseWatch {
    /// A watch with lease length `ttl`.
    pub fn new(ttl: Duration) -> Self {
        LeaseWatch { ttl, seen: None }
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

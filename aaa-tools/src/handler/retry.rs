//! [`RetryPolicy`]: retrying the recording and publishing of outcomes.

use std::future::Future;
use std::time::Duration;

use rand::Rng;

use crate::bus::BusError;

/// Exponential backoff with full jitter for transient bus and store errors while an
/// outcome is recorded and published. A request is acknowledged only after its outcome
/// is published; when every attempt fails, the request is left for redelivery.
///
/// Defaults: 6 attempts, 50 ms first backoff, doubling, capped at 2 s.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in total (at least 1).
    pub max_attempts: u32,
    /// The backoff before the second attempt.
    pub initial_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
    /// How the backoff grows.
    pub multiplier: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            multiplier: 2.0,
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// Sets the number of attempts.
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Sets the first backoff.
    pub fn with_initial_backoff(mut self, backoff: Duration) -> Self {
        self.initial_backoff = backoff;
        self
    }

    /// Sets the longest backoff.
    pub fn with_max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = backoff;
        self
    }

    /// The backoff ceiling before attempt `attempt` (2 = the first retry).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(2).min(30) as i32;
        let secs = self.initial_backoff.as_secs_f64() * self.multiplier.max(1.0).powi(exponent);
        Duration::try_from_secs_f64(secs)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }

    /// Runs `op` until it succeeds, fails with a non-transient error, or the attempts
    /// run out.
    pub async fn run<T, F, Fut>(&self, mut op: F) -> Result<T, BusError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, BusError>>,
    {
        let mut attempt = 1;
        loop {
            match op().await {
                Ok(value) => return Ok(value),
                Err(error) if error.is_transient() && attempt < self.max_attempts.max(1) => {
                    attempt += 1;
                    let ceiling = self.backoff(attempt);
                    let jittered = ceiling.mul_f64(rand::rng().random_range(0.0..=1.0));
                    tracing::warn!(%error, attempt, "retrying after a transient bus error");
                    tokio::time::sleep(jittered).await;
                }
                Err(error) => return Err(error),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn backoff_grows_and_caps() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(2), Duration::from_millis(50));
        assert_eq!(p.backoff(3), Duration::from_millis(100));
        assert_eq!(p.backoff(20), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried_until_success() {
        let calls = AtomicU32::new(0);
        let out = RetryPolicy::default()
            .run(|| async {
                if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                    Err(BusError::Unavailable("down".into()))
                } else {
                    Ok(7)
                }
            })
            .await
            .unwrap();
        assert_eq!((out, calls.load(Ordering::SeqCst)), (7, 4));

        let calls = AtomicU32::new(0);
        let err = RetryPolicy::default()
            .with_max_attempts(2)
            .run(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(BusError::Unavailable("down".into()))
            })
            .await
            .unwrap_err();
        assert!(err.is_transient());
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        let calls = AtomicU32::new(0);
        RetryPolicy::default()
            .run(|| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(BusError::Closed)
            })
            .await
            .unwrap_err();
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "permanent errors are not retried"
        );
    }
}

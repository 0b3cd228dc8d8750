//! [`RetryPolicy`]: when a client asks again, and how long it waits first.
//!
//! What is retried is decided in one place ([`retryable_status`]): 429 (unless the
//! provider says the quota is used up), 408 and every 5xx, plus a request that timed
//! out or never reached the server. Any other 4xx is the caller's mistake (a bad key,
//! a bad request, a model that does not exist): asking again gives the same answer,
//! so it is returned at once.
//!
//! The wait before retry `n` (from 0) is the provider's `Retry-After` when it sent one
//! (`retry-after-ms`, then `Retry-After` in seconds or as an HTTP-date), or the
//! `RetryInfo.retryDelay` a Google API puts in its error body instead, else
//! `initial_backoff * 2^n`, capped at `max_backoff`, less up to a quarter at random
//! so that clients that failed together do not come back together. A `Retry-After`
//! longer than [`max_retry_after`](RetryPolicy::max_retry_after) is not waited out:
//! the error is returned, saying how long the provider asked for.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// How a client retries a model request that failed for a reason that may pass: how
/// often, and how long it waits in between.
///
/// ```
/// use std::time::Duration;
/// use aaa_loop::http::RetryPolicy;
///
/// let policy = RetryPolicy::default()
///     .with_max_retries(4)
///     .with_backoff(Duration::from_millis(250), Duration::from_secs(4));
/// assert_eq!(policy.max_retries, 4);
/// assert_eq!(RetryPolicy::none().max_retries, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// How many times a request is sent again after the first attempt (2 by default,
    /// as in OpenAI's and Anthropic's own SDKs); 0 never retries.
    pub max_retries: u32,
    /// The wait before the first retry when the provider did not say (500 ms).
    pub initial_backoff: Duration,
    /// The longest computed wait (8 s); a `Retry-After` is not capped by it.
    pub max_backoff: Duration,
    /// The longest `Retry-After` the client waits out (60 s); a provider that asks
    /// for longer gets no retry, and the error says what it asked.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy::default().with_max_retries(0)
    }

    /// Sets [`max_retries`](Self::max_retries).
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets [`initial_backoff`](Self::initial_backoff) and
    /// [`max_backoff`](Self::max_backoff).
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// Sets [`max_retry_after`](Self::max_retry_after).
    pub fn with_max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = max;
        self
    }

    /// The wait before retry `retry` (from 0): the provider's `asked`, or the backoff.
    /// `Err` with what the provider asked when that is more than the policy waits.
    pub(crate) fn wait(&self, retry: u32, asked: Option<Duration>) -> Result<Duration, Duration> {
        match asked {
            Some(asked) if asked > self.max_retry_after => Err(asked),
            Some(asked) => Ok(asked),
            None => Ok(self.backoff(retry, rand::random::<f64>())),
        }
    }

    /// `initial_backoff * 2^retry`, capped at `max_backoff`, less `jitter` (in
    /// `[0, 1)`) times a quarter of it.
    fn backoff(&self, retry: u32, jitter: f64) -> Duration {
        let full = self
            .initial_backoff
            .saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
            .min(self.max_backoff);
        full.mul_f64(1.0 - 0.25 * jitter.clamp(0.0, 1.0))
    }
}

/// Whether a response with `status` may succeed when asked again. `body_code` is the
/// provider's error type or code, when its body had one.
pub(crate) fn retryable_status(status: StatusCode, body_code: Option<&str>) -> bool {
    match status.as_u16() {
        // A used-up quota (OpenAI answers it with 429) does not come back by waiting.
        429 => body_code != Some("insufficient_quota"),
        408 | 500..=599 => true,
        _ => false,
    }
}

/// How long the provider asked the client to wait: OpenAI's `retry-after-ms`, else
/// `Retry-After` as seconds or as an HTTP-date (a date in the past is no wait).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(millis) = text("retry-after-ms").and_then(seconds) {
        return Some(millis / 1000);
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Some(wait) = seconds(value) {
        return Some(wait);
    }
    let at = httpdate::parse_http_date(value.trim()).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// How long a Google API's error body asks the client to wait: the `retryDelay` of a
/// `google.rpc.RetryInfo` among `error.details` (a protobuf duration, `"7s"` or
/// `"0.5s"`), as Gemini sends it with a 429 instead of a `Retry-After` header.
pub(crate) fn retry_delay_in_body(body: &[u8]) -> Option<Duration> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    let details = json.get("error")?.get("details")?.as_array()?;
    let info = details.iter().find(|detail| {
        detail
            .get("@type")
            .and_then(|kind| kind.as_str())
            .is_some_and(|kind| kind.ends_with("google.rpc.RetryInfo"))
    })?;
    seconds(info.get("retryDelay")?.as_str()?.strip_suffix('s')?)
}

/// A non-negative number (`"2"`, `"1.5"`) as that many seconds.
fn seconds(text: &str) -> Option<Duration> {
    let number: f64 = text.trim().parse().ok()?;
    Duration::try_from_secs_f64(number).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn a_google_retry_delay_is_read_from_the_error_body() {
        let body = |delay: &str| {
            serde_json::json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
                {"@type": "type.googleapis.com/google.rpc.Help", "links": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
            ]}})
            .to_string()
        };
        let delay = |text: &str| retry_delay_in_body(body(text).as_bytes());
        assert_eq!(delay("7s"), Some(Duration::from_secs(7)));
        assert_eq!(delay("0.250s"), Some(Duration::from_millis(250)));
        assert_eq!(delay("7"), None, "a protobuf duration ends in `s`");
        assert_eq!(delay("-1s"), None);
        assert_eq!(delay("soon"), None);
        assert_eq!(retry_delay_in_body(br#"{"error": {"message": "x"}}"#), None);
        assert_eq!(retry_delay_in_body(b"not json"), None);
    }

    #[test]
    fn retry_after_reads_seconds_dates_and_milliseconds() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2026 07:28:00 GMT").unwrap();
        let at = |pairs| retry_after(&headers(pairs), now);
        assert_eq!(at(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
        assert_eq!(
            at(&[("retry-after", " 1.5 ")]),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            at(&[("retry-after", "Wed, 21 Oct 2026 07:28:30 GMT")]),
            Some(Duration::from_secs(30))
        );
        // The obsolete RFC 850 and asctime forms are HTTP-dates too.
        assert_eq!(
            at(&[("retry-after", "Wednesday, 21-Oct-26 07:29:00 GMT")]),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            at(&[("retry-after", "Wed Oct 21 07:28:10 2026")]),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            at(&[("retry-after", "Wed, 21 Oct 2026 07:00:00 GMT")]),
            Some(Duration::ZERO)
        );
        assert_eq!(
            at(&[("retry-after-ms", "250"), ("retry-after", "9")]),
            Some(Duration::from_millis(250))
        );
        assert_eq!(at(&[("retry-after", "soon")]), None);
        assert_eq!(at(&[("retry-after", "-3")]), None);
        assert_eq!(at(&[]), None);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_less_jitter() {
        let policy = RetryPolicy::default();
        let full: Vec<_> = (0..6).map(|n| policy.backoff(n, 0.0)).collect();
        assert_eq!(
            full,
            [500, 1000, 2000, 4000, 8000, 8000].map(Duration::from_millis)
        );
        assert_eq!(policy.backoff(1, 1.0), Duration::from_millis(750));
        assert_eq!(policy.backoff(200, 0.0), Duration::from_secs(8));
        for _ in 0..100 {
            let wait = policy.wait(0, None).unwrap();
            assert!(wait > Duration::from_millis(374) && wait <= Duration::from_millis(500));
        }
    }

    #[test]
    fn a_retry_after_is_taken_as_asked_unless_too_long() {
        let policy = RetryPolicy::default().with_max_retry_after(Duration::from_secs(10));
        assert_eq!(
            policy.wait(3, Some(Duration::from_secs(10))),
            Ok(Duration::from_secs(10))
        );
        assert_eq!(
            policy.wait(0, Some(Duration::from_secs(11))),
            Err(Duration::from_secs(11))
        );
    }

    #[test]
    fn only_429_408_and_5xx_are_retried() {
        let retried = |code: u16, body: Option<&str>| {
            retryable_status(StatusCode::from_u16(code).unwrap(), body)
        };
        assert!(retried(429, Some("rate_limit_exceeded")));
        assert!(!retried(429, Some("insufficient_quota")));
        assert!(retried(408, None) && retried(500, None) && retried(529, None));
        for code in [400, 401, 403, 404, 409, 413, 422] {
            assert!(!retried(code, None), "{code}");
        }
    }
}

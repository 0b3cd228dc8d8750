//! Guard configuration: defaults, per-tool overrides and validation.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How often a logical call may run its tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// A lost attempt is run again, up to [`GuardConfig::max_attempts`] executions in
    /// total; the tool must tolerate repeats (its idempotency key is stable across them).
    #[default]
    AtLeastOnce,
    /// Once an attempt has started the call is never started again: a lost attempt
    /// becomes an `outcome_unknown` failure for a human to reconcile.
    AtMostOnce,
}

impl Delivery {
    /// The wire name: `"at_least_once"` or `"at_most_once"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Delivery::AtLeastOnce => "at_least_once",
            Delivery::AtMostOnce => "at_most_once",
        }
    }
}

impl fmt::Display for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Delivery {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "at_least_once" => Ok(Delivery::AtLeastOnce),
            "at_most_once" => Ok(Delivery::AtMostOnce),
            other => Err(ConfigError::UnknownVariant {
                field: "delivery",
                got: other.to_owned(),
                expected: "\"at_least_once\" or \"at_most_once\"",
            }),
        }
    }
}

/// What a worker does with a running tool once it learns that its lease was lost
/// (another worker took the call over).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LostLease {
    /// Cancel the tool and record nothing. The default: a worker that no longer owns a
    /// call stops producing side effects for it as soon as it knows.
    #[default]
    Cancel,
    /// Let the tool run to completion; its result is still fenced, so it is committed only
    /// if no newer attempt has started.
    Finish,
}

impl LostLease {
    /// The wire name: `"cancel"` or `"finish"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            LostLease::Cancel => "cancel",
            LostLease::Finish => "finish",
        }
    }
}

impl fmt::Display for LostLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for LostLease {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cancel" => Ok(LostLease::Cancel),
            "finish" => Ok(LostLease::Finish),
            other => Err(ConfigError::UnknownVariant {
                field: "lost_lease",
                got: other.to_owned(),
                expected: "\"cancel\" or \"finish\"",
            }),
        }
    }
}

/// An invalid guard setting. The message names the field and the bound it broke.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A number outside its allowed range.
    #[error("guard config: `{field}` must be {bound} (got {got})")]
    OutOfRange {
        /// The field's name, as in the attribute and the serde form.
        field: &'static str,
        /// The bound, e.g. `> 0` or `>= 1`.
        bound: &'static str,
        /// The value that was given.
        got: String,
    },
    /// A name that is not one of an enum's variants.
    #[error("guard config: `{field}` must be {expected} (got {got:?})")]
    UnknownVariant {
        /// The field's name.
        field: &'static str,
        /// What was given.
        got: String,
        /// The accepted names.
        expected: &'static str,
    },
}

/// The guard's settings for one tool (a handler default merged with the tool's
/// overrides).
///
/// Serialized in snake_case with every field optional on input (missing fields take the
/// defaults below). Build one with struct update syntax or the `with_*` setters and call
/// [`validate`](Self::validate) (the handler does it for you):
///
/// | field | default | bound |
/// |---|---|---|
/// | `enabled` | `true` | |
/// | `max_attempts` | `3` | `>= 1` |
/// | `lease_ttl_s` | `15.0` | `> 0`, finite |
/// | `heartbeat_s` | `None` (= `lease_ttl_s / 3`) | `> 0` and `< lease_ttl_s` |
/// | `wait_poll_s` | `0.5` | `> 0`, finite |
/// | `fence_results` | `true` | |
/// | `delivery` | `at_least_once` | |
/// | `lost_lease` | `cancel` | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct GuardConfig {
    /// `false` turns the guard off: no lease and no attempt records. The bus still
    /// redelivers a request lost with its worker, so a tool can then run twice and
    /// nothing detects it.
    pub enabled: bool,
    /// Executions allowed in total under `at_least_once` before the call fails as
    /// `abandoned`.
    pub max_attempts: u32,
    /// Length of the execution lease, in seconds.
    pub lease_ttl_s: f64,
    /// Interval of lease renewals, in seconds; `None` means `lease_ttl_s / 3`.
    pub heartbeat_s: Option<f64>,
    /// How often a worker that finds the call leased by a live holder re-checks it.
    pub wait_poll_s: f64,
    /// Commit results by compare-and-set on the fence and audit superseded ones as
    /// `aaa.tool.stale_result`.
    pub fence_results: bool,
    /// The delivery policy when the tool does not set its own.
    pub delivery: Delivery,
    /// What happens to a running tool whose lease was lost.
    pub lost_lease: LostLease,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            enabled: true,
            max_attempts: 3,
            lease_ttl_s: 15.0,
            heartbeat_s: None,
            wait_poll_s: 0.5,
            fence_results: true,
            delivery: Delivery::AtLeastOnce,
            lost_lease: LostLease::Cancel,
        }
    }
}

/// Per-tool overrides of a [`GuardConfig`]: every field left `None` inherits the
/// handler's value.
///
/// This is what `#[tool(delivery = "...", guard(...))]` produces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct GuardOverrides {
    /// Overrides [`GuardConfig::enabled`].
    pub enabled: Option<bool>,
    /// Overrides [`GuardConfig::max_attempts`].
    pub max_attempts: Option<u32>,
    /// Overrides [`GuardConfig::lease_ttl_s`].
    pub lease_ttl_s: Option<f64>,
    /// Overrides [`GuardConfig::heartbeat_s`].
    pub heartbeat_s: Option<f64>,
    /// Overrides [`GuardConfig::wait_poll_s`].
    pub wait_poll_s: Option<f64>,
    /// Overrides [`GuardConfig::fence_results`].
    pub fence_results: Option<bool>,
    /// Overrides [`GuardConfig::delivery`].
    pub delivery: Option<Delivery>,
    /// Overrides [`GuardConfig::lost_lease`].
    pub lost_lease: Option<LostLease>,
}

impl GuardOverrides {
    /// `true` when nothing is overridden.
    pub fn is_empty(&self) -> bool {
        *self == GuardOverrides::default()
    }

    /// Overrides [`GuardConfig::enabled`].
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = Some(enabled);
        self
    }

    /// Overrides [`GuardConfig::max_attempts`].
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }

    /// Overrides [`GuardConfig::lease_ttl_s`].
    pub fn with_lease_ttl_s(mut self, lease_ttl_s: f64) -> Self {
        self.lease_ttl_s = Some(lease_ttl_s);
        self
    }

    /// Overrides [`GuardConfig::heartbeat_s`].
    pub fn with_heartbeat_s(mut self, heartbeat_s: f64) -> Self {
        self.heartbeat_s = Some(heartbeat_s);
        self
    }

    /// Overrides [`GuardConfig::wait_poll_s`].
    pub fn with_wait_poll_s(mut self, wait_poll_s: f64) -> Self {
        self.wait_poll_s = Some(wait_poll_s);
        self
    }

    /// Overrides [`GuardConfig::fence_results`].
    pub fn with_fence_results(mut self, fence_results: bool) -> Self {
        self.fence_results = Some(fence_results);
        self
    }

    /// Overrides [`GuardConfig::delivery`].
    pub fn with_delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = Some(delivery);
        self
    }

    /// Overrides [`GuardConfig::lost_lease`].
    pub fn with_lost_lease(mut self, lost_lease: LostLease) -> Self {
        self.lost_lease = Some(lost_lease);
        self
    }
}

fn positive(field: &'static str, value: f64) -> Result<(), ConfigError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            field,
            bound: "> 0",
            got: value.to_string(),
        })
    }
}

impl GuardConfig {
    /// Checks every bound of the table above.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_attempts < 1 {
            return Err(ConfigError::OutOfRange {
                field: "max_attempts",
                bound: ">= 1",
                got: self.max_attempts.to_string(),
            });
        }
        positive("lease_ttl_s", self.lease_ttl_s)?;
        if let Some(heartbeat) = self.heartbeat_s {
            positive("heartbeat_s", heartbeat)?;
            if heartbeat >= self.lease_ttl_s {
                return Err(ConfigError::OutOfRange {
                    field: "heartbeat_s",
                    bound: "< lease_ttl_s",
                    got: heartbeat.to_string(),
                });
            }
        }
        positive("wait_poll_s", self.wait_poll_s)?;
        Ok(())
    }

    /// Applies `overrides` on top of `self` and validates the result.
    pub fn merged(&self, overrides: &GuardOverrides) -> Result<GuardConfig, ConfigError> {
        let merged = GuardConfig {
            enabled: overrides.enabled.unwrap_or(self.enabled),
            max_attempts: overrides.max_attempts.unwrap_or(self.max_attempts),
            lease_ttl_s: overrides.lease_ttl_s.unwrap_or(self.lease_ttl_s),
            heartbeat_s: overrides.heartbeat_s.or(self.heartbeat_s),
            wait_poll_s: overrides.wait_poll_s.unwrap_or(self.wait_poll_s),
            fence_results: overrides.fence_results.unwrap_or(self.fence_results),
            delivery: overrides.delivery.unwrap_or(self.delivery),
            lost_lease: overrides.lost_lease.unwrap_or(self.lost_lease),
        };
        merged.validate()?;
        Ok(merged)
    }

    /// The lease length.
    ///
    /// Assumes a validated config; an invalid `lease_ttl_s` gives a zero duration
    /// rather than a panic.
    pub fn lease_ttl(&self) -> Duration {
        Duration::try_from_secs_f64(self.lease_ttl_s).unwrap_or_default()
    }

    /// The renewal interval: `heartbeat_s`, or `lease_ttl_s / 3` when unset.
    pub fn heartbeat(&self) -> Duration {
        let secs = self.heartbeat_s.unwrap_or(self.lease_ttl_s / 3.0);
        Duration::try_from_secs_f64(secs).unwrap_or_default()
    }

    /// The re-check interval of a worker waiting on a live lease holder.
    pub fn wait_poll(&self) -> Duration {
        Duration::try_from_secs_f64(self.wait_poll_s).unwrap_or_default()
    }

    /// Sets [`enabled`](Self::enabled).
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Sets [`max_attempts`](Self::max_attempts).
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Sets [`lease_ttl_s`](Self::lease_ttl_s).
    pub fn with_lease_ttl_s(mut self, lease_ttl_s: f64) -> Self {
        self.lease_ttl_s = lease_ttl_s;
        self
    }

    /// Sets [`heartbeat_s`](Self::heartbeat_s).
    pub fn with_heartbeat_s(mut self, heartbeat_s: f64) -> Self {
        self.heartbeat_s = Some(heartbeat_s);
        self
    }

    /// Sets [`wait_poll_s`](Self::wait_poll_s).
    pub fn with_wait_poll_s(mut self, wait_poll_s: f64) -> Self {
        self.wait_poll_s = wait_poll_s;
        self
    }

    /// Sets [`fence_results`](Self::fence_results).
    pub fn with_fence_results(mut self, fence_results: bool) -> Self {
        self.fence_results = fence_results;
        self
    }

    /// Sets [`delivery`](Self::delivery).
    pub fn with_delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// Sets [`lost_lease`](Self::lost_lease).
    pub fn with_lost_lease(mut self, lost_lease: LostLease) -> Self {
        self.lost_lease = lost_lease;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_spec() {
        let c = GuardConfig::default();
        assert!(c.enabled);
        assert_eq!(c.max_attempts, 3);
        assert_eq!(c.lease_ttl_s, 15.0);
        assert_eq!(c.heartbeat_s, None);
        assert_eq!(c.heartbeat(), Duration::from_secs(5));
        assert_eq!(c.wait_poll(), Duration::from_millis(500));
        assert!(c.fence_results);
        assert_eq!(c.delivery, Delivery::AtLeastOnce);
        assert_eq!(c.lost_lease, LostLease::Cancel);
        c.validate().unwrap();
    }

    #[test]
    fn each_bound_names_its_field() {
        let base = GuardConfig::default();
        let cases = [
            (
                base.clone().with_max_attempts(0),
                "`max_attempts` must be >= 1 (got 0)",
            ),
            (
                base.clone().with_lease_ttl_s(-1.0),
                "`lease_ttl_s` must be > 0 (got -1)",
            ),
            (
                base.clone().with_lease_ttl_s(f64::NAN),
                "`lease_ttl_s` must be > 0 (got NaN)",
            ),
            (
                base.clone().with_heartbeat_s(0.0),
                "`heartbeat_s` must be > 0 (got 0)",
            ),
            (
                base.clone().with_heartbeat_s(15.0),
                "`heartbeat_s` must be < lease_ttl_s (got 15)",
            ),
            (
                base.clone().with_wait_poll_s(f64::INFINITY),
                "`wait_poll_s` must be > 0 (got inf)",
            ),
        ];
        for (config, message) in cases {
            let err = config.validate().unwrap_err().to_string();
            assert!(err.ends_with(message), "{err} should end with {message}");
        }
    }

    #[test]
    fn merged_applies_overrides_and_validates() {
        let base = GuardConfig::default();
        let merged = base
            .merged(
                &GuardOverrides::default()
                    .with_max_attempts(5)
                    .with_lease_ttl_s(3.0)
                    .with_lost_lease(LostLease::Finish),
            )
            .unwrap();
        assert_eq!(merged.max_attempts, 5);
        assert_eq!(merged.heartbeat(), Duration::from_secs(1));
        assert_eq!(merged.lost_lease, LostLease::Finish);
        assert_eq!(merged.wait_poll_s, base.wait_poll_s);

        // The base heartbeat is fine for the base lease but not for a shorter one.
        let err = base
            .with_heartbeat_s(5.0)
            .merged(&GuardOverrides::default().with_lease_ttl_s(2.0))
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::OutOfRange {
                field: "heartbeat_s",
                ..
            }
        ));
    }

    #[test]
    fn serde_is_snake_case_with_defaults() {
        let c: GuardConfig =
            serde_json::from_str(r#"{"delivery":"at_most_once","lost_lease":"finish"}"#).unwrap();
        assert_eq!(c.delivery, Delivery::AtMostOnce);
        assert_eq!(c.lost_lease, LostLease::Finish);
        assert_eq!(c.max_attempts, 3);
        let json = serde_json::to_value(GuardConfig::default()).unwrap();
        assert_eq!(json["delivery"], "at_least_once");
        assert_eq!(json["lost_lease"], "cancel");
        let err = serde_json::from_str::<GuardConfig>(r#"{"max_attempt":1}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `max_attempt`"),
            "{err}"
        );
        assert_eq!(
            "at_most_once".parse::<Delivery>().unwrap(),
            Delivery::AtMostOnce
        );
        assert!("exactly_once".parse::<Delivery>().is_err());
    }
}

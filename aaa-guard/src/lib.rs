//! The stalled-worker guard of aaa-tools.
//!
//! A tool call that is delivered to a worker can be lost with that worker (a crash, a
//! stall, a network partition) or delivered twice (a redelivery after an ack deadline).
//! The guard decides, per logical call, whether a delivery may run the tool, and with
//! which attempt number (the *fence*) its result may be committed.
//!
//! This crate holds the guard's vocabulary, usable without any runtime:
//!
//! - [`GuardConfig`]: the settings of the guard (lease length, heartbeat, attempt cap,
//!   delivery policy, ...), with the defaults of the specification and validation that
//!   names the field and the bound it broke.
//! - [`GuardOverrides`]: the per-tool subset a `#[tool(guard(...))]` attribute sets;
//!   [`GuardConfig::merged`] applies it and validates the result.
//! - [`Delivery`]: `at_least_once` or `at_most_once`.
//! - [`LostLease`]: what a worker does with a running tool whose lease it lost.
//! - [`CallRecord`] and [`OnDelivery`]: the per-call state machine, as plain functions
//!   (no bus, no runtime); [`LeaseWatch`]: lease lapse decided on the observer's own
//!   monotonic clock.
//! - [`GuardStore`] and [`MemoryStore`]: the record store with compare-and-set that guard
//!   records, pending approvals and budgets live in. Every operation names the
//!   [`RecordKind`] of its record (the guard's call records, or the handler's other
//!   records): two key spaces, which a store may keep in different places, and never
//!   tells apart by key. [`OutcomeLog`]: a store whose call records share a log with
//!   the calls' outcomes, so an outcome is committed and published in one conditional
//!   write.
//! - [`StoreFuture`]: the future of a store operation, which is its answer itself when
//!   the store has it at once (the in-process one always does).
//!
//! Most users never depend on this crate directly: `aaa-tools` re-exports these types.
//!
//! ```
//! use aaa_guard::{Delivery, GuardConfig, GuardOverrides};
//!
//! let handler_default = GuardConfig::default();
//! assert_eq!(handler_default.max_attempts, 3);
//! assert_eq!(handler_default.heartbeat().as_secs_f64(), 5.0); // lease_ttl_s / 3
//!
//! let for_payments = handler_default
//!     .merged(&GuardOverrides::default().with_delivery(Delivery::AtMostOnce))
//!     .unwrap();
//! assert_eq!(for_payments.delivery, Delivery::AtMostOnce);
//!
//! let err = GuardConfig::default().with_lease_ttl_s(0.0).validate().unwrap_err();
//! assert_eq!(err.to_string(), "guard config: `lease_ttl_s` must be > 0 (got 0)");
//! ```

mod config;
mod lease;
mod memory_store;
mod outcome_log;
mod record;
mod store;
mod store_future;
mod written;

pub use config::{ConfigError, Delivery, GuardConfig, GuardOverrides, LostLease};
pub use lease::LeaseWatch;
pub use memory_store::MemoryStore;
pub use outcome_log::{Committed, OutcomeFact, OutcomeLog};
pub use record::{CallRecord, CallState, OnDelivery, RecordedOutcome};
pub use store::{GuardStore, RecordKind, check_key};
pub use store_future::StoreFuture;
pub use written::{Entry, Revision, StoreError};

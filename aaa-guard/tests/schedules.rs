//! Property test: random schedules of deliveries, crashes, stalls and resumes across
//! several workers, driven through the guard's state machine exactly as a worker drives
//! it (read, decide, one compare-and-set), against a store with revisions.
//!
//! Invariants checked on every schedule:
//! - at most one execution under `at_most_once`, at most `max_attempts` under
//!   `at_least_once`;
//! - no committed result from a superseded attempt;
//! - every call ends with exactly one outcome.

use std::time::Duration;

use aaa_guard::{
    CallRecord, CallState, Delivery, LeaseWatch, OnDelivery, RecordedOutcome, Revision,
};
use proptest::prelude::*;
use serde_json::Value;

const TTL: Duration = Duration::from_secs(15);
const HEARTBEAT: Duration = Duration::from_secs(5);

/// A one-record store with compare-and-set.
#[derive(Default)]
struct Store {
    record: Option<(CallRecord, Revision)>,
    last: Revision,
}

impl Store {
    fn cas(&mut self, expected: Option<Revision>, next: CallRecord) -> Option<Revision> {
        if self.record.as_ref().map(|(_, r)| *r) != expected {
            return None;
        }
        self.last += 1;
        self.record = Some((next, self.last));
        Some(self.last)
    }
}

#[derive(Clone, Debug)]
enum Worker {
    Idle,
    /// Holds a delivery and watches a live holder.
    Waiting(LeaseWatch),
    /// Runs `attempt`; renews while not stalled.
    Running {
        attempt: u32,
        stalled: bool,
    },
    Crashed,
}

#[derive(Clone, Debug)]
enum Step {
    Deliver(usize),
    Advance(u8),
    Crash(usize),
    Stall(usize),
    Resume(usize),
    Finish(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..4usize).prop_map(Step::Deliver),
        (1..12u8).prop_map(Step::Advance),
        (0..4usize).prop_map(Step::Crash),
        (0..4usize).prop_map(Step::Stall),
        (0..4usize).prop_map(Step::Resume),
        (0..4usize).prop_map(Step::Finish),
    ]
}

struct Sim {
    store: Store,
    workers: Vec<Worker>,
    now: Duration,
    executions: u32,
    outcomes: u32,
    delivery: Delivery,
    max_attempts: u32,
}

impl Sim {
    fn new(delivery: Delivery, max_attempts: u32) -> Self {
        Sim {
            store: Store::default(),
            workers: vec![Worker::Idle; 4],
            now: Duration::ZERO,
            executions: 0,
            outcomes: 0,
            delivery,
            max_attempts,
        }
    }

    fn outcome(kind: &str) -> RecordedOutcome {
        RecordedOutcome::new(kind, &Value::Null).expect("null is JSON")
    }

    /// One look at the record by worker `w` holding a delivery (what `claim` does).
    fn look(&mut self, w: usize, mut watch: LeaseWatch) {
        let current = self.store.record.clone();
        let lapsed = current
            .as_ref()
            .is_some_and(|(_, rev)| watch.observe(*rev, self.now));
        let name = format!("w{w}");
        match CallRecord::on_delivery(current.as_ref().map(|(r, _)| r), lapsed) {
            OnDelivery::Start => {
                let record =
                    CallRecord::start("tool", name.as_str(), self.delivery, self.max_attempts);
                if self.store.cas(None, record).is_some() {
                    self.executions += 1;
                    self.workers[w] = Worker::Running {
                        attempt: 1,
                        stalled: false,
                    };
                }
            }
            OnDelivery::Wait => self.workers[w] = Worker::Waiting(watch),
            OnDelivery::TakeOver { next } => {
                let (old, rev) = current.expect("a record");
                if self
                    .store
                    .cas(Some(rev), old.taken_over(name.as_str()))
                    .is_some()
                {
                    self.executions += 1;
                    self.workers[w] = Worker::Running {
                        attempt: next,
                        stalled: false,
                    };
                }
            }
            OnDelivery::Abandon | OnDelivery::OutcomeUnknown => {
                let (old, rev) = current.expect("a record");
                let next = if old.delivery == Delivery::AtLeastOnce {
                    old.finished(Self::outcome("abandoned"))
                } else {
                    old.unknown(Self::outcome("outcome_unknown"))
                };
                if self.store.cas(Some(rev), next).is_some() {
                    self.outcomes += 1;
                }
                self.workers[w] = Worker::Idle;
            }
            OnDelivery::Finished { .. } => self.workers[w] = Worker::Idle,
        }
    }

    fn apply(&mut self, step: Step) {
        match step {
            Step::Deliver(w) => {
                if matches!(self.workers[w], Worker::Idle | Worker::Crashed) {
                    self.look(w, LeaseWatch::new(TTL));
                }
            }
            Step::Advance(seconds) => {
                for _ in 0..seconds {
                    self.now += Duration::from_secs(1);
                    for w in 0..self.workers.len() {
                        match self.workers[w].clone() {
                            Worker::Running {
                                attempt,
                                stalled: false,
                            } if self.now.as_secs().is_multiple_of(HEARTBEAT.as_secs()) => {
                                // Renew: one CAS; losing it means a newer attempt exists.
                                let (record, rev) = self.store.record.clone().expect("a record");
                                if !record.is_held_by(attempt)
                                    || self.store.cas(Some(rev), record.renewed()).is_none()
                                {
                                    self.workers[w] = Worker::Idle; // lease lost: cancel
                                }
                            }
                            Worker::Waiting(watch) => self.look(w, watch),
                            _ => {}
                        }
                    }
                }
            }
            Step::Crash(w) => self.workers[w] = Worker::Crashed,
            Step::Stall(w) => {
                if let Worker::Running { attempt, .. } = self.workers[w] {
                    self.workers[w] = Worker::Running {
                        attempt,
                        stalled: true,
                    };
                }
            }
            Step::Resume(w) => {
                if let Worker::Running { attempt, .. } = self.workers[w] {
                    self.workers[w] = Worker::Running {
                        attempt,
                        stalled: false,
                    };
                }
            }
            Step::Finish(w) => {
                if let Worker::Running {
                    attempt,
                    stalled: false,
                } = self.workers[w]
                {
                    let (record, rev) = self.store.record.clone().expect("a record");
                    if record.accepts_result_of(attempt, true) {
                        let done = record.finished(Self::outcome("completed"));
                        assert!(self.store.cas(Some(rev), done).is_some());
                        self.outcomes += 1;
                    } else {
                        // A stale result: it must not be committed.
                        assert!(record.attempt != attempt || record.state != CallState::Running);
                    }
                    self.workers[w] = Worker::Idle;
                }
            }
        }
    }

    /// Lets the schedule end: stalled workers stay stalled, and fresh deliveries keep
    /// arriving until the call has its outcome.
    fn drain(&mut self) {
        for round in 0..200 {
            if self
                .store
                .record
                .as_ref()
                .is_some_and(|(r, _)| r.state != CallState::Running)
            {
                return;
            }
            let w = round % self.workers.len();
            match self.workers[w] {
                Worker::Running { stalled: false, .. } => self.apply(Step::Finish(w)),
                Worker::Running { stalled: true, .. } => self.apply(Step::Advance(5)),
                _ => self.apply(Step::Deliver(w)),
            }
            self.apply(Step::Advance(1));
        }
        panic!("the call never ended: {:?}", self.store.record);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn invariants_hold_on_every_schedule(
        at_most_once in any::<bool>(),
        max_attempts in 1..4u32,
        steps in proptest::collection::vec(step(), 0..60),
    ) {
        let delivery = if at_most_once { Delivery::AtMostOnce } else { Delivery::AtLeastOnce };
        let mut sim = Sim::new(delivery, max_attempts);
        for step in steps {
            sim.apply(step);
            match delivery {
                Delivery::AtMostOnce => prop_assert!(sim.executions <= 1, "ran {} times at most once", sim.executions),
                Delivery::AtLeastOnce => prop_assert!(sim.executions <= max_attempts),
            }
            prop_assert!(sim.outcomes <= 1, "two outcomes");
        }
        sim.drain();
        prop_assert_eq!(sim.outcomes, 1, "exactly one outcome");
        match delivery {
            Delivery::AtMostOnce => prop_assert!(sim.executions <= 1),
            Delivery::AtLeastOnce => prop_assert!(sim.executions <= max_attempts),
        }
        let (record, _) = sim.store.record.clone().expect("a record");
        prop_assert!(record.state != CallState::Running);
    }
}

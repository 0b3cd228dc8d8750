//! Names on the wire and in the store: the one place that derives a subject, a message
//! id, a store key or an idempotency key from a tenant, a run and a call.
//!
//! # Why one place, and why `.`
//!
//! Two different calls must never share a name: a shared outcome id makes the bus drop
//! the second call's outcome as a repeat (its caller never hears back), a shared key
//! makes two calls share a guard record. Ids are `[A-Za-z0-9_-]{1,128}` (see
//! [`RunId`]), so `-` and `_` may appear *inside* an id and cannot separate ids: run
//! `c-1` call `x` and run `c` call `1-x` would both read `c-1-x`. Every name here joins
//! its parts with `.`, which no id can hold, behind a fixed kind word; a name therefore
//! splits back into exactly the parts it was made of ([`split`] is that inverse, and
//! the tests check it over random ids), which is what makes the derivation injective:
//! distinct (kind, tenant, run, call) never give the same name.
//!
//! | what | name |
//! |---|---|
//! | an event's subject | `aaa.<tenant>.<run>.<type without "aaa.">` |
//! | an outcome fact's subject | `aaa.<tenant>.<run>.tool.completed.<call>` (or `.failed.`) |
//! | a cancel's subject | `aaa.<tenant>.<run>.tool.cancelled.<call>` |
//! | an outcome fact's message id | `outcome.<tenant>.<run>.<call>` |
//! | an approval request's message id | `approval-requested.<tenant>.<run>.<call>` |
//! | an operator's resolution's message id | `resolved.<tenant>.<run>.<call>` |
//! | a cancel's message id | `cancel.<tenant>.<run>.<call>` |
//! | a call's guard record | `guard.<tenant>.<run>.<call>` |
//! | a pending approval | `approval.<tenant>.<run>.<call>` |
//! | its timeout mark | `approval-due.<tenant>.<run>.<call>` |
//! | a run's budget | `budget.<tenant>.<run>` |
//! | a call's default idempotency key | `<tenant>/<run>/<call>` |
//!
//! Before version 0.2 message ids were joined with `-` (`outcome-<tenant>-<run>-<call>`).
//! Nothing reads a message id back (the bus compares them only to drop repeats), so an
//! engine reading a stream written by an older version understands every event in it;
//! an outcome republished across the upgrade is not recognised as a repeat, and the
//! caller keeps the first outcome it reads, as always.

use crate::event::kinds::{TOOL_CANCELLED, TOOL_COMPLETED, TOOL_FAILED};
use crate::ids::{CallId, RunId, TenantId};

/// The separator: a character no id may hold.
const SEP: &str = ".";
/// [`SEP`] as a character, to split by (a `&str` pattern takes the general substring search).
const SEP_CHAR: char = '.';

/// What a per-call name names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallName {
    /// The message id of a call's outcome fact (`aaa.tool.completed` or `.failed`).
    OutcomeId,
    /// The message id of a call's `aaa.approval.requested` fact.
    ApprovalRequestedId,
    /// The store key of a call's guard record.
    GuardKey,
    /// The store key of a call's approval record.
    ApprovalKey,
    /// The store key that marks a pending approval for the timeout sweep.
    ApprovalDueKey,
    /// The message id of an operator's `aaa.tool.resolved` fact.
    ResolvedId,
    /// The message id of a call's `aaa.tool.cancelled` fact.
    CancelId,
}

impl CallName {
    /// Every kind, for the tests.
    #[cfg(test)]
    const ALL: [CallName; 7] = [
        CallName::OutcomeId,
        CallName::ApprovalRequestedId,
        CallName::GuardKey,
        CallName::ApprovalKey,
        CallName::ApprovalDueKey,
        CallName::ResolvedId,
        CallName::CancelId,
    ];

    /// The kind word the name starts with.
    pub(crate) const fn word(self) -> &'static str {
        match self {
            CallName::OutcomeId => "outcome",
            CallName::ApprovalRequestedId => "approval-requested",
            CallName::GuardKey => "guard",
            CallName::ApprovalKey => "approval",
            CallName::ApprovalDueKey => "approval-due",
            CallName::ResolvedId => "resolved",
            CallName::CancelId => "cancel",
        }
    }

    /// The prefix shared by every name of this kind (for listing keys).
    pub(crate) fn prefix(self) -> String {
        [self.word(), SEP].concat()
    }

    /// The name of `call` of `run` of `tenant`.
    pub(crate) fn of(self, tenant: &TenantId, run: &RunId, call: &CallId) -> String {
        [
            self.word(),
            SEP,
            tenant.as_str(),
            SEP,
            run.as_str(),
            SEP,
            call.as_str(),
        ]
        .concat()
    }

    /// The tenant, run and call of a name of this kind; `None` for any other text.
    pub(crate) fn parse(self, name: &str) -> Option<(TenantId, RunId, CallId)> {
        let [word, tenant, run, call] = split::<4>(name)?;
        if word != self.word() {
            return None;
        }
        Some((
            TenantId::new(tenant).ok()?,
            RunId::new(run).ok()?,
            CallId::new(call).ok()?,
        ))
    }
}

/// The store key of a run's call budget.
pub(crate) fn budget_key(tenant: &TenantId, run: &RunId) -> String {
    ["budget", SEP, tenant.as_str(), SEP, run.as_str()].concat()
}

/// A call's default idempotency key: `<tenant>/<run>/<call>` (the tenant is part of it,
/// so two tenants' calls never share a key downstream).
pub(crate) fn idempotency_key(tenant: &TenantId, run: &RunId, call: &CallId) -> String {
    [tenant.as_str(), "/", run.as_str(), "/", call.as_str()].concat()
}

/// The subject of events of type `kind` in a run: `aaa.<tenant>.<run>.<kind without
/// "aaa.">`. Outcome facts travel on subjects of their own call:
/// [`event_subject`].
pub(crate) fn subject(tenant: &TenantId, run: &RunId, kind: &str) -> String {
    let suffix = kind.strip_prefix("aaa.").unwrap_or(kind);
    ["aaa", SEP, tenant.as_str(), SEP, run.as_str(), SEP, suffix].concat()
}

/// Whether events of type `kind` are a call's outcome (`aaa.tool.completed`,
/// `aaa.tool.failed`).
pub(crate) fn is_outcome(kind: &str) -> bool {
    kind == TOOL_COMPLETED || kind == TOOL_FAILED
}

/// Whether events of type `kind` about a call travel on a subject of their own call:
/// outcomes, and cancels (`aaa.tool.cancelled`), which workers look up by call.
fn per_call(kind: &str) -> bool {
    is_outcome(kind) || kind == TOOL_CANCELLED
}

/// The subject an event of type `kind` about `call` travels on: [`subject`], and for
/// an outcome or a cancel, the call's id as one more token
/// (`aaa.<tenant>.<run>.tool.completed.<call>`, `….tool.cancelled.<call>`).
///
/// An outcome on a subject of its own call can be looked up without reading the run:
/// a waiter that may have missed it asks the bus for the first message on
/// [`outcome_filter`], one lookup however many calls the run has had.
pub(crate) fn event_subject(
    tenant: &TenantId,
    run: &RunId,
    kind: &str,
    call: Option<&CallId>,
) -> String {
    match call {
        Some(call) if per_call(kind) => {
            let suffix = kind.strip_prefix("aaa.").unwrap_or(kind);
            [
                "aaa",
                SEP,
                tenant.as_str(),
                SEP,
                run.as_str(),
                SEP,
                suffix,
                SEP,
                call.as_str(),
            ]
            .concat()
        }
        _ => subject(tenant, run, kind),
    }
}

/// The filter matching every outcome fact of one call (completed or failed).
pub(crate) fn outcome_filter(tenant: &TenantId, run: &RunId, call: &CallId) -> String {
    let parts = [
        "aaa",
        tenant.as_str(),
        run.as_str(),
        "tool",
        "*",
        call.as_str(),
    ];
    parts.join(SEP)
}

/// The subjects of one call's outcome facts, completed and failed: where to look a
/// call's outcome up when its [`outcome_filter`] finds the call's cancel first.
pub(crate) fn outcome_subjects(tenant: &TenantId, run: &RunId, call: &CallId) -> [String; 2] {
    [TOOL_COMPLETED, TOOL_FAILED].map(|kind| event_subject(tenant, run, kind, Some(call)))
}

/// The subject of a cancel of `call`: `aaa.<tenant>.<run>.tool.cancelled.<call>`.
pub(crate) fn cancel_subject(tenant: &TenantId, run: &RunId, call: &CallId) -> String {
    event_subject(tenant, run, TOOL_CANCELLED, Some(call))
}

/// The filter matching every cancel of every tenant's runs (what a worker listens to).
pub(crate) const ALL_CANCELS: &str = "aaa.*.*.tool.cancelled.*";

/// The tenant, run and call of a cancel's subject; `None` for any other subject.
pub(crate) fn cancel_of_subject(subject: &str) -> Option<(TenantId, RunId, CallId)> {
    let [aaa, tenant, run, tool, how, call] = split::<6>(subject)?;
    if aaa != "aaa" || tool != "tool" || how != "cancelled" {
        return None;
    }
    Some((
        TenantId::new(tenant).ok()?,
        RunId::new(run).ok()?,
        CallId::new(call).ok()?,
    ))
}

/// The filters matching every outcome fact of a tenant's runs.
pub(crate) fn tenant_outcome_filters(tenant: &TenantId) -> [String; 2] {
    ["completed", "failed"].map(|how| ["aaa", tenant.as_str(), "*", "tool", how, "*"].join(SEP))
}

/// An outcome fact's subject, `aaa.<tenant>.<run>.tool.<how>.<call>` with `how`
/// `completed` or `failed`, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutcomeSubject<'a> {
    /// Where the run's token lies in the subject.
    pub(crate) run: std::ops::Range<usize>,
    /// Whether the call `completed` (else it `failed`).
    pub(crate) completed: bool,
    /// The call's token.
    pub(crate) call: &'a str,
}

impl<'a> OutcomeSubject<'a> {
    /// `subject` read as an outcome's; `None` for any other subject.
    pub(crate) fn parse(subject: &'a str) -> Option<Self> {
        let [aaa, tenant, run, tool, how, call] = split::<6>(subject)?;
        if aaa != "aaa" || tool != "tool" {
            return None;
        }
        let completed = match how {
            "completed" => true,
            "failed" => false,
            _ => return None,
        };
        let start = aaa.len() + tenant.len() + 2;
        Some(OutcomeSubject {
            run: start..start + run.len(),
            completed,
            call,
        })
    }
}

/// The filter matching every event of a run.
pub(crate) fn run_filter(tenant: &TenantId, run: &RunId) -> String {
    ["aaa", SEP, tenant.as_str(), SEP, run.as_str(), SEP, ">"].concat()
}

/// The tenant and run a subject belongs to: the authority over where a message acts,
/// whatever its attributes say. `None` for a subject outside the run layout.
pub(crate) fn run_of_subject(subject: &str) -> Option<(TenantId, RunId)> {
    let mut parts = subject.splitn(4, '.');
    let (aaa, tenant, run) = (parts.next()?, parts.next()?, parts.next()?);
    parts.next()?;
    if aaa != "aaa" {
        return None;
    }
    Some((TenantId::new(tenant).ok()?, RunId::new(run).ok()?))
}

/// Whether `subject` lies in run `run` of `tenant` (`aaa.<tenant>.<run>.<more>`):
/// [`run_of_subject`] without building ids, for the path every request takes.
pub(crate) fn in_run(subject: &str, tenant: &TenantId, run: &RunId) -> bool {
    let rest = subject
        .strip_prefix("aaa.")
        .and_then(|s| s.strip_prefix(tenant.as_str()))
        .and_then(|s| s.strip_prefix(SEP))
        .and_then(|s| s.strip_prefix(run.as_str()))
        .and_then(|s| s.strip_prefix(SEP));
    rest.is_some_and(|more| !more.is_empty())
}

/// `name` split at every separator into exactly `N` non-empty parts, or `None`.
///
/// The separators are found with `memchr` over the bytes: `str::split` with a `char`
/// took 1 060 instructions for an outcome's subject, which was split three times a
/// call, 3 180 of the 49 850 a call cost in the `per_call` bench (6.4 %).
fn split<const N: usize>(name: &str) -> Option<[&str; N]> {
    let mut out = [""; N];
    let mut dots = memchr::memchr_iter(SEP_CHAR as u8, name.as_bytes());
    let mut start = 0;
    for (at, part) in out.iter_mut().enumerate() {
        let end = if at == N - 1 {
            // The last part: the rest, with no separator left in it.
            dots.next().is_none().then_some(name.len())?
        } else {
            dots.next()?
        };
        if end == start {
            return None;
        }
        *part = &name[start..end];
        start = end + 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Ids as users make them, and the odd ones: `-` and `_` only, length 1 and 128.
    fn id() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Za-z0-9_-]{1,128}",
            "[-_]{1,8}",
            "[-_a1]{1,6}",
            "[-_]{128}",
            "[a-z]{128}",
        ]
    }

    type Tuple = (TenantId, RunId, CallId);

    fn tuple() -> impl Strategy<Value = Tuple> {
        (id(), id(), id()).prop_map(|(t, r, c)| {
            (
                TenantId::new(t).unwrap(),
                RunId::new(r).unwrap(),
                CallId::new(c).unwrap(),
            )
        })
    }

    /// Every name of a tuple, labelled by its kind, as `(label, name)`.
    fn names((t, r, c): &Tuple) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = CallName::ALL
            .iter()
            .map(|kind| (format!("{kind:?}"), kind.of(t, r, c)))
            .collect();
        out.push(("budget".into(), budget_key(t, r)));
        out.push(("idempotency".into(), idempotency_key(t, r, c)));
        for kind in crate::event::kinds::ALL_TYPES {
            out.push((kind.to_string(), subject(t, r, kind)));
        }
        out.push(("filter".into(), run_filter(t, r)));
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Every name splits back into exactly what it was made of: the derivation
        /// has a left inverse, so it is injective.
        #[test]
        fn every_name_reads_back_as_its_parts(tuple in tuple()) {
            let (t, r, c) = &tuple;
            for kind in CallName::ALL {
                let name = kind.of(t, r, c);
                prop_assert_eq!(kind.parse(&name), Some(tuple.clone()));
                for other in CallName::ALL.into_iter().filter(|o| *o != kind) {
                    prop_assert_eq!(other.parse(&name), None);
                }
            }
            for kind in crate::event::kinds::ALL_TYPES {
                let subject = subject(t, r, kind);
                prop_assert_eq!(run_of_subject(&subject), Some((t.clone(), r.clone())));
                prop_assert!(in_run(&subject, t, r));
            }
            let cancel = cancel_subject(t, r, c);
            prop_assert_eq!(cancel_of_subject(&cancel), Some(tuple.clone()));
            prop_assert!(crate::bus::subject_matches(ALL_CANCELS, &cancel));
            prop_assert!(crate::bus::subject_matches(&outcome_filter(t, r, c), &cancel));
            prop_assert_eq!(OutcomeSubject::parse(&cancel), None);
            for (kind, completed) in [(TOOL_COMPLETED, true), (TOOL_FAILED, false)] {
                let outcome = event_subject(t, r, kind, Some(c));
                let parsed = OutcomeSubject::parse(&outcome).expect("an outcome's subject");
                prop_assert_eq!(&outcome[parsed.run.clone()], r.as_str());
                prop_assert_eq!((parsed.completed, parsed.call), (completed, c.as_str()));
                // Not an outcome's: a token missing or one too many.
                let short = event_subject(t, r, kind, None);
                prop_assert_eq!(OutcomeSubject::parse(&short), None);
                let long = format!("{}.x", &*outcome);
                prop_assert_eq!(OutcomeSubject::parse(&long), None);
            }
            let idem = idempotency_key(t, r, c);
            let parts: Vec<&str> = idem.split('/').collect();
            prop_assert_eq!(parts, vec![t.as_str(), r.as_str(), c.as_str()]);
        }

        /// Distinct tuples never share a message id, a store key or a subject, for any
        /// kind: checked pairwise on ids from a tiny alphabet, where `-`-joined names
        /// collided.
        #[test]
        fn distinct_calls_never_share_a_name(a in tuple(), b in tuple()) {
            prop_assume!(a != b);
            let (na, nb) = (names(&a), names(&b));
            let same_run = a.0 == b.0 && a.1 == b.1;
            for kind in crate::event::kinds::ALL_TYPES {
                prop_assert_eq!(in_run(&subject(&a.0, &a.1, kind), &b.0, &b.1), same_run);
            }
            for (label, name) in &na {
                let same_run = a.0 == b.0 && a.1 == b.1;
                for (other_label, other) in &nb {
                    // A run's budget, filter and subjects name the run, not the call.
                    let per_run = ["budget", "filter"].contains(&label.as_str())
                        || label.starts_with("aaa.");
                    if label == other_label && per_run && same_run {
                        continue;
                    }
                    prop_assert_ne!(name, other, "{} vs {}", label, other_label);
                }
            }
        }
    }

    #[test]
    fn the_reported_collisions_are_gone() {
        let t = TenantId::default();
        let pair = |run: &str, call: &str| {
            CallName::OutcomeId.of(&t, &RunId::new(run).unwrap(), &CallId::new(call).unwrap())
        };
        assert_ne!(&*pair("c-1", "x"), &*pair("c", "1-x"));
        assert_eq!(&*pair("c-1", "x"), "outcome.default.c-1.x");
        let approval = |run: &str, call: &str| {
            CallName::ApprovalRequestedId.of(
                &t,
                &RunId::new(run).unwrap(),
                &CallId::new(call).unwrap(),
            )
        };
        assert_ne!(&*approval("d-1", "z"), &*approval("d", "1-z"));
    }

    #[test]
    fn subjects_outside_the_run_layout_name_no_run() {
        for odd in [
            "aaa.t.r",
            "aaa..r.x",
            "x.t.r.tool.requested",
            "aaa.t.r*.x",
            "",
        ] {
            assert_eq!(run_of_subject(odd), None, "{odd:?}");
        }
        assert_eq!(
            run_of_subject("aaa.evil.r-1.tool.requested"),
            Some((TenantId::new("evil").unwrap(), RunId::new("r-1").unwrap()))
        );
    }
}

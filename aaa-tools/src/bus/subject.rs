//! Subjects and filters: what a subject may hold, and the one rule by which a filter
//! matches a subject. Every bus follows it; the embedded bus matches with
//! [`subject_matches`] and nothing else.
//!
//! # The part of the [`Bus`](super::Bus) contract this carries
//!
//! - A **subject** is one or more `.`-separated tokens, each non-empty printable ASCII
//!   without `*` or `>` (`aaa.<tenant>.<run>.tool.requested`). A publish on anything
//!   else fails with [`BusError::Invalid`], before it is stored.
//! - A **filter** is a subject in which a whole token may be `*` (any one token), and
//!   the last token may be `>` (one or more tokens). A consumer, replay, listener or
//!   lookup with another filter fails with [`BusError::Invalid`].
//! - A filter **matches** a subject when their tokens pair up: `*` with any one token,
//!   `>` with the rest (at least one), anything else with itself. These are NATS's
//!   rules, so a JetStream stream filters exactly as the embedded bus does.
//!
//! A bus that keeps its own index of subjects (a database, say) answers by this rule;
//! [`subject_matches`] is public for that.

use super::BusError;

/// Whether `subject` matches the NATS-style `filter` (`*` one token, `>` the rest).
///
/// ```
/// use aaa_tools::bus::subject_matches;
///
/// assert!(subject_matches("aaa.*.*.tool.requested", "aaa.t.r.tool.requested"));
/// assert!(subject_matches("aaa.t.>", "aaa.t.r.tool.completed.c1"));
/// assert!(!subject_matches("aaa.t.>", "aaa.t"), "`>` needs a token");
/// assert!(!subject_matches("aaa.*", "aaa.t.r"), "`*` is one token");
/// ```
///
/// `>` is a wildcard only as the filter's whole last token, as the bus's checks of a
/// filter require; anywhere else it is compared as text.
///
/// Every publish and delivery of the embedded bus runs it, once per filter it holds,
/// so it reads as little of the subject as it can. A filter without `>` pairs its
/// tokens one to one with the subject's, so they are compared from the end: the tokens
/// that tell the engine's subjects apart come last (`aaa.<tenant>.<run>.tool.requested`,
/// after the long ids), and a subject of another kind is turned away at its last
/// token. A filter that ends in `>` is compared from the start. Either way a literal
/// token is compared where it must be, never scanned for, and a `*` skips to the next
/// dot with `memchr`, the well-kept vectorised byte search (a `*` usually stands for
/// a long id).
pub fn subject_matches(filter: &str, subject: &str) -> bool {
    let (filter, subject) = (filter.as_bytes(), subject.as_bytes());
    // What is left of the subject: `None` once no token is (`Some` of an empty slice
    // is one empty token, as splitting at the dots gives).
    let mut rest = Some(subject);
    match filter.strip_suffix(b">") {
        Some(head) if head.is_empty() || head.ends_with(b".") => {
            // The tokens before the `>` (none when the filter is `>` alone).
            let before = head.strip_suffix(b".").map(|head| head.split(is_dot));
            for wanted in before.into_iter().flatten() {
                let Some(left) = rest else { return false };
                rest = match wanted {
                    b"*" => memchr::memchr(b'.', left).map(|dot| &left[dot + 1..]),
                    literal => match (left.strip_prefix(literal), left.get(literal.len())) {
                        (None, _) => return false,
                        (Some(_), None) => None,
                        (Some(_), Some(b'.')) => Some(&left[literal.len() + 1..]),
                        (Some(_), Some(_)) => return false,
                    },
                };
            }
            // `>` takes the rest: one token at least.
            rest.is_some()
        }
        _ => {
            for wanted in filter.rsplit(is_dot) {
                let Some(left) = rest else { return false };
                rest = match wanted {
                    b"*" => memchr::memrchr(b'.', left).map(|dot| &left[..dot]),
                    literal => {
                        let Some(before) = left.strip_suffix(literal) else {
                            return false;
                        };
                        match before.split_last() {
                            None => None,
                            Some((b'.', before)) => Some(before),
                            Some(_) => return false,
                        }
                    }
                };
            }
            rest.is_none()
        }
    }
}

/// The separator of a subject's tokens.
fn is_dot(byte: &u8) -> bool {
    *byte == b'.'
}

/// Checks a subject (`wildcards` false) or a filter (`wildcards` true): dot-separated,
/// non-empty tokens of printable ASCII; in a filter, `*` stands for one whole token and
/// `>` for the rest as the last one. Says what is wrong otherwise.
pub(crate) fn check_subject(subject: &str, wildcards: bool) -> Result<(), String> {
    // Every publish checks its subject: a plain subject (printable ASCII, no wildcard
    // byte, no empty token) passes in one pass; the rest is looked at token by token.
    if !wildcards && plain_subject(subject.as_bytes()) {
        return Ok(());
    }
    check_tokens(subject, wildcards)
}

/// Checks a filter by the rule every bus follows (dot-separated non-empty tokens of
/// printable ASCII, a whole token `*` for any one token, a last token `>` for the
/// rest; see [`subject_matches`]): [`BusError::Invalid`] saying what is wrong
/// otherwise. Every bus checks each filter
/// it is given (a consumer's, a replay's, a listener's, a lookup's) with this, before
/// it reaches storage or a server, so no input can widen a subscription.
///
/// ```
/// use aaa_tools::bus::{BusError, check_filter};
///
/// assert!(check_filter("aaa.*.run-1.>").is_ok());
/// let error = check_filter("aaa.>.tool").unwrap_err();
/// assert!(matches!(error, BusError::Invalid { what: "filter", .. }), "{error}");
/// ```
pub fn check_filter(filter: &str) -> Result<(), BusError> {
    check_subject(filter, true).map_err(|why| invalid_filter(filter, why))
}

/// Checks a subject to publish on by the rule every bus follows: dot-separated,
/// non-empty tokens of printable ASCII, no wildcard; [`BusError::Invalid`] saying what is wrong otherwise. Every bus checks each subject
/// it is asked to publish on with this, before storing anything.
///
/// ```
/// use aaa_tools::bus::{BusError, check_publish_subject};
///
/// assert!(check_publish_subject("aaa.t.run-1.tool.requested").is_ok());
/// let error = check_publish_subject("aaa.t.*.tool").unwrap_err();
/// assert!(matches!(error, BusError::Invalid { what: "subject", .. }), "{error}");
/// ```
pub fn check_publish_subject(subject: &str) -> Result<(), BusError> {
    check_subject(subject, false).map_err(|why| BusError::Invalid {
        what: "subject",
        detail: format!("{subject:?} is not a publishable subject: {why}"),
    })
}

/// The error a bus returns for a filter it refuses, `why` saying what is wrong: the
/// same [`BusError::Invalid`] as [`check_filter`]'s, for a rule of the backend's own
/// (the JetStream bus, say, listens to outcome subjects only).
///
/// ```
/// use aaa_tools::bus::invalid_filter;
///
/// let error = invalid_filter("aaa.t.r.>", "this bus listens to outcomes only".into());
/// assert_eq!(
///     error.to_string(),
///     r#"invalid filter: "aaa.t.r.>": this bus listens to outcomes only"#
/// );
/// ```
pub fn invalid_filter(filter: &str, why: String) -> BusError {
    BusError::Invalid {
        what: "filter",
        detail: format!("{filter:?}: {why}"),
    }
}

/// The error a bus returns when a call that takes several filters
/// ([`Bus::replay_any`](super::Bus::replay_any), [`Bus::listen`](super::Bus::listen))
/// is given none: a [`BusError::Invalid`].
///
/// ```
/// use aaa_tools::bus::{BusError, no_filters};
///
/// assert!(matches!(no_filters(), BusError::Invalid { what: "filter", .. }));
/// ```
pub fn no_filters() -> BusError {
    BusError::Invalid {
        what: "filter",
        detail: "at least one filter is required".into(),
    }
}

/// [`check_subject`] token by token, saying what is wrong.
fn check_tokens(subject: &str, wildcards: bool) -> Result<(), String> {
    let mut tokens = subject.split('.').peekable();
    while let Some(token) = tokens.next() {
        if token.is_empty() {
            return Err("it has an empty token".into());
        }
        if let Some(bad) = token.bytes().find(|b| !b.is_ascii_graphic()) {
            return Err(format!("byte {bad:#04x} is not allowed"));
        }
        let wild = token == "*" || (token == ">" && tokens.peek().is_none());
        if wild && !wildcards {
            return Err("wildcards are not allowed here".into());
        }
        if !wild && (token.contains('*') || token.contains('>')) {
            return Err(format!("token {token:?} mixes a wildcard with text"));
        }
    }
    Ok(())
}

/// Whether `subject` is non-empty printable ASCII without `*`, `>`, or an empty token.
fn plain_subject(subject: &[u8]) -> bool {
    // Every publish runs this. Two passes without a table, an early exit or state
    // carried from byte to byte, which the compiler turns into vector code: every byte
    // allowed, no dot after a dot. A dot may not start or end the subject either.
    let (Some(&first), Some(&last)) = (subject.first(), subject.last()) else {
        return false;
    };
    let refused = subject.iter().fold(0_u8, |refused, &b| {
        refused | u8::from((b <= b' ') | (b >= 0x7f) | (b == b'*') | (b == b'>'))
    });
    let dot = |b: u8| b == b'.';
    let double_dot = subject
        .iter()
        .zip(&subject[1..])
        .fold(0_u8, |found, (&a, &b)| found | u8::from(dot(a) & dot(b)));
    (refused | double_dot) == 0 && !dot(first) && !dot(last)
}

/// The narrowest single filter matching every subject any of `filters` matches:
/// tokens all filters share are kept, a position where they differ becomes `*`; from a
/// `>` on, or from the last token of the shortest filter when their lengths differ, the
/// rest becomes `>`. `None` for no filters.
///
/// ```
/// use aaa_tools::bus::covering_filter;
///
/// let both = ["aaa.t.r.tool.completed".to_owned(), "aaa.t.r.tool.failed".to_owned()];
/// assert_eq!(covering_filter(&both).as_deref(), Some("aaa.t.r.tool.*"));
/// let uneven = ["a.b".to_owned(), "a.b.c".to_owned()];
/// assert_eq!(covering_filter(&uneven).as_deref(), Some("a.>"));
/// ```
pub fn covering_filter(filters: &[String]) -> Option<String> {
    let split: Vec<Vec<&str>> = filters.iter().map(|f| f.split('.').collect()).collect();
    let shortest = split.iter().map(Vec::len).min()?;
    let uneven = split.iter().any(|f| f.len() != shortest);
    let mut cover: Vec<&str> = Vec::with_capacity(shortest);
    for i in 0..shortest {
        if split.iter().any(|f| f[i] == ">") {
            cover.push(">");
            return Some(cover.join("."));
        }
        let token = split[0][i];
        cover.push(if split.iter().all(|f| f[i] == token) {
            token
        } else {
            "*"
        });
    }
    if uneven {
        // From the shortest filter's last token on, anything.
        cover.pop();
        cover.push(">");
    }
    Some(cover.join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_follow_nats_rules() {
        assert!(subject_matches(
            "aaa.*.*.tool.requested",
            "aaa.t.r.tool.requested"
        ));
        assert!(!subject_matches(
            "aaa.*.*.tool.requested",
            "aaa.t.r.tool.completed"
        ));
        assert!(subject_matches("aaa.t.r.>", "aaa.t.r.tool.completed"));
        assert!(!subject_matches("aaa.t.r.>", "aaa.t.r"));
        assert!(!subject_matches("aaa.t.r.>", "aaa.t.r2.tool.completed"));
        assert!(!subject_matches("a.b", "a.b.c"));
        assert!(!subject_matches("a.b.c", "a.b"));
        assert!(subject_matches("*.b.*", "a.b.c"));
        assert!(subject_matches(">", "a"));
        assert!(!subject_matches("a.*", "a"));
        assert!(!subject_matches("a.bc", "a.b"));
    }

    /// The rule as NATS states it, token by token from the start: what
    /// [`subject_matches`] must agree with, whichever end it starts from.
    fn by_the_rule(filter: &str, subject: &str) -> bool {
        let (filter, subject): (Vec<&str>, Vec<&str>) =
            (filter.split('.').collect(), subject.split('.').collect());
        for (i, wanted) in filter.iter().enumerate() {
            match (*wanted, subject.get(i)) {
                (">", Some(_)) => return true,
                ("*", Some(_)) => {}
                (wanted, Some(token)) if wanted == *token => {}
                _ => return false,
            }
        }
        filter.len() == subject.len()
    }

    /// Every `.`-joined sequence of up to `most` of `tokens`.
    fn sequences(tokens: &[&str], most: usize) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        let mut last: Vec<String> = vec![String::new()];
        for _ in 0..most {
            last = last
                .iter()
                .flat_map(|s| {
                    tokens.iter().map(move |t| match s.is_empty() {
                        true => (*t).to_owned(),
                        false => format!("{s}.{t}"),
                    })
                })
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    /// Matching from the end (filters without `>`) and from the start (with) agrees
    /// with the plain rule over every valid filter of up to four tokens and every
    /// subject of up to five.
    #[test]
    fn each_filter_shape_matches_as_the_rule_does() {
        let filters: Vec<String> = sequences(&["a", "bc", "*", ">"], 4)
            .into_iter()
            .filter(|f| check_filter(f).is_ok())
            .collect();
        // Empty tokens too: no bus stores such a subject, but the rule still holds.
        let subjects = sequences(&["a", "bc", "d", ""], 5);
        assert!(filters.iter().any(|f| f.ends_with('>')));
        assert!(filters.iter().any(|f| f.contains('*') && !f.contains('>')));
        for filter in &filters {
            for subject in &subjects {
                assert_eq!(
                    subject_matches(filter, subject),
                    by_the_rule(filter, subject),
                    "{filter} against {subject}"
                );
            }
        }
    }

    /// The filters the engine uses, against subjects that differ from them in one
    /// place each: the rule holds at both ends and in the middle.
    #[test]
    fn filters_match_as_the_subject_rules_say() {
        let filters = [
            "aaa.*.*.tool.requested",
            "aaa.t.r.tool.completed",
            "aaa.*.*.approval.*",
            "aaa.t.>",
            "*.b",
            "a.*.x",
            "*",
            ">",
            "*.*.*.tool.*",
            "aaa.*.r.>",
        ];
        let subjects = [
            "aaa.t.r.tool.requested",
            "aaa.t.r.tool.completed",
            "aaa.t.r.approval.granted",
            "aaa.t.r.xrequested",
            "aaa.t.requested",
            "a.b",
            "b",
            "a.b.x",
            "a.b.yx",
            "a.bx",
            "aaa.t",
            "aaa.t.r.tool",
            "x.aaa.t.r.tool.requested",
        ];
        for filter in filters {
            for subject in subjects {
                assert_eq!(
                    subject_matches(filter, subject),
                    by_the_rule(filter, subject),
                    "{filter} {subject}"
                );
            }
        }
    }

    #[test]
    fn covering_filters_cover_and_stay_narrow() {
        let cover = |fs: &[&str]| {
            let fs: Vec<String> = fs.iter().map(|f| f.to_string()).collect();
            covering_filter(&fs)
        };
        assert_eq!(cover(&[]), None);
        assert_eq!(cover(&["a.b"]).as_deref(), Some("a.b"));
        assert_eq!(cover(&["a.b.c", "a.x.c"]).as_deref(), Some("a.*.c"));
        assert_eq!(cover(&["a.b.c", "a.b"]).as_deref(), Some("a.>"));
        assert_eq!(cover(&["a.b", "a.b.c"]).as_deref(), Some("a.>"));
        assert_eq!(cover(&["a.b.>", "a.b.c"]).as_deref(), Some("a.b.>"));
        assert_eq!(cover(&["a", "b.c"]).as_deref(), Some(">"));
        // Every subject a filter matches, the cover matches.
        let filters = ["a.b.c", "a.*.d", "a.b", "x.>"];
        let subjects = ["a.b.c", "a.q.d", "a.b", "x.y.z"];
        let all: Vec<String> = filters.iter().map(|f| f.to_string()).collect();
        let c = covering_filter(&all).unwrap();
        for s in subjects {
            assert!(subject_matches(&c, s), "{c} misses {s}");
        }
    }

    #[test]
    fn subjects_are_checked() {
        for good in ["a", "aaa.t.r.tool.requested", "a-b_c.D9"] {
            assert_eq!(check_subject(good, false), Ok(()), "{good}");
        }
        for bad in [
            "", ".a", "a.", "a..b", "a.*", "a.>", "a b", "a.b*", "é", "a\u{7f}",
        ] {
            assert!(check_subject(bad, false).is_err(), "{bad:?}");
        }
        assert_eq!(check_subject("a.*.>", true), Ok(()));
        assert!(check_subject("a.>.b", true).is_err());
    }

    /// The one-pass check of a plain subject passes exactly what the token-by-token
    /// check passes, over every string of up to six characters from an alphabet of
    /// the cases that matter.
    #[test]
    fn the_fast_subject_check_agrees_with_the_tokens() {
        let alphabet = ['a', '.', '*', '>', ' ', '\u{7f}', 'é', '~'];
        let (mut strings, mut longest) = (vec![String::new()], vec![String::new()]);
        for _ in 0..6 {
            longest = longest
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            strings.extend(longest.iter().cloned());
        }
        assert_eq!(
            strings.len(),
            (0..=6).map(|n| 8_usize.pow(n)).sum::<usize>()
        );
        for subject in &strings {
            assert_eq!(
                plain_subject(subject.as_bytes()),
                check_tokens(subject, false).is_ok(),
                "{subject:?}"
            );
        }
    }
}

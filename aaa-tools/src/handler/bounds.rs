//! What a fact may echo, so that every request is answered within the bus's limits.
//!
//! A request that fits the bus can still ask for an answer that does not: a failure
//! that repeats a 1 MiB tool name, an approval request that repeats 1 MiB of
//! arguments. Such a fact would be refused by the server, and the request delivered
//! again, forever. So:
//!
//! - a tool name is echoed up to [`NAME_ECHO`] bytes (no tool has a longer name:
//!   [`is_valid_tool_name`](crate::is_valid_tool_name) allows 64), cut on a character
//!   boundary and marked with how long it was;
//! - a failure message is echoed up to [`MESSAGE_ECHO`] bytes;
//! - an approval request echoes the arguments whole (a human must see what they
//!   approve) or not at all: arguments that leave no room in one fact make the call a
//!   short `bad_request` naming the limit;
//! - an outcome the bus refuses as too large ([`BusError::TooLarge`], never retried)
//!   is replaced by a short failure fact saying so, and the request is settled once
//!   that fact is stored.

use std::borrow::Cow;
use std::sync::Arc;

use crate::bus::Bus;

/// The most of a tool name a fact repeats, in bytes.
pub(super) const NAME_ECHO: usize = 256;

/// The most of a failure message a fact carries, in bytes.
pub(super) const MESSAGE_ECHO: usize = 64 * 1024;

/// Room kept in every fact for what is not echoed: the envelope, ids, the fingerprint,
/// the message id header.
const ENVELOPE_ROOM: usize = 4 * 1024;

/// How many bytes of echoed content (names, messages, arguments) one fact can hold on
/// `bus`: its `max_payload` less [`ENVELOPE_ROOM`]; `None` when the bus has no limit.
pub(super) fn fact_room(bus: &dyn Bus) -> Option<usize> {
    bus.max_payload()
        .map(|limit| limit.saturating_sub(ENVELOPE_ROOM))
}

/// `text` cut to at most `limit` bytes on a character boundary, with a note of its
/// whole length when cut.
pub(super) fn cut(text: &str, limit: usize) -> Cow<'_, str> {
    if text.len() <= limit {
        return Cow::Borrowed(text);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}… ({} bytes in all)", &text[..end], text.len()))
}

/// A requested tool name as facts echo it (see [`NAME_ECHO`]).
pub(super) fn echoed_name(name: Arc<str>) -> Arc<str> {
    match cut(&name, NAME_ECHO) {
        Cow::Borrowed(_) => name,
        Cow::Owned(short) => Arc::from(short),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_a_character_boundary_and_says_how_long() {
        assert_eq!(cut("short", 10), "short");
        let long = "é".repeat(200); // 400 bytes
        let short = cut(&long, NAME_ECHO);
        assert!(short.starts_with(&"é".repeat(128)), "{short}");
        assert!(short.ends_with("… (400 bytes in all)"), "{short}");
        let name = echoed_name(Arc::from("x".repeat(1 << 20)));
        assert!(name.len() < NAME_ECHO + 40, "{}", name.len());
    }
}

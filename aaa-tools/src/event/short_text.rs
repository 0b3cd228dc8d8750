//! [`ShortText`]: a string built from parts on the stack.
//!
//! Every fact the engine publishes needs its subject (`aaa.<tenant>.<run>.<type>`),
//! every outcome its id (`outcome.<tenant>.<run>.<call>`) and every guarded call its
//! record's key, for as long as a publish or a store write takes and no longer. They
//! fit inline in 128 bytes when the ids are of common lengths (a UUID is 36
//! characters); longer ones go to the heap.
//!
//! What it buys, measured: with `String` in its place (same call sites), the
//! `per_call` bench (embedded engine, `add` calls, 64 in flight, instructions per
//! call under callgrind) cost 50,989 instructions per call with the guard on instead
//! of 49,333 (+1,656, 3.4%: one allocation and free per name, several names per
//! call), and 38,150 instead of 37,625 with it off (+525, 1.4%).
//!
//! The inline form is an `arrayvec` [`ArrayString`]: it reads back as `&str` without
//! checking its bytes again, which this crate (no `unsafe`) could not do with a plain
//! byte array.

use std::ops::Deref;

use arrayvec::ArrayString;

/// Text kept inline up to 128 bytes.
pub(crate) enum ShortText {
    Inline(ArrayString<128>),
    Heap(String),
}

// 128 bytes, the length and the tag: a publishing future holds two of these (a
// fact's subject and id) across its awaits, so a larger capacity grows every call's
// future.
const _: () = assert!(std::mem::size_of::<ShortText>() == 136);

impl ShortText {
    /// The parts, one after the other.
    #[inline]
    pub(crate) fn concat(parts: &[&str]) -> Self {
        let len: usize = parts.iter().map(|part| part.len()).sum();
        if len > 128 {
            return ShortText::Heap(crate::ids::concat(parts));
        }
        let mut text = ArrayString::new();
        for part in parts {
            text.push_str(part);
        }
        ShortText::Inline(text)
    }
}

impl Deref for ShortText {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            ShortText::Inline(text) => text,
            ShortText::Heap(text) => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_its_parts_inline_or_not() {
        let short = ShortText::concat(&["aaa.", "t", ".", "r"]);
        assert_eq!(&*short, "aaa.t.r");
        assert!(matches!(short, ShortText::Inline(_)));
        assert_eq!(&*ShortText::concat(&[]), "");
        let exactly = "y".repeat(128);
        assert!(matches!(
            ShortText::concat(&[&exactly]),
            ShortText::Inline(_)
        ));
        let long = "x".repeat(300);
        let text = ShortText::concat(&["é-", &long, "-é"]);
        assert_eq!(&*text, format!("é-{long}-é"));
        assert!(matches!(text, ShortText::Heap(_)));
    }
}

//! [`ToolNames`]: one shared copy of each tool name an engine's callers ask for.
//!
//! Every request carries its tool's name, and the bus keeps each request for as long as
//! its retention says. A program calls a handful of tools many times over, so the
//! engine keeps one shared copy of each name it was asked for and hands out a
//! reference to it: no copy to allocate per call, and none to free when the log lets
//! the request go. A model may ask for names no tool has, so the set is bounded: past
//! [`MAX_NAMES`] names, or for a name longer than [`MAX_LEN`] bytes, a call gets a copy
//! of its own as before.

use std::collections::HashSet;
use std::sync::RwLock;

use aaa_guard::SharedStr;

/// The most names one engine keeps.
const MAX_NAMES: usize = 1024;
/// The longest name it keeps, in bytes (providers allow 64 characters).
const MAX_LEN: usize = 256;

/// The tool names an engine has seen, each kept once.
#[derive(Default)]
pub(crate) struct ToolNames {
    names: RwLock<HashSet<SharedStr, foldhash::fast::RandomState>>,
}

impl ToolNames {
    /// `name`, shared with every other call of the same name.
    pub(crate) fn get(&self, name: &str) -> SharedStr {
        if let Some(kept) = self
            .names
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
        {
            return kept.clone();
        }
        let shared = SharedStr::from(name);
        if name.len() <= MAX_LEN {
            let mut names = self.names.write().unwrap_or_else(|p| p.into_inner());
            if names.len() < MAX_NAMES {
                names.insert(shared.clone());
            }
        }
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether two names share one copy of their text.
    fn shared(a: &SharedStr, b: &SharedStr) -> bool {
        std::ptr::eq(a.as_str().as_ptr(), b.as_str().as_ptr())
    }

    #[test]
    fn a_name_is_kept_once_and_the_set_stays_bounded() {
        let names = ToolNames::default();
        let (first, again) = (names.get("add"), names.get("add"));
        assert_eq!(first, "add");
        assert!(
            shared(&first, &again),
            "the second call gets the first copy"
        );
        for i in 0..MAX_NAMES {
            names.get(&format!("tool_{i}"));
        }
        let (late, late_again) = (names.get("late"), names.get("late"));
        assert_eq!(late, "late");
        assert!(
            !shared(&late, &late_again),
            "past the bound, names are copied"
        );
        let long = "x".repeat(MAX_LEN + 1);
        assert!(!shared(&names.get(&long), &names.get(&long)));
        assert!(shared(&names.get("add"), &first), "kept names stay");
    }
}

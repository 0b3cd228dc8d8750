//! Examples live beside this crate.

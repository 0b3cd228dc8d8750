//! A user crate that shadows common names and denies unused qualifications still
//! compiles tools: the macro output names everything through `::aaa_tools::__private`
//! and `::core`.
#![deny(unused_qualifications, missing_docs)]
#![allow(dead_code)]

// Shadow the names generated code might lean on.
mod serde {}
mod schemars {}
mod core {}
type Result<T> = ::std::result::Result<T, ()>;
type Option = ();
struct Box;
struct Vec;
struct String;
struct Arc;

use aaa_tools::{ToolContext, ToolError, tool};

/// Documented tool.
///
/// # Arguments
/// * `a` - First.
/// * `b` - Second.
#[tool(timeout_s = 5)]
pub async fn add(a: i64, b: i64, ctx: &ToolContext) -> ::std::result::Result<i64, ToolError> {
    let _ = ctx;
    ::std::result::Result::Ok(a + b)
}

/// A sync tool.
#[tool(name = "shout", pool = "cpu")]
pub fn shout(text: ::std::string::String) -> ::std::string::String {
    text.to_uppercase()
}

fn main() {
    let _ = add::tool();
    let _ = shout::tool();
}

use aaa_tools::tool;

/// Doc.
#[tool]
struct NotAFn;

fn main() {}

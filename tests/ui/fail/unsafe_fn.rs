use aaa_tools::tool;

/// Doc.
#[tool]
unsafe fn f() {}

fn main() {}

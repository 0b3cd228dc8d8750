use aaa_tools::tool;

/// Doc.
#[tool(timeout_s = 0)]
async fn f() {}

fn main() {}

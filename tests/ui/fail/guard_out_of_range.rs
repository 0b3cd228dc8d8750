use aaa_tools::tool;

/// Doc.
#[tool(guard(max_attempts = 0))]
async fn f() {}

fn main() {}

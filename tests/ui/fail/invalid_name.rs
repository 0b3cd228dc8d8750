use aaa_tools::tool;

/// Doc.
#[tool(name = "get weather")]
async fn f() {}

fn main() {}

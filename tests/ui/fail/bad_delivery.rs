use aaa_tools::tool;

/// Doc.
#[tool(delivery = "at_most_onc")]
async fn f() {}

fn main() {}

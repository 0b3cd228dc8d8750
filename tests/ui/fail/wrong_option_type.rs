use aaa_tools::tool;

/// Doc.
#[tool(requires_approval = "yes")]
async fn f() {}

fn main() {}

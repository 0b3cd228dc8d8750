use aaa_tools::tool;

/// Doc.
#[tool(nmae = "x")]
async fn f() {}

fn main() {}

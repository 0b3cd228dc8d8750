use aaa_tools::{ToolContext, tool};

/// Doc.
#[tool]
async fn f(a: ToolContext, b: &ToolContext) {
    let _ = (a, b);
}

fn main() {}

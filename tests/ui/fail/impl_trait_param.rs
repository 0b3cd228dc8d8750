use aaa_tools::tool;

/// Doc.
#[tool]
async fn f(x: impl Into<String>) {
    let _ = x.into();
}

fn main() {}

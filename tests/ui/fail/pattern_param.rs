use aaa_tools::tool;

/// Doc.
#[tool]
async fn f((a, b): (i32, i32)) {
    let _ = a + b;
}

fn main() {}

use aaa_tools::tool;

struct Opaque;

/// Doc.
#[tool]
async fn f(x: Opaque) {
    let _ = x;
}

fn main() {}

use aaa_tools::tool;

struct Opaque;

/// Doc.
#[tool]
async fn f() -> Opaque {
    Opaque
}

fn main() {}

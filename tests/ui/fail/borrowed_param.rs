use aaa_tools::tool;

/// Doc.
#[tool]
fn f(x: &'static str) -> String {
    x.to_owned()
}

fn main() {}

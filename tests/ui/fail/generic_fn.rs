use aaa_tools::tool;

/// Doc.
#[tool]
async fn f<T: serde::de::DeserializeOwned>(x: T) {
    let _ = x;
}

fn main() {}

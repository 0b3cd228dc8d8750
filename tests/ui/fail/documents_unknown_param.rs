use aaa_tools::tool;

/// Look up a city.
///
/// # Arguments
/// * `cty` - The city.
#[tool]
async fn lookup(city: String) {
    let _ = city;
}

fn main() {}

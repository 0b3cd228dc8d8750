use aaa_tools::tool;

/// Look up a city.
///
/// # Arguments
/// * `city` - The city.
#[tool(require_descriptions = true)]
async fn lookup(city: String, country: String) {
    let _ = (city, country);
}

fn main() {}

use aaa_tools::tool;

fn key(amount: &u64) -> String {
    amount.to_string()
}

/// Doc.
#[tool(idempotency_key = key)]
async fn pay(to: String, amount: u64) {
    let _ = (to, amount);
}

fn main() {}

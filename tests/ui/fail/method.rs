use aaa_tools::tool;

struct Service;

impl Service {
    /// Doc.
    #[tool]
    async fn f(&self, x: i32) {
        let _ = x;
    }
}

fn main() {}

//! Compile tests of `#[tool]`: what must compile, and the error for each mistake.
//! Regenerate the expected `.stderr` files with `TRYBUILD=overwrite`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/fail/*.rs");
}

//! Examples live beside this crate.

#[cfg(test)]
mod tests {
    /// The README's "An agent loop" snippet is `agent_loop.rs`, so it compiles (the
    /// example is built with the crate's targets) and says what the example does.
    #[test]
    fn the_readme_agent_loop_snippet_is_the_agent_loop_example() {
        let readme = include_str!("../../README.md");
        let section = &readme[readme
            .find("## An agent loop")
            .expect("the README has the section")..];
        let start = section.find("```rust\n").expect("a rust block") + "```rust\n".len();
        let snippet = &section[start..start + section[start..].find("```").unwrap()];
        let example = include_str!("../agent_loop.rs");
        let code = &example[example.find("use ").expect("the example's code")..];
        assert_eq!(
            snippet, code,
            "README.md's snippet and examples/agent_loop.rs differ"
        );
    }
}

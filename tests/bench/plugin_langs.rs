//! Placeholder: filled by the #19 part 2 work.
fn main() {}

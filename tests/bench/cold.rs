//! Cold-start section of the benchmark (issue #15): a one-shot `toolgate call read` next to
//! `cat` in the same run.

pub async fn run() {}

//! Issue #49 attack tests: see hostile/mod.rs.

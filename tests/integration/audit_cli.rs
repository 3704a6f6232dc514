//! Issue #17: see docs/decisions.md.

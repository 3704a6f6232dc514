//! (filled in by issue #15 work)

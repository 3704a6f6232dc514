//! (placeholder: filled in by issue #18 work)

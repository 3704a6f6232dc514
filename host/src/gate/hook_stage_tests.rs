//! Unit tests of the hook_stage stage.

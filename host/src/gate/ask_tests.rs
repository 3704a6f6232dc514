//! Unit tests of the ask stage.

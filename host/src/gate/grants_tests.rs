//! Unit tests of the grants stage.

//! Unit tests of the mode stage.

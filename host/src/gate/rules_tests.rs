//! Unit tests of the rules stage.

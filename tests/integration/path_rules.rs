//! Attacks on untrusted workspaces (issue #13): path_rules.

#[allow(unused_imports)]
use crate::common::*;

//! Attacks on untrusted workspaces (issue #13): net_edge.

#[allow(unused_imports)]
use crate::common::*;

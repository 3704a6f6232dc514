//! Attacks on untrusted workspaces (issue #13): host_stall.

#[allow(unused_imports)]
use crate::common::*;

//! Attacks on untrusted workspaces (issue #13): git_exec.

#[allow(unused_imports)]
use crate::common::*;

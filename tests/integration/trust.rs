//! Attacks on untrusted workspaces (issue #13): trust.

#[allow(unused_imports)]
use crate::common::*;

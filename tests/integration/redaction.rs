//! Attacks on untrusted workspaces (issue #13): redaction.

#[allow(unused_imports)]
use crate::common::*;

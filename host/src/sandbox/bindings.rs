//! The WIT bindings the host implements, one module per WIT package version. The read-ahead's
//! `toolgate:search` bindings live in `read_ahead/bindings.rs`: they map its reader resource to
//! `read_ahead::Reader`, and this module may not depend on `read_ahead`, which uses it.

pub(crate) mod since_v0_1_0;
pub(crate) mod since_v0_2_0;

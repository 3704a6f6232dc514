//! (issue #14) placeholder; filled in by its owner.

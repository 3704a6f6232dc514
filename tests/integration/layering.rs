//! The module structure of `host/src`, checked from the source: placeholder replaced below.

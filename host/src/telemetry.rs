//! OpenTelemetry export of the audit (issue #15 part 5): filled in by the telemetry work.
//!
//! [`configure`] is called once per gate with the resolved policy.

/// Configure the exporter from the resolved policy (and the environment).
pub fn configure(_policy: &crate::policy::Policy) {}

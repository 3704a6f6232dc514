//! Tests of the collector health.

#![allow(clippy::unwrap_used)]
use super::*;

use std::time::{Duration, Instant};

#[test]
fn an_outage_is_said_once_and_backs_off() {
    let h = Health::new("http://127.0.0.1:9");
    let t0 = Instant::now();
    assert!(h.may_try(t0));
    assert!(h.failed(t0, "refused"), "the first failure is said");
    assert!(!h.may_try(t0 + Duration::from_millis(500)));
    assert!(h.may_try(t0 + FIRST_BACKOFF));
    let mut said = 0;
    let mut t = t0;
    for _ in 0..20 {
        t += MAX_BACKOFF;
        said += usize::from(h.failed(t, "refused"));
    }
    assert_eq!(
        said, 0,
        "later failures of the same outage are not said again"
    );
    assert_eq!(h.state().backoff, MAX_BACKOFF, "the backoff is capped");
    h.succeeded();
    assert!(h.may_try(t));
    assert!(h.failed(t, "refused"), "a new outage is said again");
    assert_eq!(h.state().backoff, FIRST_BACKOFF);
}

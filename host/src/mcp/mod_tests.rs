//! Unit tests of `mcp`: tool annotations, rendering, session names.

use super::*;
use crate::tools::{Observation, Risk};

#[test]
fn annotations_follow_risk() {
    let r = annotations(Risk::ReadOnly);
    assert_eq!(
        (r.read_only_hint, r.destructive_hint, r.open_world_hint),
        (Some(true), Some(false), Some(false))
    );
    let w = annotations(Risk::Write);
    assert_eq!(
        (w.read_only_hint, w.destructive_hint),
        (Some(false), Some(true))
    );
    assert_eq!(annotations(Risk::Exec).destructive_hint, Some(true));
    assert_eq!(annotations(Risk::Network).open_world_hint, Some(true));
}

#[test]
fn denial_text_has_header_reason_and_hint() {
    let o = Observation::denied(
        "write",
        "call-1",
        "ask",
        "`write:./` needs approval".into(),
        "use --grant".into(),
    );
    let r = render(&o);
    assert_eq!(r.is_error, Some(true));
    let text = render_text(&o);
    assert!(text.starts_with("[write denied at ask] denied: "), "{text}");
    assert!(text.contains("`write:./` needs approval"));
    assert!(text.contains("use --grant"));
    assert_eq!(r.structured_content.unwrap()["status"], "denied");
}

#[test]
fn session_names_differ() {
    assert_ne!(new_session_name(), new_session_name());
    assert!(new_session_name().starts_with("mcp-"));
}

//! Unit tests of `policy/plugins.rs`.
#![allow(clippy::unwrap_used)]

use super::super::{Layer, LayerKind, Stack};

fn stack(layers: &[(&str, LayerKind, bool, &str)]) -> super::super::Policy {
    let mut s = Stack::new();
    for (origin, kind, trusted, text) in layers {
        s.push(&Layer::parse(origin, *kind, text).unwrap(), *trusted);
    }
    s.finish()
}

#[test]
fn a_workspace_may_require_signatures_but_never_add_keys() {
    let p = stack(&[
        (
            "/home/u/.config/toolgate/policy.toml",
            LayerKind::User,
            true,
            "[plugins]\ntrusted_keys = [\"keys/a.pub\", \"/abs/b.pub\"]\n",
        ),
        (
            "/ws/.toolgate/policy.toml",
            LayerKind::Workspace,
            false,
            "[plugins]\nrequire_signature = true\ntrusted_keys = [\"/ws/evil.pub\"]\n",
        ),
    ]);
    assert!(p.plugins.require_signature);
    assert_eq!(
        p.plugins.required_by.as_deref(),
        Some("/ws/.toolgate/policy.toml")
    );
    let keys: Vec<String> = p
        .plugins
        .trusted_keys
        .iter()
        .map(|k| k.display().to_string())
        .collect();
    assert_eq!(keys, ["/home/u/.config/toolgate/keys/a.pub", "/abs/b.pub"]);
    assert!(
        p.ignored.iter().any(|i| i.part.contains("evil.pub")),
        "{:?}",
        p.ignored
    );
    // Trusted or not, a workspace adds no key.
    let p = stack(&[(
        "/ws/.toolgate/policy.toml",
        LayerKind::Workspace,
        true,
        "[plugins]\ntrusted_keys = [\"/ws/k.pub\"]\n",
    )]);
    assert!(p.plugins.trusted_keys.is_empty());
}

#[test]
fn an_untrusted_layer_cannot_drop_the_requirement_and_managed_keys_replace() {
    let p = stack(&[
        (
            "/u/policy.toml",
            LayerKind::User,
            true,
            "[plugins]\nrequire_signature = true\ntrusted_keys = [\"/u/mine.pub\"]\n",
        ),
        (
            "/ws/.toolgate/policy.toml",
            LayerKind::Workspace,
            false,
            "[plugins]\nrequire_signature = false\n",
        ),
        (
            "/etc/toolgate/managed.toml",
            LayerKind::Managed,
            true,
            "[plugins]\ntrusted_keys = [\"/etc/toolgate/org.pub\"]\n",
        ),
    ]);
    assert!(p.plugins.require_signature);
    assert_eq!(
        p.plugins.trusted_keys,
        [std::path::PathBuf::from("/etc/toolgate/org.pub")]
    );
    assert!(p
        .ignored
        .iter()
        .any(|i| i.part == "[plugins] require_signature = false"));
    let p = stack(&[(
        "/etc/toolgate/managed.toml",
        LayerKind::Managed,
        true,
        "[plugins]\nrequire_signature = false\n",
    )]);
    assert!(!p.plugins.require_signature);
}

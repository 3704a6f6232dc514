//! `toolgate doctor`, run as a separate process: it names every confinement layer and the
//! mode this host gives this user, and its exit status says whether a policy that requires
//! confinement would refuse the shell here (1) or not (0).

use crate::common::*;
use serde_json::Value;
use std::process::Output;

/// Every layer the report lists, in order.
const LAYERS: &[&str] = &[
    "landlock",
    "landlock scopes (signals, abstract sockets)",
    "user namespace",
    "mount namespace",
    "minimal filesystem view",
    "PID namespace",
    "network namespace",
    "dropping capabilities",
    "seccomp filter",
    "no_new_privs",
    "environment scrubbing",
    "process limit",
];

fn doctor(ws: &Ws, args: &[&str]) -> Output {
    toolgate_command(ws)
        .arg("doctor")
        .args(args)
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn doctor_names_every_layer_and_the_mode() {
    let ws = Ws::new();
    let out = doctor(&ws, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    // The default preset does not require confinement: nothing is refused.
    assert_eq!(out.status.code(), Some(0), "{text}");
    for layer in LAYERS {
        assert!(text.contains(layer), "`{layer}` is not named:\n{text}");
    }
    for tool in ["shell ", "lsp_* ", "plugins "] {
        assert!(text.contains(tool), "`{tool}` is not described:\n{text}");
    }

    let out = doctor(&ws, &["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    let mode = v["mode"].as_str().unwrap();
    assert!(
        ["privileged", "user-namespace", "landlock-only"].contains(&mode),
        "{v}"
    );
    // Run by the mode runner (tests/integration/unprivileged.rs), the mode is known.
    let expected = match crate::modes::current() {
        Some(crate::modes::Mode::Nobody | crate::modes::Mode::RootWithoutCaps) => {
            Some("user-namespace")
        }
        Some(crate::modes::Mode::NobodyWithoutUserns) => Some("landlock-only"),
        None => None,
    };
    if let Some(expected) = expected {
        assert_eq!(mode, expected, "{v}");
    }
    assert!(text.contains(&format!("mode     {mode}: ")), "{text}");
    let names: Vec<&str> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, LAYERS);
    // A missing layer says why and how to fix it; a present one does not.
    for l in v["layers"].as_array().unwrap() {
        let missing = l["state"] == "no";
        assert_eq!(l["cause"].is_string(), missing, "{l}");
        assert_eq!(l["fix"].is_string(), missing, "{l}");
    }
    assert_eq!(
        (v["require_confinement"].clone(), v["refuses_shell"].clone()),
        (Value::Bool(false), Value::Bool(false))
    );
}

#[test]
fn a_policy_requiring_confinement_exits_1_exactly_when_the_shell_is_refused() {
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        "[shell]\nrequire_confinement = true\n",
    );
    let out = doctor(&ws, &["--json"]);
    let v = json(&out);
    assert_eq!(v["require_confinement"], Value::Bool(true), "{v}");
    let refuses = v["refuses_shell"].as_bool().unwrap();
    // Without user namespaces no namespace can be had: a policy requiring them is refused.
    if crate::modes::without_userns() {
        assert!(refuses, "{v}");
    } else if crate::modes::current().is_some() {
        assert!(!refuses, "{v}");
    }
    assert_eq!(refuses, !v["missing"].as_array().unwrap().is_empty(), "{v}");
    let code = if refuses { 1 } else { 0 };
    assert_eq!(out.status.code(), Some(code), "{v}");

    let out = doctor(&ws, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(code), "{text}");
    assert_eq!(text.contains("shell    refused: "), refuses, "{text}");
}

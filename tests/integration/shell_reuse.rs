//! What the shell shares between commands to start them fast (the new root's skeleton, made
//! once; per-call directories made ahead; host facts kept a few seconds) must carry nothing
//! from one command to the next. Each test is an attack by one command on the next.

use crate::common::{gate_granting, Ws, SESSION};
use serde_json::json;
use toolgate::{Gate, Observation};

async fn sh(gate: &Gate, command: &str) -> Observation {
    gate.call(SESSION, "shell", json!({ "command": command }))
        .await
}

/// The listing part of a command's output (between two markers).
fn between<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
    let start = text.find(from).map_or(0, |i| i + from.len());
    let end = text[start..].find(to).map_or(text.len(), |i| start + i);
    &text[start..end]
}

const LIST: &str = "echo '<<'; ls -a / /dev; echo '>>'";

#[tokio::test]
async fn one_command_leaves_nothing_in_the_shared_root_or_the_next_commands_directories() {
    let ws = Ws::new();
    let g = gate_granting(&ws, &["shell"]).await;
    let first = sh(
        &g,
        &format!(
            "{LIST}; \
             echo planted > /tmp/left; echo planted > ~/left; echo planted > /dev/shm/left; \
             touch /planted 2>/dev/null && echo ROOT-WRITABLE; \
             echo x > /.empty 2>/dev/null && echo EMPTY-WRITABLE; \
             mkdir /dev/extra 2>/dev/null && echo DEV-WRITABLE; \
             ln -s / /proc2 2>/dev/null && echo LINK-MADE; \
             mkdir -p /tmp/nested/dir && echo nested > /tmp/nested/dir/f; true"
        ),
    )
    .await;
    assert!(
        first.data.get("confinement").is_some(),
        "it did not run: {first:#?}"
    );
    let out = first.content.clone();
    for bad in [
        "ROOT-WRITABLE",
        "EMPTY-WRITABLE",
        "DEV-WRITABLE",
        "LINK-MADE",
    ] {
        assert!(!out.contains(bad), "{bad}: {first:#?}");
    }
    let root_before = between(&out, "<<", ">>").to_string();
    assert!(root_before.contains("usr"), "{first:#?}");
    // The next commands get the same root and fresh directories, whichever set they get.
    for _ in 0..3 {
        let next = sh(
            &g,
            &format!(
                "{LIST}; wc -c < /.empty; ls -a /tmp ~ /dev/shm; \
                 cat /tmp/left ~/left /dev/shm/left /tmp/nested/dir/f 2>&1; true"
            ),
        )
        .await;
        assert!(
            next.data.get("confinement").is_some(),
            "it did not run: {next:#?}"
        );
        let out = next.content.clone();
        assert_eq!(between(&out, "<<", ">>"), root_before, "{next:#?}");
        for left in ["planted", "nested", "left"] {
            assert!(
                !out.lines().any(|l| l.trim() == left),
                "`{left}` carried over: {next:#?}"
            );
        }
        assert!(
            out.lines().any(|l| l.trim() == "0"),
            "/.empty is not empty: {next:#?}"
        );
    }
}

#[tokio::test]
async fn concurrent_commands_get_their_own_tmp_and_home() {
    let ws = Ws::new();
    let g = std::sync::Arc::new(gate_granting(&ws, &["shell"]).await);
    let mut calls = Vec::new();
    for i in 0..4 {
        let g = g.clone();
        calls.push(tokio::spawn(async move {
            sh(
                &g,
                &format!(
                    "echo {i} > /tmp/mine; echo {i} > ~/mine; sleep 0.3; \
                     echo tmp=$(cat /tmp/mine) home=$(cat ~/mine) n=$(ls /tmp | wc -l)"
                ),
            )
            .await
        }));
    }
    for (i, c) in calls.into_iter().enumerate() {
        let o = c.await.expect("call");
        assert!(
            o.data.get("confinement").is_some(),
            "it did not run: {o:#?}"
        );
        assert!(
            o.content.contains(&format!("tmp={i} home={i}")),
            "command {i} saw another's files: {o:#?}"
        );
    }
}

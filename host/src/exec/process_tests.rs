//! Tests of the process-group kill.
#![allow(clippy::expect_used)]

use super::*;

#[test]
fn refuses_non_positive_group() {
    assert!(try_kill_group(0).is_err());
    assert!(try_kill_group(-1).is_err());
}

#[cfg(unix)]
#[test]
fn kills_a_whole_group() {
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new("sh")
        .args(["-c", "sleep 30 & sleep 30; wait"])
        .process_group(0)
        .spawn()
        .expect("spawn sh");
    let pgid = child.id() as i32;
    try_kill_group(pgid).expect("kill group");
    let status = child.wait().expect("wait");
    assert!(!status.success());
    // The group is empty once its members are reaped or reparented and killed.
    std::thread::sleep(std::time::Duration::from_millis(100));
    kill_group(pgid);
}

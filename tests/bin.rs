//! The `toolgate` binary starts and knows its version. The integration tests
//! (`tests/integration`, the `toolgate-integration` package) drive this binary.
#![allow(clippy::expect_used)]

#[test]
fn the_binary_starts_and_prints_its_version() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--version")
        .output()
        .expect("run toolgate --version");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(concat!("toolgate ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
}

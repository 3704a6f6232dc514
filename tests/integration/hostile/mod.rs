//! Attacks from a hostile workspace and a hostile second client (issue #49). Each file is one
//! class; each test was watched failing on the code before its fix.

mod clients;
mod credentials;
mod git_blobs;
mod links;
mod network;
mod secrets;
mod state_db;
mod trust;

/// The wrapper macro works for nested modules: this test runs itself as nobody, as root
/// without privileges and without user namespaces.
#[test]
fn runs_in_a_mode_or_here() {
    let who = crate::modes::current().map(|m| m.name());
    eprintln!("running as {who:?}");
}

mod unprivileged {
    in_modes!(in hostile, runs_in_a_mode_or_here);
}

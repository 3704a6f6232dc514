//! Unit tests of when the HTTP server counts as quiet.

use super::*;

#[test]
fn a_lone_request_is_quiet_once_the_window_has_passed() {
    let quiet = Quiet::new(Duration::from_millis(20));
    std::thread::sleep(Duration::from_millis(25));
    let _one = quiet.enter();
    assert!(quiet.is_quiet());
}

#[test]
fn two_requests_at_once_are_not_quiet_nor_is_the_window_after_them() {
    let quiet = Quiet::new(Duration::from_millis(200));
    std::thread::sleep(Duration::from_millis(210));
    let one = quiet.enter();
    let two = quiet.enter();
    assert!(!quiet.is_quiet(), "two requests are being handled");
    drop(two);
    // Alone again, but the overlap was just now: a crowd between its requests is not quiet.
    assert!(!quiet.is_quiet());
    drop(one);
    let three = quiet.enter();
    assert!(!quiet.is_quiet());
    drop(three);
}

#[test]
fn quiet_comes_back_after_the_window() {
    let quiet = Quiet::new(Duration::from_millis(20));
    {
        let _one = quiet.enter();
        let _two = quiet.enter();
    }
    std::thread::sleep(Duration::from_millis(25));
    let _alone = quiet.enter();
    assert!(quiet.is_quiet());
}

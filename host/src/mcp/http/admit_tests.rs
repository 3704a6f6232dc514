//! Unit tests of `mcp/http/admit.rs`.

use super::*;

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

#[test]
fn over_the_bound_the_oldest_silent_connection_makes_room() {
    let a = Admission::new(3, 2);
    let mut first = a.admit(ip(1));
    let mut second = a.admit(ip(2));
    let mut third = a.admit(ip(3));
    // The first has sent something: the oldest silent one (the second) is closed instead.
    first.heard.store(true, Ordering::Relaxed);
    let fourth = a.admit(ip(4));
    assert_eq!(a.open(), 3);
    assert!(second.displaced.try_recv().is_ok());
    assert!(first.displaced.try_recv().is_err());
    assert!(third.displaced.try_recv().is_err());
    // A dropped place is given back (and a displaced one's drop changes nothing).
    drop(second);
    drop(fourth);
    assert_eq!(a.open(), 2);
    drop((first, third));
    assert_eq!(a.open(), 0);
}

#[test]
fn one_address_over_its_bound_displaces_its_own_oldest() {
    let a = Admission::new(10, 2);
    let mut other = a.admit(ip(9));
    let mut old = a.admit(ip(1));
    let mut newer = a.admit(ip(1));
    let _newest = a.admit(ip(1));
    assert!(old.displaced.try_recv().is_ok());
    assert!(newer.displaced.try_recv().is_err());
    assert!(
        other.displaced.try_recv().is_err(),
        "another address kept its place"
    );
    assert_eq!(a.open(), 3);
}

#[test]
fn the_bearer_token_is_found_in_a_head() {
    let head = b"POST /mcp HTTP/1.1\r\nHost: x\r\nauthorization:  bearer  abc \r\n\r\nbody";
    assert_eq!(bearer(head), Some("abc"));
    assert_eq!(bearer(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), None);
    // A header in the body, or a head not ended, is not read.
    assert_eq!(
        bearer(b"GET / HTTP/1.1\r\n\r\nAuthorization: Bearer abc\r\n\r\n"),
        None
    );
    assert_eq!(
        bearer(b"GET / HTTP/1.1\r\nAuthorization: Bearer abc\r\n"),
        None
    );
    assert_eq!(
        bearer(b"GET / HTTP/1.1\r\nAuthorization: Basic abc\r\n\r\n"),
        None
    );
}

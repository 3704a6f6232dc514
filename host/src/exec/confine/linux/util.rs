//! Small helpers safe after `fork`: decimal digits and `/proc/self/fd/N` paths without
//! allocating.

use rustix::fd::{AsRawFd, BorrowedFd};
use std::ffi::CStr;

/// `n` in decimal, written into `buf` without allocating (safe after `fork`).
pub(super) fn decimal(n: i32, buf: &mut [u8; 20]) -> &[u8] {
    let mut v = n.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// `/proc/self/fd/<fd>` as a C string in `buf`, without allocating: the mount calls act on
/// exactly the file that was opened (the kernel follows this magic link to it).
pub(super) fn fd_path<'b>(fd: BorrowedFd<'_>, buf: &'b mut [u8; 40]) -> &'b CStr {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    let mut digits = [0u8; 20];
    let d = decimal(fd.as_raw_fd(), &mut digits);
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    buf[PREFIX.len()..PREFIX.len() + d.len()].copy_from_slice(d);
    buf[PREFIX.len() + d.len()] = 0;
    // The buffer holds one NUL, written just above.
    CStr::from_bytes_until_nul(&buf[..]).unwrap_or(c"/")
}

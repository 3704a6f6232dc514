#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};

fn nonblocking(fd: impl AsFd) -> bool {
    rustix::fs::fcntl_getfl(fd)
        .unwrap()
        .contains(rustix::fs::OFlags::NONBLOCK)
}

#[tokio::test]
async fn a_pipe_is_read_by_the_reactor_and_its_flags_are_put_back() {
    let (reader, mut writer) = std::io::pipe().unwrap();
    let fd = Fd::new(reader.as_fd()).expect("a pipe is pollable");
    assert!(nonblocking(&reader), "made non-blocking while in use");
    // Lines written later, in pieces, by another thread: the read waits for each.
    let feeder = std::thread::spawn(move || {
        for piece in ["{\"a\":", "1}\n{\"b\"", ":2}\n"] {
            std::thread::sleep(std::time::Duration::from_millis(20));
            writer.write_all(piece.as_bytes()).unwrap();
        }
    });
    let mut lines = BufReader::new(fd).lines();
    assert_eq!(lines.next_line().await.unwrap().unwrap(), "{\"a\":1}");
    assert_eq!(lines.next_line().await.unwrap().unwrap(), "{\"b\":2}");
    feeder.join().unwrap();
    // The writer is gone: end of input, not an error.
    assert_eq!(lines.next_line().await.unwrap(), None);
    drop(lines);
    assert!(!nonblocking(&reader), "the original flags are put back");
}

#[tokio::test]
async fn a_write_larger_than_the_pipe_waits_for_the_reader_and_loses_nothing() {
    let (mut reader, writer) = std::io::pipe().unwrap();
    let mut fd = Fd::new(writer.as_fd()).expect("a pipe is pollable");
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let expected = data.clone();
    // A slow reader: the pipe (64 KiB) fills, the writer waits instead of failing.
    let drain = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            std::thread::sleep(std::time::Duration::from_micros(200));
            match std::io::Read::read(&mut reader, &mut buf).unwrap() {
                0 => break got,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
    });
    fd.write_all(&data).await.unwrap();
    fd.flush().await.unwrap();
    drop(fd);
    drop(writer);
    assert!(drain.join().unwrap() == expected, "every byte, in order");
}

#[test]
fn a_file_or_a_terminal_keeps_tokios_stdio() {
    let file = tempfile::tempfile().unwrap();
    assert!(Fd::new(file.as_fd()).is_none());
    assert!(!nonblocking(&file), "left as it was");
    let null = std::fs::File::open("/dev/null").unwrap();
    assert!(Fd::new(null.as_fd()).is_none());
}

#[tokio::test]
async fn reading_after_the_writer_closed_is_the_end() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(writer);
    let mut fd = Fd::new(reader.as_fd()).unwrap();
    let mut buf = Vec::new();
    assert_eq!(fd.read_to_end(&mut buf).await.unwrap(), 0);
}

//! Reading one HTTP/1.1 response from a keep-alive connection, for the raw clients of the MCP
//! benchmark and the HTTP integration tests (shared with `#[path]`).

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;

/// The status line, the lower-cased header lines and the body (by `Content-Length`, chunked,
/// or none for 204).
pub fn read_response(stream: &mut BufReader<TcpStream>) -> (String, Vec<String>, Vec<u8>) {
    let mut line = String::new();
    stream.read_line(&mut line).unwrap();
    let status = line.trim_end().to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        stream.read_line(&mut line).unwrap();
        if line.trim_end().is_empty() {
            break;
        }
        headers.push(line.trim_end().to_ascii_lowercase());
    }
    let mut body = Vec::new();
    let length = headers
        .iter()
        .find_map(|h| h.strip_prefix("content-length: "))
        .map(|n| n.trim().parse::<usize>().unwrap());
    match length {
        // 204 No Content: no body, and no length to say so.
        _ if status.contains(" 204 ") => {}
        Some(n) => {
            body.resize(n, 0);
            stream.read_exact(&mut body).unwrap();
        }
        None => loop {
            line.clear();
            stream.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            stream.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        },
    }
    (status, headers, body)
}

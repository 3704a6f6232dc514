//! The proxy's HTTP/1: strict heads, unambiguous framing, one request forwarded, responses
//! from bound hosts scrubbed on the stream.

use super::*;
use crate::sandbox::net::creds::{placeholder, Credential};
use crate::sandbox::net::HostPattern;

fn head(raw: &str) -> Result<Head, String> {
    parse_head(raw.as_bytes(), Vec::new())
}

fn req_framing(raw: &str) -> Result<Framing, String> {
    request_framing(&head(raw)?)
}

#[test]
fn ambiguous_body_framing_is_refused() {
    let get = "GET http://a.example/ HTTP/1.1\r\nHost: a.example";
    for bad in [
        "\r\nContent-Length: 5\r\nContent-Length: 5",
        "\r\nContent-Length: 5\r\nContent-Length: 7",
        "\r\nTransfer-Encoding: chunked\r\nContent-Length: 5",
        "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked",
        "\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
        "\r\nTransfer-Encoding: gzip, chunked",
        "\r\nTransfer-Encoding: xchunked",
        "\r\nContent-Length: +5",
        "\r\nContent-Length: 5, 5",
        "\r\nContent-Length: 0x5",
        "\r\nContent-Length: ",
    ] {
        let why = req_framing(&format!("{get}{bad}")).unwrap_err();
        assert!(why.contains("smuggling"), "{bad:?}: {why}");
    }
    let why =
        req_framing("POST http://a.example/ HTTP/1.0\r\nTransfer-Encoding: chunked").unwrap_err();
    assert!(why.contains("HTTP/1.0"), "{why}");
    assert_eq!(req_framing(get).unwrap(), Framing::Empty);
    assert_eq!(
        req_framing(&format!("{get}\r\nContent-Length: 12")).unwrap(),
        Framing::Length(12)
    );
    assert_eq!(
        req_framing(&format!("{get}\r\ntransfer-encoding: Chunked")).unwrap(),
        Framing::Chunked
    );
}

#[test]
fn folded_and_malformed_header_lines_are_refused() {
    let why = head("GET http://a.example/ HTTP/1.1\r\nX-A: 1\r\n Host: evil.example").unwrap_err();
    assert!(why.contains("folding"), "{why}");
    let why = head("GET http://a.example/ HTTP/1.1\r\nX-A: 1\r\n\tContent-Length: 5").unwrap_err();
    assert!(why.contains("folding"), "{why}");
    assert!(head("GET http://a.example/ HTTP/1.1\r\nContent-Length : 5").is_err());
    assert!(head("GET http://a.example/ HTTP/1.1\r\nX: a\rContent-Length: 5").is_err());
    assert!(head("GET http://a.example/ HTTP/1.1\r\nX: a\nContent-Length: 5").is_err());
}

#[test]
fn a_chunked_body_ends_where_its_last_chunk_says_whatever_the_reads() {
    let body = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\nGET http://evil.example/ HTTP/1.1\r\n\r\n";
    let end = body.len() - "GET http://evil.example/ HTTP/1.1\r\n\r\n".len();
    for step in [1, 2, 3, 7, body.len()] {
        let mut c = Chunked::default();
        let (mut used, mut out) = (0, Vec::new());
        for part in body.chunks(step) {
            used += c.feed(part, &mut out).unwrap();
            if c.done() {
                break;
            }
        }
        assert!(c.done());
        assert_eq!(used, end, "step {step}");
        assert_eq!(out, b"hello world");
    }
    for bad in [
        &b"5\nhello\r\n0\r\n\r\n"[..],
        b"5\r\nhelloXY0\r\n\r\n",
        b"zz\r\n",
        b"-1\r\n",
        b"\r\n",
    ] {
        assert!(
            Chunked::default().feed(bad, &mut Vec::new()).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[tokio::test]
async fn only_the_framed_body_is_forwarded_and_a_second_request_is_kept_back() {
    let second =
        b"POST http://evil.example/ HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 2\r\n\r\nhi";
    // The first body's start came with the head; the rest and the second request after it.
    let rest = b"abc".to_vec();
    let mut more = b"de".to_vec();
    more.extend_from_slice(second);
    let mut client = &more[..];
    let mut upstream = Vec::new();
    let (mut surplus, mut sent) = (Vec::new(), 0);
    forward_body(
        &mut client,
        rest,
        &mut upstream,
        Framing::Length(5),
        &mut surplus,
        &mut sent,
    )
    .await
    .unwrap();
    assert_eq!(upstream, b"abcde");
    assert_eq!(sent, 5);
    assert_eq!(surplus, second);

    // A request without a body: everything after the head is surplus.
    let (mut upstream, mut surplus) = (Vec::new(), Vec::new());
    let mut none: &[u8] = &[];
    forward_body(
        &mut none,
        second.to_vec(),
        &mut upstream,
        Framing::Empty,
        &mut surplus,
        &mut sent,
    )
    .await
    .unwrap();
    assert!(upstream.is_empty());
    assert_eq!(surplus, second);

    // Chunked: up to the end of the last chunk and its trailers.
    let mut body = b"3\r\nabc\r\n0\r\n\r\n".to_vec();
    body.extend_from_slice(second);
    let (mut upstream, mut surplus) = (Vec::new(), Vec::new());
    forward_body(
        &mut none,
        body,
        &mut upstream,
        Framing::Chunked,
        &mut surplus,
        &mut sent,
    )
    .await
    .unwrap();
    assert_eq!(upstream, b"3\r\nabc\r\n0\r\n\r\n");
    assert_eq!(surplus, second);
}

const VALUE: &str = "real-secret-value-42";

fn scrubber() -> Scrubber {
    Scrubber::new(&[Credential {
        name: "api".into(),
        value: Ok(VALUE.into()),
        hosts: vec![HostPattern::parse("api.example").unwrap()],
        header: None,
        env: None,
    }])
    .unwrap()
}

/// `reply` from the upstream (in reads of `step` bytes), through the relay as the client sees it.
async fn relayed(reply: &[u8], step: usize, method: &str) -> (String, Result<(), (String, bool)>) {
    let (mut up_w, mut up_r) = tokio::io::duplex(step);
    let reply = reply.to_vec();
    let writer = tokio::spawn(async move {
        for part in reply.chunks(step) {
            if up_w.write_all(part).await.is_err() {
                return;
            }
        }
    });
    let mut client = Vec::new();
    let mut received = 0;
    let r = relay_response(
        &mut up_r,
        &mut client,
        Some(scrubber()),
        "api.example",
        (method, "HTTP/1.1"),
        Duration::from_secs(5),
        &mut received,
    )
    .await;
    writer.abort();
    assert_eq!(received, client.len() as u64);
    (String::from_utf8_lossy(&client).into_owned(), r)
}

#[tokio::test]
async fn a_bound_hosts_answer_is_scrubbed_in_its_head_and_body_on_the_stream() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("Bearer {VALUE}"));
    let body = format!("{{\"hex\": \"{}\", \"b\": \"{b64}\"}}", hex::encode(VALUE));
    let body = format!("{body} {VALUE}");
    let ph = placeholder("api");
    for (framing, body_bytes) in [
        (format!("Content-Length: {}", body.len()), body.clone()),
        ("Transfer-Encoding: chunked".to_string(), {
            let (a, b) = body.split_at(body.len() / 2);
            format!("{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n", a.len(), b.len())
        }),
        ("Connection: close".to_string(), body.clone()),
    ] {
        let reply = format!(
            "HTTP/1.1 200 OK\r\nSet-Cookie: s={VALUE}\r\nX-Echo-{VALUE}: 1\r\n{framing}\r\n\r\n{body_bytes}"
        );
        for step in [1, 5, 64, 4096] {
            let (out, r) = relayed(reply.as_bytes(), step, "GET").await;
            r.unwrap();
            assert!(!out.contains(VALUE) && !out.contains(&b64), "{step}: {out}");
            assert!(out.contains(&format!("Set-Cookie: s={ph}")), "{out}");
            assert!(out.contains(&format!("X-Echo-{ph}: 1")), "{out}");
            assert!(
                out.contains("Transfer-Encoding: chunked\r\n") && out.ends_with("0\r\n\r\n"),
                "{out}"
            );
            assert!(!out.contains("Content-Length"), "{out}");
            // The body is the original with the placeholder in place of each form.
            let payload: String = out.split("\r\n\r\n").nth(1).unwrap().to_string();
            let mut c = Chunked::default();
            let mut plain = Vec::new();
            c.feed(format!("{payload}\r\n\r\n").as_bytes(), &mut plain)
                .unwrap();
            let plain = String::from_utf8(plain).unwrap();
            assert_eq!(plain.matches(&ph).count(), 3, "{plain}");
        }
    }
}

#[tokio::test]
async fn a_compressed_or_ambiguous_answer_from_a_bound_host_is_not_relayed() {
    let (out, r) = relayed(
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
        64,
        "GET",
    )
    .await;
    let (why, fresh) = r.unwrap_err();
    assert!(
        why.contains("compressed") && fresh && out.is_empty(),
        "{why}"
    );
    let (_, r) = relayed(
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        64,
        "GET",
    )
    .await;
    assert!(r.unwrap_err().0.contains("smuggling"));
    // Cut short: the chunked reply to the client is not ended, so the client sees it.
    let (out, r) = relayed(
        format!("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{VALUE}").as_bytes(),
        64,
        "GET",
    )
    .await;
    assert!(
        r.is_err() && !out.ends_with("0\r\n\r\n") && !out.contains(VALUE),
        "{out}"
    );
    // A 100 Continue first, then the answer; HEAD has no body whatever its length says.
    let (out, r) = relayed(format!("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 25\r\nX: {VALUE}\r\n\r\n").as_bytes(), 7, "HEAD").await;
    r.unwrap();
    assert!(
        out.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n") && !out.contains(VALUE),
        "{out}"
    );
    assert!(
        out.contains("Content-Length: 25") && out.ends_with("\r\n\r\n"),
        "{out}"
    );
}

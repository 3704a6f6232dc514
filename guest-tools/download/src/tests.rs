use super::save::{BodyReader, Head};
use super::*;
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use toolgate_guest::http::{HttpError, Request};

struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("toolgate-download-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Temp(dir)
    }
    fn cx(&self) -> Context {
        Context::for_tests(&self.0, 1 << 20, &[])
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn code(e: &ToolError) -> String {
    let dbg = format!("{e:?}");
    let start = dbg.find("code: \"").unwrap() + 7;
    let end = dbg[start..].find('"').unwrap() + start;
    dbg[start..end].to_string()
}

fn message(e: &ToolError) -> String {
    let dbg = format!("{e:?}");
    let start = dbg.find("message: \"").unwrap() + 10;
    let end = dbg[start..].find("\", data").unwrap() + start;
    dbg[start..end].to_string()
}

/// A body of canned chunks, possibly ending in an error.
struct Chunks(VecDeque<Result<Vec<u8>, HttpError>>);

impl BodyReader for Chunks {
    fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpError> {
        match self.0.pop_front() {
            None => Ok(None),
            Some(Ok(c)) => Ok(Some(c)),
            Some(Err(e)) => Err(e),
        }
    }
}

/// A response: status, headers and chunks.
type Canned = (u16, Vec<(String, String)>, Vec<Result<Vec<u8>, HttpError>>);

fn canned(
    status: u16,
    headers: &[(&str, &str)],
    chunks: Vec<Result<Vec<u8>, HttpError>>,
) -> Canned {
    (
        status,
        headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        chunks,
    )
}

/// The URLs a fake server was asked for.
type Seen = std::rc::Rc<std::cell::RefCell<Vec<String>>>;

/// A transport answering each request with the next canned response; records the URLs.
fn server(responses: Vec<Canned>) -> (impl FnMut(&Request) -> Result<Head, HttpError>, Seen) {
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let log = seen.clone();
    let mut queue: VecDeque<Canned> = responses.into();
    let open = move |r: &Request| {
        log.borrow_mut().push(r.url.clone());
        let (status, headers, chunks) = queue
            .pop_front()
            .ok_or_else(|| HttpError::new("connection-refused", "no more responses"))?;
        Ok(Head {
            status,
            headers,
            body: Box::new(Chunks(chunks.into())),
        })
    };
    (open, seen)
}

fn input(url: &str, path: &str) -> Value {
    json!({"url": url, "path": path})
}

#[test]
fn a_complete_body_lands_atomically_with_its_sha256() {
    let t = Temp::new("ok");
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let chunks = body.chunks(65536).map(|c| Ok(c.to_vec())).collect();
    let (mut open, _) = server(vec![canned(
        200,
        &[
            ("content-type", "application/octet-stream"),
            ("content-length", "200000"),
        ],
        chunks,
    )]);
    let temp = t.path(".toolgate-download-call-1.part");
    let r = run(
        &input("https://example.com/f.bin", &t.path("f.bin")),
        &t.cx(),
        Some(&temp),
        &mut open,
    )
    .unwrap();
    assert_eq!(fs::read(t.path("f.bin")).unwrap(), body);
    assert_eq!(t.names(), vec!["f.bin"]);
    let sha = hex(&Sha256::digest(&body));
    assert_eq!(r.data["sha256"], sha);
    assert_eq!(r.data["bytes"], 200_000);
    assert_eq!(r.data["path"], "f.bin");
    assert_eq!(r.data["content_type"], "application/octet-stream");
    assert_eq!(r.data["final_url"], "https://example.com/f.bin");
    assert_eq!(r.data["created"], true);
    assert!(r.content.contains(&sha), "{}", r.content);
    assert!(r.summary.contains("200000 bytes"), "{}", r.summary);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn redirects_are_followed_and_reported() {
    let t = Temp::new("redirect");
    let (mut open, seen) = server(vec![
        canned(302, &[("location", "/real/f.txt")], vec![]),
        canned(200, &[], vec![Ok(b"hello".to_vec())]),
    ]);
    let r = run(
        &input("https://example.com/f", &t.path("f.txt")),
        &t.cx(),
        None,
        &mut open,
    )
    .unwrap();
    assert_eq!(fs::read_to_string(t.path("f.txt")).unwrap(), "hello");
    assert_eq!(
        *seen.borrow(),
        vec!["https://example.com/f", "https://example.com/real/f.txt"]
    );
    assert_eq!(r.data["final_url"], "https://example.com/real/f.txt");
    assert_eq!(t.names(), vec!["f.txt"]);
}

#[test]
fn a_refused_redirect_hop_writes_nothing() {
    let t = Temp::new("refused");
    let mut open = |r: &Request| -> Result<Head, HttpError> {
        if r.url.contains("other") {
            return Err(HttpError::new("http-request-denied", "not allowed"));
        }
        Ok(Head {
            status: 302,
            headers: vec![("location".into(), "https://other.example/x".into())],
            body: Box::new(Chunks(VecDeque::new())),
        })
    };
    let e = run(
        &input("https://example.com/f", &t.path("f")),
        &t.cx(),
        None,
        &mut open,
    )
    .unwrap_err();
    assert_eq!(code(&e), "http-request-denied");
    assert!(message(&e).contains("Nothing was written to f."), "{e:?}");
    assert!(t.names().is_empty(), "{:?}", t.names());
}

#[test]
fn a_body_over_max_bytes_leaves_nothing() {
    let t = Temp::new("big");
    // Announced too large: refused before reading.
    let (mut open, _) = server(vec![canned(
        200,
        &[("content-length", "5000")],
        vec![Ok(vec![b'x'; 5000])],
    )]);
    let mut i = input("https://example.com/big", &t.path("big"));
    i["max_bytes"] = json!(1000);
    let e = run(&i, &t.cx(), None, &mut open).unwrap_err();
    assert_eq!(code(&e), "too-large");
    assert!(message(&e).contains("max_bytes=1000"), "{e:?}");
    assert!(t.names().is_empty(), "{:?}", t.names());
    // Not announced: stopped while streaming.
    let (mut open, _) = server(vec![canned(
        200,
        &[],
        vec![Ok(vec![b'x'; 600]), Ok(vec![b'x'; 600])],
    )]);
    let e = run(&i, &t.cx(), None, &mut open).unwrap_err();
    assert_eq!(code(&e), "too-large");
    assert!(t.names().is_empty(), "{:?}", t.names());
    // Exactly max_bytes is fine.
    let (mut open, _) = server(vec![canned(200, &[], vec![Ok(vec![b'x'; 1000])])]);
    run(&i, &t.cx(), None, &mut open).unwrap();
    assert_eq!(t.names(), vec!["big"]);
}

#[test]
fn a_body_cut_short_leaves_nothing() {
    let t = Temp::new("short");
    // The transport's error mid-body.
    let (mut open, _) = server(vec![canned(
        200,
        &[],
        vec![
            Ok(vec![b'x'; 100]),
            Err(HttpError::new("connection-terminated", "closed early")),
        ],
    )]);
    let e = run(
        &input("https://example.com/a", &t.path("a")),
        &t.cx(),
        None,
        &mut open,
    )
    .unwrap_err();
    assert_eq!(code(&e), "connection-terminated");
    assert!(t.names().is_empty(), "{:?}", t.names());
    // Fewer bytes than announced, without an error from the transport.
    let (mut open, _) = server(vec![canned(
        200,
        &[("content-length", "1000")],
        vec![Ok(vec![b'x'; 100])],
    )]);
    let e = run(
        &input("https://example.com/a", &t.path("a")),
        &t.cx(),
        None,
        &mut open,
    )
    .unwrap_err();
    assert_eq!(code(&e), "connection-terminated");
    assert!(t.names().is_empty(), "{:?}", t.names());
}

#[test]
fn a_failure_status_writes_nothing_and_quotes_the_body() {
    let t = Temp::new("status");
    let (mut open, _) = server(vec![canned(
        404,
        &[],
        vec![Ok(b"<h1>no\nsuch file</h1>".to_vec())],
    )]);
    let e = run(
        &input("https://example.com/missing", &t.path("m")),
        &t.cx(),
        None,
        &mut open,
    )
    .unwrap_err();
    assert_eq!(code(&e), "bad-status");
    let m = message(&e);
    assert!(
        m.contains("404 Not Found") && m.contains("no such file"),
        "{m}"
    );
    assert!(t.names().is_empty(), "{:?}", t.names());
}

#[test]
fn an_existing_file_is_kept_without_overwrite() {
    let t = Temp::new("exists");
    fs::write(t.path("f"), "old").unwrap();
    let (mut open, seen) = server(vec![canned(200, &[], vec![Ok(b"new".to_vec())])]);
    let e = run(
        &input("https://example.com/f", &t.path("f")),
        &t.cx(),
        None,
        &mut open,
    )
    .unwrap_err();
    assert_eq!(code(&e), "exists");
    assert!(seen.borrow().is_empty(), "nothing is requested");
    assert_eq!(fs::read_to_string(t.path("f")).unwrap(), "old");
    // With overwrite, replaced.
    let mut i = input("https://example.com/f", &t.path("f"));
    i["overwrite"] = json!(true);
    let r = run(&i, &t.cx(), None, &mut open).unwrap();
    assert_eq!(fs::read_to_string(t.path("f")).unwrap(), "new");
    assert_eq!(r.data["overwritten"], true);
    assert_eq!(t.names(), vec!["f"]);
    // A directory is never a target.
    fs::create_dir(t.path("d")).unwrap();
    let e = run(
        &input("https://example.com/f", &t.path("d")),
        &t.cx(),
        None,
        &mut open,
    )
    .unwrap_err();
    assert_eq!(code(&e), "is-directory");
}

#[test]
fn the_hosts_temp_name_is_used_only_when_it_is_ours_and_beside_the_target() {
    let dir = Path::new("/workspace/sub");
    let target = dir.join("f.bin");
    let ours = "/workspace/sub/.toolgate-download-call-00ff.part";
    assert_eq!(temp_path(&target, Some(ours)), PathBuf::from(ours));
    for bad in [
        "/workspace/other/.toolgate-download-call-00ff.part",
        "/workspace/sub/f.bin",
        "/workspace/sub/.toolgate-download-x",
    ] {
        let t = temp_path(&target, Some(bad));
        assert_ne!(t, PathBuf::from(bad));
        assert_eq!(t.parent(), Some(dir));
        let name = t.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with(TEMP_PREFIX) && name.ends_with(".part"),
            "{name}"
        );
    }
}

#[test]
fn input_is_checked() {
    assert_eq!(
        code(&parse_input(&json!({"url": "ftp://x/y", "path": "/w/a"})).unwrap_err()),
        "bad-url"
    );
    assert_eq!(
        code(&parse_input(&json!({"url": "https://x/y"})).unwrap_err()),
        "bad-input"
    );
    let a = parse_input(&json!({"url": " https://x/y ", "path": "/w/a"})).unwrap();
    assert_eq!(a.max_bytes, DEFAULT_MAX_BYTES);
    assert!(!a.overwrite);
    assert_eq!(a.url, "https://x/y");
    assert_eq!(
        code(
            &parse_input(&json!({"url": "https://x/y", "path": "/w/a", "max_bytes": 0}))
                .unwrap_err()
        ),
        "bad-input"
    );
}

#[test]
fn wasi_error_codes_read_as_their_wit_names() {
    let (c, m) = transport::describe(
        "ErrorCode::DestinationIpProhibited",
        "http://10.0.0.1/",
        "10.0.0.1",
    );
    assert_eq!(c, "destination-ip-prohibited");
    assert!(m.contains("allow_private"), "{m}");
    let (c, _) = transport::describe("HttpResponseBodySize(Some(1024))", "http://h/", "h");
    assert_eq!(c, "too-large");
    let (c, m) = transport::describe("ErrorCode::HttpRequestDenied", "http://h/", "h");
    assert_eq!(c, "http-request-denied");
    assert!(m.contains("download:h"), "{m}");
}

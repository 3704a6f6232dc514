use super::*;
use toolgate_guest::http::{fetch_with, HttpError, Url};

fn resp(status: u16, body: &[u8], headers: &[(&str, &str)]) -> Response {
    Response {
        status,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body: body.to_vec(),
        truncated: false,
        body_bytes_seen: body.len() as u64,
        url: "https://x.example/y".to_string(),
        redirects: Vec::new(),
    }
}

/// `render` with the default format.
fn render(method: &str, url: &str, max_bytes: usize, r: &Response, max_output: usize) -> Report {
    super::render(method, url, max_bytes, r, None, max_output)
}

fn code(e: &ToolError) -> String {
    let dbg = format!("{e:?}");
    let start = dbg.find("code: \"").unwrap() + 7;
    dbg[start..].split('"').next().unwrap().to_string()
}

#[test]
fn url_parsing() {
    let u = Url::parse("https://Example.com/a/../b?q=1#top").unwrap();
    assert_eq!(u.to_string(), "https://example.com/b?q=1");
    assert_eq!(u.authority(), "example.com");
    assert_eq!(
        Url::parse("http://h:8080").unwrap().to_string(),
        "http://h:8080/"
    );
    assert_eq!(
        Url::parse("file:///etc/passwd").unwrap_err().code,
        "bad-url"
    );
    assert_eq!(Url::parse("example.com").unwrap_err().code, "bad-url");
}

#[test]
fn redirect_resolution() {
    let base = Url::parse("https://a.example/docs/v1/index.html?x").unwrap();
    let j = |r: &str| base.join(r).unwrap().to_string();
    assert_eq!(j("page2.html"), "https://a.example/docs/v1/page2.html");
    assert_eq!(j("../v2/"), "https://a.example/docs/v2/");
    assert_eq!(j("/login?next=%2F"), "https://a.example/login?next=%2F");
    assert_eq!(j("//cdn.example/x"), "https://cdn.example/x");
    assert_eq!(j("HTTP://b.example"), "http://b.example/");
}

#[test]
fn redirects_are_followed_in_order() {
    let mut n = 0;
    let out = fetch_with(Request::get("http://a.example/"), MAX_REDIRECTS, |r| {
        n += 1;
        let mut x = resp(
            if n < 3 { 307 } else { 200 },
            b"done",
            &[("location", "step")],
        );
        x.url = r.url.clone();
        Ok(x)
    })
    .unwrap();
    assert_eq!(
        out.redirects,
        vec!["http://a.example/step", "http://a.example/step"]
    );
    assert_eq!(out.url, "http://a.example/step");
    let e: HttpError = fetch_with(Request::get("http://a.example/"), MAX_REDIRECTS, |r| {
        let mut x = resp(301, b"", &[("location", "/loop")]);
        x.url = r.url.clone();
        Ok(x)
    })
    .unwrap_err();
    assert_eq!(e.code, "too-many-redirects");
}

#[test]
fn binary_detection() {
    assert!(looks_binary(b"PNG\0\x01\x02"));
    assert!(!looks_binary("héllo\nworld".as_bytes()));
    let mut late = vec![b'a'; 9000];
    late.push(0);
    assert!(!looks_binary(&late));
    let r = render(
        "GET",
        "https://x/y",
        100,
        &resp(200, b"\0\0\0", &[("content-type", "image/png")]),
        4096,
    );
    assert!(
        r.content.contains("binary body: 3 bytes of image/png"),
        "{}",
        r.content
    );
    assert!(!r.content.contains('\0'));
    assert!(r.truncated);
    assert_eq!(r.totals, vec![("bytes", 3, 0)]);
}

#[test]
fn summary_and_data() {
    let r = render(
        "GET",
        "https://x/y",
        1 << 20,
        &resp(
            404,
            b"not here",
            &[
                ("Content-Type", "text/html; charset=utf-8"),
                ("Set-Cookie", "a=1"),
                ("set-cookie", "b=2"),
            ],
        ),
        4096,
    );
    assert_eq!(
        r.summary,
        "GET https://x/y -> 404 (8 bytes, text/html) as markdown"
    );
    assert_eq!(r.content, "not here\n");
    assert!(!r.truncated);
    assert_eq!(r.totals[0], ("bytes", 8, 8));
    assert_eq!(r.data["status"], 404);
    assert_eq!(r.data["final_url"], "https://x.example/y");
    assert_eq!(
        r.data["headers"]["content-type"],
        "text/html; charset=utf-8"
    );
    assert_eq!(r.data["headers"]["set-cookie"], "a=1, b=2");
}

#[test]
fn cut_by_output_budget() {
    let body: String = (0..400).map(|i| format!("line {i}\n")).collect();
    let r = render(
        "GET",
        "https://x/y",
        1 << 20,
        &resp(200, body.as_bytes(), &[]),
        1024,
    );
    assert!(r.truncated);
    assert!(r.content.len() <= 1024, "{}", r.content.len());
    assert!(
        r.content.contains("[truncated: showing the first"),
        "{}",
        r.content
    );
    let (_, seen, returned) = r.totals[0];
    assert_eq!(seen, body.len() as u64);
    assert!(returned < seen && returned > 0);
    assert!(r.content.starts_with(&body[..returned as usize]));
    assert!(r.summary.ends_with(", cut"), "{}", r.summary);
}

#[test]
fn cut_by_max_bytes() {
    let mut x = resp(200, b"abcd", &[("content-type", "text/plain")]);
    x.truncated = true;
    x.body_bytes_seen = 10;
    let r = render("GET", "https://x/y", 4, &x, 4096);
    assert!(r.truncated);
    assert!(
        r.content.starts_with("abcd\n[body cut at max_bytes=4"),
        "{}",
        r.content
    );
    assert_eq!(r.totals, vec![("bytes", 10, 4)]);
    assert_eq!(
        r.summary,
        "GET https://x/y -> 200 (10+ bytes, text/plain), cut"
    );
}

#[test]
fn cut_point_respects_utf8_and_newlines() {
    let s = "ab\ncdé".as_bytes(); // é is 2 bytes at 5..7
    assert_eq!(cut_point(s, 100), s.len());
    assert_eq!(cut_point(s, 6), 3); // would split é; backs off to 5, then to the newline
    assert_eq!(cut_point(b"abcdef", 4), 4);
    assert_eq!(cut_point("éé".as_bytes(), 3), 2);
}

#[test]
fn invalid_utf8_is_replaced_and_still_fits() {
    let body = vec![0xFFu8; 2000];
    let r = render("GET", "https://x/y", 1 << 20, &resp(200, &body, &[]), 1024);
    assert!(r.content.len() <= 1024);
    assert!(r.truncated);
}

#[test]
fn empty_and_head() {
    let r = render("HEAD", "https://x/y", 1 << 20, &resp(200, b"", &[]), 4096);
    assert_eq!(r.content, "[empty body]\n");
    assert!(!r.truncated);
}

#[test]
fn input_validation() {
    let (req, max) = parse_input(&json!({"url": "https://a.example/x", "method": "post", "headers": {"Accept": "text/plain"}, "body": "hi", "max_bytes": 10})).unwrap();
    assert_eq!(req.method, "POST");
    assert_eq!(
        req.headers,
        vec![("Accept".to_string(), "text/plain".to_string())]
    );
    assert_eq!(req.body.as_deref(), Some(&b"hi"[..]));
    assert_eq!(max, 10);
    let (req, max) = parse_input(&json!({"url": "http://a.example"})).unwrap();
    assert_eq!(req.method, "GET");
    assert_eq!(max, DEFAULT_MAX_BYTES as usize);

    for bad in [
        json!({}),
        json!({"url": "https://a/", "method": "TRACE"}),
        json!({"url": "https://a/", "headers": {"a": 1}}),
        json!({"url": "https://a/", "body": "x"}),
        json!({"url": "https://a/", "max_bytes": 0}),
        json!({"url": "https://a/", "max_bytes": MAX_MAX_BYTES + 1}),
    ] {
        assert_eq!(code(&parse_input(&bad).unwrap_err()), "bad-input", "{bad}");
    }
    assert_eq!(
        code(&parse_input(&json!({"url": "ftp://a/"})).unwrap_err()),
        "bad-url"
    );
}

#[test]
fn run_outside_wasm_reports_the_sdk_error() {
    let cx = Context::for_tests("/ws", 4096, &[]);
    let e = run(&json!({"url": "https://a.example/"}), &cx).unwrap_err();
    assert_eq!(code(&e), "unsupported");
}

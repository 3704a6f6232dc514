//! Hostile and malformed pages: no panic, no stack overflow, and every limit cut visibly.

use super::*;

const PAGE: &str = "https://docs.example/guide/intro.html";

fn md(html: &str) -> String {
    convert(html, PAGE, Mode::Markdown).text
}

fn page(body: &[u8]) -> Response {
    Response {
        status: 200,
        headers: vec![("content-type".to_string(), "text/html".to_string())],
        body: body.to_vec(),
        truncated: false,
        body_bytes_seen: body.len() as u64,
        url: PAGE.to_string(),
        redirects: Vec::new(),
    }
}

#[test]
fn malformed_html_converts_without_panicking() {
    let cases: Vec<Vec<u8>> = vec![
        b"<div><p>unclosed <b>bold <i>both</div> after".to_vec(),
        b"<table><tr><td>cell<table><td>inner</tr></p></li></ul>".to_vec(),
        b"</a></b></html></body><p>stray ends".to_vec(),
        b"<a href=\"x><p>never closed attribute".to_vec(),
        b"<<<>>><!--- -- -><!DOCTYPE><html<body>>".to_vec(),
        b"<ul><li>a<li>b<ol><li>c</ul>d".to_vec(),
        b"<pre><code>unterminated".to_vec(),
        b"<template><template><td></template><svg><foreignObject><p>x".to_vec(),
        b"<select><option>a<table><caption><select><frameset>".to_vec(),
        b"<math><mi><svg><desc><p>mixed namespaces</p></math>".to_vec(),
        (0u8..=255).cycle().take(5000).collect(),
        vec![0xff, 0xfe, b'<', b'p', b'>', 0xc3, b'x', 0x80, b'<', b'/'],
    ];
    for case in &cases {
        let html = String::from_utf8_lossy(case);
        for mode in [Mode::Markdown, Mode::Text] {
            let _ = convert(&html, PAGE, mode);
        }
    }
    let out = md("<div><p>unclosed <b>bold <i>both</div> after");
    assert!(out.contains("unclosed") && out.contains("after"), "{out}");
}

#[test]
fn deep_nesting_is_flattened_not_a_stack_overflow() {
    // Run on a small stack so a recursive walk of the whole depth would overflow.
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let mut html = String::new();
            for i in 0..1000 {
                html.push_str(&format!("<div><span>d{i}</span>"));
            }
            html.push_str("bottom");
            let c = convert(&html, PAGE, Mode::Markdown);
            let t = convert(&html, PAGE, Mode::Text);
            (c, t)
        })
        .unwrap();
    let (c, t) = handle.join().unwrap();
    assert!(c.flattened && c.cut.is_none(), "{:?}", c.cut);
    assert!(
        c.text.contains("d0") && c.text.contains("d999"),
        "{}",
        &c.text[..200]
    );
    assert!(c.text.contains("bottom"));
    assert!(t.text.contains("bottom"));
}

#[test]
fn nesting_past_the_parse_depth_is_cut_visibly_and_quickly() {
    let html = "<div>".repeat(200_000) + "bottom";
    let started = std::time::Instant::now();
    let r = render("GET", PAGE, 1 << 20, &page(html.as_bytes()), None, 8192);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(r.truncated);
    assert!(
        r.content
            .contains("[page cut: it nests HTML elements more than 1024 deep, so only its first"),
        "{}",
        r.content
    );
}

#[test]
fn an_element_bomb_is_cut_at_the_limit() {
    // Unclosed formatting elements are re-created after every block that closes them: a
    // small page asks for hundreds of millions of elements.
    let mut html = String::from("<div>");
    for i in 0..800 {
        html.push_str(&format!("<b c={i}>"));
    }
    html.push_str("</div>");
    for _ in 0..100_000 {
        html.push_str("<div>x</div>");
    }
    let started = std::time::Instant::now();
    let c = convert(&html, PAGE, Mode::Text);
    let cut = c.cut.unwrap();
    assert!(
        cut.parsed_bytes < html.len() && cut.limit == Limit::Elements,
        "{cut:?}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let r = render("GET", PAGE, 1 << 20, &page(html.as_bytes()), None, 8192);
    assert!(r.truncated);
    assert!(
        r.content.contains("[page cut: it builds more than"),
        "{}",
        r.content
    );
}

#[test]
fn tag_soup_past_small_limits_never_panics() {
    // The capped sink's placeholders in every odd parser state: tiny limits, tricky tags.
    const TAGS: &[&str] = &[
        "<table>",
        "</table>",
        "<td>",
        "<tr>",
        "</tr>",
        "<b x=1>",
        "<b x=2>",
        "</b>",
        "<i>",
        "</i>",
        "<a href=/y>",
        "</a>",
        "<p>",
        "</p>",
        "<form>",
        "</form>",
        "<template>",
        "</template>",
        "<svg>",
        "</svg>",
        "<math>",
        "<mi>",
        "<select>",
        "<option>",
        "</select>",
        "<frameset>",
        "<li>",
        "<ul>",
        "</ul>",
        "<h1>",
        "</h1>",
        "<pre>",
        "<textarea>",
        "</textarea>",
        "<script>",
        "</script>",
        "<caption>",
        "<colgroup>",
        "<col>",
        "<tbody>",
        "<html>",
        "<body>",
        "<head>",
        "<foreignObject>",
        "<desc>",
        "<title>",
        "</div>",
        "<div>",
        "<nobr>",
        "<marquee>",
        "</marquee>",
        "<button>",
        "<isindex>",
        "<image>",
        "<hr>",
        "x y ",
        "&amp;",
        "<!-- c -->",
        "<br>",
        "</br>",
        "</p>",
        "<dd>",
        "<dt>",
        "<ruby><rt>",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..300 {
        let mut html = String::new();
        for _ in 0..400 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            html.push_str(TAGS[(seed % TAGS.len() as u64) as usize]);
        }
        let limits = [(5, 4), (40, 8), (200, 30), (1000, 1000)][round % 4];
        let deadline = std::time::Instant::now() + PARSE_TIME;
        let (doc, _) = html::parse_capped(&html, limits.0, limits.1, deadline);
        drop(doc);
        let _ = convert(&html, PAGE, Mode::Markdown);
        let _ = convert(&html, PAGE, Mode::Text);
    }
}

#[test]
fn a_page_too_slow_to_parse_is_cut_at_the_time_limit() {
    // One tag with ~145,000 attributes: html5ever checks each new attribute against all the
    // earlier ones, so this 1 MiB page would take minutes inside the component.
    let mut html = String::from("<p>before</p><div");
    let mut i = 0;
    while html.len() < 1 << 20 {
        html.push_str(&format!(" a{i}"));
        i += 1;
    }
    html.push_str(">x</div>");
    let started = std::time::Instant::now();
    let r = render("GET", PAGE, 1 << 20, &page(html.as_bytes()), None, 8192);
    assert!(
        started.elapsed() < PARSE_TIME + std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(r.truncated);
    assert!(r.content.starts_with("before"), "{}", r.content);
    assert!(
        r.content
            .contains("[page cut: it took too long to parse, so only its first"),
        "{}",
        r.content
    );
}

#[test]
fn every_note_fits_in_the_output_limit() {
    // Cut three ways at once: by the output limit, by the element limit, by max_bytes.
    let mut html = String::from("<div>");
    for i in 0..800 {
        html.push_str(&format!("<b c={i}>"));
    }
    html.push_str("</div>");
    html.push_str(&"<div>x</div>".repeat(40_000));
    let mut resp = page(html.as_bytes());
    resp.truncated = true;
    resp.body_bytes_seen = 50 << 20;
    for limit in [1024, 2048, 8192] {
        let r = render("GET", PAGE, html.len(), &resp, None, limit);
        assert!(r.content.len() <= limit, "{limit}: {}", r.content.len());
        for note in ["[truncated: ", "[page cut: ", "[body cut at max_bytes="] {
            assert!(
                r.content.contains(note),
                "{note} missing at {limit}: {}",
                r.content
            );
        }
    }
}

#[test]
fn the_parse_deadline_counts_from_the_start_of_the_call() {
    use std::time::{Duration, Instant};
    let now = Instant::now();
    let fresh = parse_deadline(now);
    assert!(fresh >= now + PARSE_TIME && fresh < now + PARSE_TIME + Duration::from_secs(1));
    // A call whose download took 20 s still parses for the minimum, not for PARSE_TIME.
    if let Some(long_ago) = now.checked_sub(Duration::from_secs(20)) {
        let late = parse_deadline(long_ago);
        assert!(late < now + MIN_PARSE_TIME + Duration::from_secs(1));
    }
    // A deadline already passed: the first piece is converted, the rest cut visibly.
    let html = "<p>first words</p>".repeat(10_000);
    let r = render_by(
        "GET",
        PAGE,
        1 << 20,
        &page(html.as_bytes()),
        None,
        4096,
        now,
    );
    assert!(r.content.starts_with("first words"), "{}", r.content);
    assert!(
        r.content.contains("[page cut: it took too long to parse"),
        "{}",
        r.content
    );
}

#[test]
fn structures_flattened_at_the_depth_limit_still_convert() {
    // At MAX_DEPTH an element's children become one text node: a table, a list or a code
    // block there must still convert.
    let tags = [
        "table",
        "thead",
        "tbody",
        "tr",
        "td",
        "ul",
        "ol",
        "li",
        "pre",
        "code",
        "blockquote",
        "a href=/x",
        "h1",
        "p",
        "b",
        "dl",
        "span",
        "img src=/i.png alt=a",
    ];
    for depth in MAX_DEPTH - 4..MAX_DEPTH + 2 {
        for tag in tags {
            let name = tag.split(' ').next().unwrap();
            let html = format!(
                "{}<{tag}><table><tr><td><ul><li><pre><code>x y</code></pre></li></ul></td></tr></table></{name}>after",
                "<div>".repeat(depth)
            );
            for mode in [Mode::Markdown, Mode::Text] {
                let c = convert(&html, PAGE, mode);
                assert!(c.text.contains("after"), "{depth} {tag}: {}", c.text);
            }
        }
    }
}

//! The HTML conversion, natively: what is dropped, what is kept, and hostile input.

use super::*;
use crate::body;

const PAGE: &str = "https://docs.example/guide/intro.html";

fn md(html: &str) -> String {
    convert(html, PAGE, Mode::Markdown).text
}

fn text(html: &str) -> String {
    convert(html, PAGE, Mode::Text).text
}

fn page(status: u16, body: &[u8], ctype: Option<&str>) -> Response {
    Response {
        status,
        headers: ctype
            .map(|c| vec![("content-type".to_string(), c.to_string())])
            .unwrap_or_default(),
        body: body.to_vec(),
        truncated: false,
        body_bytes_seen: body.len() as u64,
        url: PAGE.to_string(),
        redirects: Vec::new(),
    }
}

#[test]
fn scripts_styles_and_hidden_elements_are_dropped() {
    let html = r#"<html><head><title>Guide</title><style>body { color: red }</style>
        <script>var secret = "SCRIPT-TEXT";</script></head><body>
        <p>Visible one.</p>
        <script>document.write("SCRIPT-WRITE")</script>
        <noscript>NOSCRIPT-TEXT</noscript>
        <template><p>TEMPLATE-TEXT</p></template>
        <div hidden>HIDDEN-ATTR</div>
        <span aria-hidden="true">ARIA-HIDDEN</span>
        <div style="color: red; display : none">INLINE-NONE</div>
        <p style="visibility:hidden">INLINE-INVISIBLE</p>
        <form role="search"><label>SEARCH-LABEL</label><input name=q><button>GO-BUTTON</button></form>
        <iframe src="/ad">IFRAME-TEXT</iframe>
        <svg><text>SVG-TEXT</text></svg>
        <!-- COMMENT-TEXT -->
        <p>Visible two.</p></body></html>"#;
    for out in [md(html), text(html)] {
        assert!(out.contains("Visible one."), "{out}");
        assert!(out.contains("Visible two."), "{out}");
        for gone in [
            "SCRIPT",
            "color: red",
            "NOSCRIPT",
            "TEMPLATE",
            "HIDDEN",
            "INLINE",
            "SEARCH",
            "GO-BUTTON",
            "IFRAME",
            "SVG",
            "COMMENT",
        ] {
            assert!(!out.contains(gone), "{gone} in {out}");
        }
    }
}

#[test]
fn the_title_is_on_top() {
    let html =
        "<html><head><title>  The\n Guide </title></head><body><p>Body text</p></body></html>";
    let c = convert(html, PAGE, Mode::Markdown);
    assert_eq!(c.title.as_deref(), Some("The Guide"));
    assert!(c.text.starts_with("# The Guide\n\nBody text"), "{}", c.text);
    let t = text(html);
    assert!(t.starts_with("The Guide\n\nBody text"), "{t}");
    // Not repeated when the page starts with the same heading.
    let c = md("<title>Same</title><h1>Same</h1><p>x</p>");
    assert_eq!(c.matches("Same").count(), 1, "{c}");
}

#[test]
fn links_are_kept_and_made_absolute() {
    let out = md(
        r##"<p>See <a href="setup.html">the setup</a>, <a href="/api/">the API</a>,
        <a href="https://other.example/x">elsewhere</a>, <a href="#top">the top</a>,
        <a href="../faq.html#q2">a question</a>, <a href="mailto:a@b.example">mail</a>
        and <a href="javascript:alert(1)">a script link</a>.</p>
        <img src="img/shot.png" alt="A screenshot"><img src="data:image/png;base64,AAAA" alt="inline">"##,
    );
    for want in [
        "[the setup](https://docs.example/guide/setup.html)",
        "[the API](https://docs.example/api/)",
        "[elsewhere](https://other.example/x)",
        "[the top](#top)",
        "[a question](https://docs.example/faq.html#q2)",
        "[mail](mailto:a@b.example)",
        "![A screenshot](https://docs.example/guide/img/shot.png)",
    ] {
        assert!(out.contains(want), "{want} not in {out}");
    }
    assert!(out.contains("a script link"), "{out}");
    assert!(!out.contains("javascript:"), "{out}");
    assert!(!out.contains("base64"), "{out}");
    // `<base href>` moves the base.
    let out = md(r#"<head><base href="https://cdn.example/v2/"></head><a href="x.html">x</a>"#);
    assert!(out.contains("[x](https://cdn.example/v2/x.html)"), "{out}");
    // Text mode keeps the words, not the URLs.
    let t = text(r#"<p>See <a href="setup.html">the setup</a> now.</p>"#);
    assert_eq!(t, "See the setup now.\n");
}

#[test]
fn nested_lists() {
    let html = "<ul><li>one<ul><li>one.a</li><li>one.b<ol><li>deep</li></ol></li></ul></li><li>two</li></ul>";
    let out = md(html);
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines[0], "- one", "{out}");
    assert!(
        lines[1].starts_with("  ") && lines[1].trim() == "- one.a",
        "{out}"
    );
    assert!(lines[2].trim() == "- one.b", "{out}");
    assert!(
        lines[3].starts_with("    ") && lines[3].trim() == "1. deep",
        "{out}"
    );
    assert_eq!(lines[4], "- two", "{out}");
    let t = text(html);
    assert_eq!(
        t, "• one\n  • one.a\n  • one.b\n    1. deep\n• two\n",
        "{t}"
    );
}

#[test]
fn code_blocks_keep_their_text() {
    let html = "<p>Run <code>cargo build</code>:</p><pre><code class=\"language-sh\">cargo build --release\n\n\n  ./run &lt;arg&gt;\n</code></pre>";
    let out = md(html);
    assert!(out.contains("`cargo build`"), "{out}");
    assert!(out.contains("```"), "{out}");
    assert!(
        out.contains("cargo build --release\n\n\n  ./run <arg>"),
        "{out}"
    );
    let t = text(html);
    assert!(t.contains("Run cargo build:"), "{t}");
    assert!(t.contains("  ./run <arg>"), "{t}");
    assert!(!t.contains('`'), "{t}");
}

#[test]
fn tables_are_readable() {
    let html = "<table><thead><tr><th>Name</th><th>Size</th></tr></thead>\
        <tbody><tr><td>a.txt</td><td>10</td></tr><tr><td>b.txt</td><td>20</td></tr></tbody></table>";
    let out = md(html);
    assert!(out.contains("| Name"), "{out}");
    assert!(out.contains("| a.txt"), "{out}");
    assert!(out.contains("---"), "{out}");
    let t = text(html);
    assert_eq!(t, "Name | Size\na.txt | 10\nb.txt | 20\n", "{t}");
}

#[test]
fn entities_are_decoded() {
    let html = "<p>Tom &amp; Jerry &lt;3 &quot;caf&eacute;&quot; &#x263A; &nbsp;&copy;</p>";
    let t = text(html);
    assert!(t.contains("Tom & Jerry <3 \"café\" ☺"), "{t}");
    assert!(t.contains('©'), "{t}");
    let out = md(html);
    assert!(out.contains("Tom & Jerry"), "{out}");
    assert!(out.contains("café"), "{out}");
}

#[test]
fn headings_and_emphasis() {
    let out = md("<h2>Install</h2><p>It is <strong>fast</strong> and <em>small</em>.</p>");
    assert!(out.contains("## Install"), "{out}");
    assert!(out.contains("**fast**"), "{out}");
    assert!(out.contains("*small*"), "{out}");
    let t = text("<h2>Install</h2><p>It is <strong>fast</strong>.</p>");
    assert_eq!(t, "Install\n\nIt is fast.\n");
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
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, html.as_bytes(), Some("text/html")),
        None,
        8192,
    );
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
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, html.as_bytes(), Some("text/html")),
        None,
        8192,
    );
    assert!(r.truncated);
    assert!(
        r.content.contains("[page cut: it builds more than"),
        "{}",
        r.content
    );
}

#[test]
fn format_choice_and_passthrough() {
    let html = b"<html><head><title>T</title></head><body><p>Hi <a href=\"/x\">there</a></p><script>alert('S')</script></body></html>";
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, html, Some("text/html; charset=utf-8")),
        None,
        4096,
    );
    assert!(
        r.content.contains("[there](https://docs.example/x)"),
        "{}",
        r.content
    );
    assert!(!r.content.contains("alert"), "{}", r.content);
    assert_eq!(r.data["format"], "markdown");
    assert_eq!(r.data["title"], "T");
    assert!(r.summary.ends_with("as markdown"), "{}", r.summary);

    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, html, Some("text/html")),
        Some(Format::Text),
        4096,
    );
    assert_eq!(r.content, "T\n\nHi there\n");
    assert_eq!(r.data["format"], "text");

    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, html, Some("text/html")),
        Some(Format::Raw),
        4096,
    );
    assert_eq!(r.content.as_bytes(), html);
    assert_eq!(r.data["format"], "raw");

    // An untyped page that starts like HTML is HTML.
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, b"\n<!DOCTYPE html><p>x</p>", None),
        None,
        4096,
    );
    assert_eq!(r.data["format"], "markdown");

    // JSON and plain text pass through whatever the format.
    let json = br#"{"a": "<b>not html</b>", "n": [1, 2]}"#;
    for f in [
        None,
        Some(Format::Markdown),
        Some(Format::Text),
        Some(Format::Raw),
    ] {
        let r = render(
            "GET",
            PAGE,
            1 << 20,
            &page(200, json, Some("application/json")),
            f,
            4096,
        );
        assert_eq!(r.content.as_bytes(), json);
        assert_eq!(r.data["format"], "raw");
        let r = render(
            "GET",
            PAGE,
            1 << 20,
            &page(200, b"<p>plain</p>", Some("text/plain")),
            f,
            4096,
        );
        assert_eq!(r.content, "<p>plain</p>");
    }
}

#[test]
fn binary_bodies_are_described() {
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, png, Some("image/png")),
        None,
        4096,
    );
    assert!(
        r.content
            .starts_with("[binary body: 16 bytes of image/png (a PNG image); not shown"),
        "{}",
        r.content
    );
    assert_eq!(r.data["format"], "binary");
    // Typed as binary though the bytes are text; untyped, known by its signature or its bytes.
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, b"%PDF-1.7 text-ish", Some("application/pdf")),
        None,
        4096,
    );
    assert!(
        r.content.contains("of application/pdf (a PDF document)"),
        "{}",
        r.content
    );
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, b"GIF89a....", None),
        None,
        4096,
    );
    assert!(
        r.content.contains("of unknown type (a GIF image)"),
        "{}",
        r.content
    );
    let noise: Vec<u8> = (0..4000u32)
        .map(|i| (i * 7919 % 251) as u8 | 0x80)
        .collect();
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, &noise, Some("text/html")),
        None,
        4096,
    );
    assert!(
        r.content
            .starts_with("[binary body: 4000 bytes of text/html"),
        "{}",
        r.content
    );
    // SVG is text; Latin-1 text is text.
    assert!(!body::is_binary_type("image/svg+xml"));
    let latin = b"<p>caf\xe9 cr\xe8me br\xfbl\xe9e</p>";
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, latin, Some("text/html; charset=ISO-8859-1")),
        None,
        4096,
    );
    assert_eq!(r.content, "café crème brûlée\n");
    let cp = b"<p>\x93quoted\x94 \x80 5</p>";
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, cp, Some("text/html; charset=windows-1252")),
        None,
        4096,
    );
    assert_eq!(r.content, "“quoted” € 5\n");
    let meta = b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=ISO-8859-1\"></head><p>na\xefve</p>";
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, meta, Some("text/html")),
        None,
        4096,
    );
    assert_eq!(r.content, "naïve\n");
}

#[test]
fn converted_output_is_cut_to_the_budget_visibly() {
    let mut html = String::from("<html><body>");
    for i in 0..2000 {
        html.push_str(&format!("<p>Paragraph number {i} with some words.</p>"));
    }
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, html.as_bytes(), Some("text/html")),
        None,
        4096,
    );
    assert!(r.truncated);
    assert!(r.content.len() <= 4096, "{}", r.content.len());
    assert!(
        r.content.starts_with("Paragraph number 0 with some words."),
        "{}",
        &r.content[..100]
    );
    assert!(
        r.content.contains("[truncated: showing the first "),
        "{}",
        r.content
    );
    assert!(r
        .content
        .contains("bytes of the page as markdown (output limit 4096 bytes)]"));
    assert!(!r.content.contains("<p>"));
    assert!(r.summary.ends_with(", cut"), "{}", r.summary);
}

#[test]
fn format_validation() {
    assert_eq!(parse_format(&json!({"url": "x"})).unwrap(), None);
    assert_eq!(
        parse_format(&json!({"format": "Text"})).unwrap(),
        Some(Format::Text)
    );
    assert_eq!(
        parse_format(&json!({"format": "raw"})).unwrap(),
        Some(Format::Raw)
    );
    assert!(parse_format(&json!({"format": "pdf"})).is_err());
    assert!(parse_format(&json!({"format": 3})).is_err());
}

#[test]
fn the_description_names_the_hosts_placeholder_and_the_format_option() {
    let d = include_str!("../description.md");
    assert!(d.contains("{{fetch.hosts}}"));
    assert!(d.contains("format"));
    assert!(d.len() < 2600, "{}", d.len());
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
        let (doc, _) = html::parse_capped(&html, limits.0, limits.1);
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
    let r = render(
        "GET",
        PAGE,
        1 << 20,
        &page(200, html.as_bytes(), Some("text/html")),
        None,
        8192,
    );
    assert!(
        started.elapsed() < PARSE_TIME + std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(r.truncated);
    assert!(r.content.starts_with("before"), "{}", r.content);
    assert!(
        r.content
            .contains("[page cut: it took the HTML parser longer than 8 s, so only its first"),
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
    let mut resp = page(200, html.as_bytes(), Some("text/html"));
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

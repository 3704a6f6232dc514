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

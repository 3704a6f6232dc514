//! HTML pages as Markdown or plain text, converted inside the component.
//!
//! The page is parsed with html5ever into a tree capped at [`MAX_ELEMENTS`] elements (see
//! [`crate::sink`]), cleaned (scripts, styles, hidden elements, form controls, frames, embeds
//! and SVG dropped; the title taken out; links resolved against the page's URL; nesting below
//! [`MAX_DEPTH`] flattened to text so no later walk can run out of stack), then written as
//! Markdown by `htmd` or as plain text by [`crate::plain`].

use std::rc::Rc;
use std::time::{Duration, Instant};

use htmd::options::{BulletListMarker, Options};
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::tree_builder::TreeBuilderOpts;
use html5ever::ParseOpts;
use markup5ever_rcdom::{Handle, Node, NodeData};
use toolgate_guest::http::Url;

use crate::sink::{Budget, Capped};

/// Elements built before the rest of a page is skipped.
pub const MAX_ELEMENTS: usize = 200_000;
/// How deep the parser may nest elements before the rest of a page is skipped.
pub const MAX_PARSE_DEPTH: u32 = 1024;
/// Element nesting kept; anything deeper becomes the text it contains.
pub const MAX_DEPTH: usize = 64;
/// The longest a parse may take before the rest of a page is skipped. Some inputs cost the
/// parser far more than their size (a tag with a hundred thousand attributes is quadratic), and
/// the call's deadline would otherwise end it with nothing shown.
pub const PARSE_TIME: Duration = Duration::from_secs(8);
/// Bytes handed to the parser at a time (the limits are checked between pieces).
const FEED_BYTES: usize = 4 * 1024;

/// Elements dropped with everything inside them.
const DROPPED: &[&str] = &[
    "script", "style", "noscript", "template", "iframe", "frame", "frameset", "object", "embed",
    "applet", "canvas", "svg", "audio", "video", "source", "track", "map", "input", "button",
    "select", "textarea", "option", "optgroup", "datalist", "output", "label", "search", "link",
    "meta", "base", "title", "param", "slot", "portal", "dialog",
];

/// What a page became.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Converted {
    /// The Markdown or text, the title on top.
    pub text: String,
    /// The page's `<title>`, whitespace collapsed.
    pub title: Option<String>,
    /// When a limit stopped the parse: how many bytes of the page were parsed, and why.
    pub cut: Option<Cut>,
    /// Whether nesting deeper than [`MAX_DEPTH`] was flattened to text.
    pub flattened: bool,
}

/// The output a page is converted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Markdown: headings, lists, links, code blocks, tables.
    Markdown,
    /// Plain text without markup.
    Text,
}

/// Convert `html`, a page fetched from `page_url` (relative links resolve against it).
pub fn convert(html: &str, page_url: &str, mode: Mode) -> Converted {
    convert_by(html, page_url, mode, Instant::now() + PARSE_TIME)
}

/// [`convert`], the parse stopping at `deadline`.
pub fn convert_by(html: &str, page_url: &str, mode: Mode, deadline: Instant) -> Converted {
    let (doc, cut) = parse(html, deadline);
    let cleaned = clean(&doc);
    let base = Url::parse(page_url).ok().map(|u| match &cleaned.base_href {
        Some(b) => u.join(b).unwrap_or(u),
        None => u,
    });
    if let Some(base) = &base {
        for el in &cleaned.links {
            resolve_links(el, base);
        }
    }
    let body = match mode {
        Mode::Markdown => markdown(&doc),
        Mode::Text => crate::plain::render(&doc),
    };
    let mut text = String::new();
    if let Some(title) = &cleaned.title {
        let head = match mode {
            Mode::Markdown => format!("# {title}"),
            Mode::Text => title.clone(),
        };
        if !body.starts_with(&head) {
            text.push_str(&head);
            text.push_str("\n\n");
        }
    }
    text.push_str(&body);
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    Converted {
        text,
        title: cleaned.title,
        cut,
        flattened: cleaned.flattened,
    }
}

/// Which limit stopped a parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// [`MAX_ELEMENTS`].
    Elements,
    /// [`MAX_PARSE_DEPTH`].
    Depth,
    /// The parse deadline ([`PARSE_TIME`]).
    Time,
}

/// Why a parse stopped early and how many bytes of the page it had read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Bytes of the page given to the parser.
    pub parsed_bytes: usize,
    /// The limit reached.
    pub limit: Limit,
}

/// Parse a page into a capped tree, stopping at `deadline`; `Some` when a limit cut it.
pub fn parse(html: &str, deadline: Instant) -> (Handle, Option<Cut>) {
    parse_capped(html, MAX_ELEMENTS, MAX_PARSE_DEPTH, deadline)
}

/// [`parse`] with other limits.
pub fn parse_capped(
    html: &str,
    max_elements: usize,
    max_depth: u32,
    deadline: Instant,
) -> (Handle, Option<Cut>) {
    let budget = Rc::new(Budget::default());
    let sink = Capped::new(max_elements, max_depth, budget.clone());
    let opts = ParseOpts {
        tree_builder: TreeBuilderOpts {
            scripting_enabled: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut parser = html5ever::parse_document(sink, opts);
    let mut start = 0;
    let mut timed_out = false;
    while start < html.len() {
        let mut end = (start + FEED_BYTES).min(html.len());
        while !html.is_char_boundary(end) {
            end += 1;
        }
        parser.process(StrTendril::from_slice(&html[start..end]));
        start = end;
        if budget.over.get() {
            break;
        }
        if start < html.len() && Instant::now() > deadline {
            timed_out = true;
            break;
        }
    }
    let sink = parser.finish();
    let limit = if budget.too_deep.get() {
        Some(Limit::Depth)
    } else if budget.over.get() {
        Some(Limit::Elements)
    } else if timed_out {
        Some(Limit::Time)
    } else {
        None
    };
    let cut = limit.map(|limit| Cut {
        parsed_bytes: start,
        limit,
    });
    (sink.dom.document.clone(), cut)
}

struct Cleaned {
    title: Option<String>,
    base_href: Option<String>,
    links: Vec<Handle>,
    flattened: bool,
}

fn tag(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(&name.local),
        _ => None,
    }
}

fn attr(node: &Node, name: &str) -> Option<String> {
    match &node.data {
        NodeData::Element { attrs, .. } => attrs
            .borrow()
            .iter()
            .find(|a| &*a.name.local == name)
            .map(|a| a.value.to_string()),
        _ => None,
    }
}

/// Whether an element is hidden from a reader: `hidden`, `aria-hidden="true"`, or an inline
/// style with `display: none` or `visibility: hidden`.
pub fn is_hidden(node: &Node) -> bool {
    let NodeData::Element { attrs, .. } = &node.data else {
        return false;
    };
    attrs.borrow().iter().any(|a| match &*a.name.local {
        "hidden" => true,
        "aria-hidden" => a.value.trim().eq_ignore_ascii_case("true"),
        "style" => {
            let s: String = a
                .value
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>()
                .to_ascii_lowercase();
            s.contains("display:none") || s.contains("visibility:hidden")
        }
        _ => false,
    })
}

/// Whether a node is left out of the output with all it contains.
fn is_dropped(node: &Node) -> bool {
    match &node.data {
        NodeData::Text { .. } => false,
        NodeData::Element { .. } => {
            let t = tag(node).unwrap_or("");
            DROPPED.contains(&t)
                || is_hidden(node)
                || (t == "form" && attr(node, "role").is_some_and(|r| r == "search"))
        }
        _ => true,
    }
}

/// The text inside `node`, whitespace collapsed (`<title>`).
fn inner_text(node: &Handle) -> String {
    let mut out = String::new();
    let mut stack = vec![node.clone()];
    while let Some(n) = stack.pop() {
        if let NodeData::Text { contents } = &n.data {
            out.push_str(&contents.borrow());
            out.push(' ');
        }
        stack.extend(n.children.borrow().iter().rev().cloned());
    }
    collapse(&out)
}

/// Runs of whitespace as one space, trimmed.
pub fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The visible text under `node`, for a subtree too deep to keep: one line per block.
fn flat_text(node: &Handle) -> String {
    let mut out = String::new();
    let mut stack = vec![node.clone()];
    while let Some(n) = stack.pop() {
        match &n.data {
            NodeData::Text { contents } => {
                out.push_str(&contents.borrow());
            }
            NodeData::Element { .. } if is_dropped(&n) => continue,
            NodeData::Element { .. } => {
                if crate::plain::is_block(tag(&n).unwrap_or("")) {
                    out.push('\n');
                }
                stack.extend(n.children.borrow().iter().rev().cloned());
            }
            _ => {}
        }
    }
    out.lines()
        .map(collapse)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Drop what a reader does not see, take out the title and `<base href>`, collect the
/// links, flatten what is nested too deep. Iterative: the tree can be as deep as the page.
fn clean(doc: &Handle) -> Cleaned {
    let mut out = Cleaned {
        title: None,
        base_href: None,
        links: Vec::new(),
        flattened: false,
    };
    let mut stack = vec![(doc.clone(), 0usize)];
    while let Some((node, depth)) = stack.pop() {
        let kids = std::mem::take(&mut *node.children.borrow_mut());
        let mut keep = Vec::with_capacity(kids.len());
        for child in kids {
            match tag(&child) {
                Some("title") if out.title.is_none() => {
                    let t = inner_text(&child);
                    if !t.is_empty() {
                        out.title = Some(t);
                    }
                }
                Some("base") if out.base_href.is_none() => out.base_href = attr(&child, "href"),
                _ => {}
            }
            if is_dropped(&child) {
                continue;
            }
            if let Some(t) = tag(&child) {
                if matches!(t, "a" | "area" | "img") {
                    out.links.push(child.clone());
                }
                let has_elements = child
                    .children
                    .borrow()
                    .iter()
                    .any(|c| matches!(c.data, NodeData::Element { .. }));
                if depth + 1 >= MAX_DEPTH && has_elements {
                    let text = flat_text(&child);
                    let leaf = Node::new(NodeData::Text {
                        contents: std::cell::RefCell::new(StrTendril::from_slice(&text)),
                    });
                    leaf.parent.set(Some(Rc::downgrade(&child)));
                    *child.children.borrow_mut() = vec![leaf];
                    out.flattened = true;
                } else {
                    stack.push((child.clone(), depth + 1));
                }
            }
            keep.push(child);
        }
        *node.children.borrow_mut() = keep;
    }
    out
}

/// A link target as the reader should see it: absolute when it was relative, `None` for
/// script and data URLs (the text is kept without a link).
pub fn resolve(base: &Url, href: &str) -> Option<String> {
    let h = href.trim();
    let lower = h.to_ascii_lowercase();
    if ["javascript:", "vbscript:", "data:"]
        .iter()
        .any(|s| lower.starts_with(s))
    {
        return None;
    }
    if h.starts_with('#') {
        return Some(h.to_string());
    }
    let scheme_end = h.find(':').filter(|&i| {
        i > 0
            && h[..i]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    if let Some(i) = scheme_end {
        let scheme = &lower[..i];
        if scheme != "http" && scheme != "https" {
            return Some(h.to_string());
        }
    }
    let (target, fragment) = match h.find('#') {
        Some(i) => (&h[..i], &h[i..]),
        None => (h, ""),
    };
    match base.join(target) {
        Ok(u) => Some(format!("{u}{fragment}")),
        Err(_) => Some(h.to_string()),
    }
}

fn resolve_links(el: &Handle, base: &Url) {
    let NodeData::Element { attrs, .. } = &el.data else {
        return;
    };
    let which = if tag(el) == Some("img") {
        "src"
    } else {
        "href"
    };
    attrs.borrow_mut().retain_mut(|a| {
        if &*a.name.local != which {
            return true;
        }
        match resolve(base, &a.value) {
            Some(v) => {
                a.value = StrTendril::from_slice(&v);
                true
            }
            None => false,
        }
    });
}

fn markdown(doc: &Handle) -> String {
    let options = Options {
        bullet_list_marker: BulletListMarker::Dash,
        ul_bullet_spacing: 1,
        ol_number_spacing: 1,
        ..Options::default()
    };
    let md = htmd::HtmlToMarkdown::builder()
        .options(options)
        .build()
        .tree_to_markdown(doc);
    tidy(&md)
}

/// Trailing spaces dropped (a `<br>`'s two spaces kept) and runs of blank lines made one,
/// except inside fenced code blocks.
pub fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = 0;
    let mut fenced = false;
    for line in s.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if fenced {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let kept = if line.ends_with("  ") && !line.trim().is_empty() {
            line
        } else {
            line.trim_end()
        };
        if kept.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(kept);
        out.push('\n');
    }
    out.trim_matches('\n').to_string()
}

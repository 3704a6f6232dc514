//! A cleaned page as plain text: one paragraph per block, list items on their own lines
//! (`•` or their number, indented by nesting), table cells separated by ` | `, `<pre>` kept
//! as it is, links and emphasis as their text only. Iterative, so any depth is safe.

use markup5ever_rcdom::{Handle, NodeData};

/// Block elements: they start and end a line.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "caption",
    "center",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "html",
    "legend",
    "li",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "tfoot",
    "thead",
    "tr",
    "ul",
];

/// Blocks set off by a blank line.
const PARAGRAPHS: &[&str] = &[
    "blockquote",
    "dl",
    "figure",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "p",
    "pre",
    "table",
];

/// Whether `tag` starts and ends a line.
pub fn is_block(tag: &str) -> bool {
    BLOCKS.contains(&tag)
}

enum Step {
    Enter(Handle),
    Leave(String),
}

#[derive(Default)]
struct Writer {
    out: String,
    pre: usize,
    /// Open lists: ordered?, the next item's number.
    lists: Vec<(bool, u64)>,
    /// Cells written in the current table row.
    cells: Vec<usize>,
    space: bool,
}

impl Writer {
    fn newlines(&mut self, n: usize) {
        self.space = false;
        if self.out.is_empty() {
            return;
        }
        while self.out.ends_with(' ') {
            self.out.pop();
        }
        let have = self.out.len() - self.out.trim_end_matches('\n').len();
        for _ in have..n {
            self.out.push('\n');
        }
    }

    fn text(&mut self, s: &str) {
        if self.pre > 0 {
            self.out.push_str(s);
            return;
        }
        if s.starts_with(char::is_whitespace) {
            self.space = true;
        }
        let mut words = false;
        for word in s.split_whitespace() {
            let at_line_start = self.out.is_empty() || self.out.ends_with('\n');
            if self.space && !at_line_start && !self.out.ends_with(' ') {
                self.out.push(' ');
            }
            self.out.push_str(word);
            self.space = true;
            words = true;
        }
        if words {
            self.space = s.ends_with(char::is_whitespace);
        }
    }

    fn enter(&mut self, tag: &str) {
        match tag {
            "br" => {
                self.out.push('\n');
                self.space = false;
            }
            "ul" | "ol" | "menu" => {
                self.newlines(if self.lists.is_empty() { 2 } else { 1 });
                self.lists.push((tag == "ol", 1));
            }
            "li" => {
                self.newlines(1);
                let depth = self.lists.len().max(1);
                self.out.push_str(&"  ".repeat(depth - 1));
                match self.lists.last_mut() {
                    Some((true, n)) => {
                        self.out.push_str(&format!("{n}. "));
                        *n += 1;
                    }
                    _ => self.out.push_str("• "),
                }
            }
            "tr" => {
                self.newlines(1);
                self.cells.push(0);
            }
            "td" | "th" => {
                if let Some(n) = self.cells.last_mut() {
                    if *n > 0 {
                        self.out.push_str(" | ");
                    }
                    *n += 1;
                }
                self.space = false;
            }
            "pre" => {
                self.newlines(2);
                self.pre += 1;
            }
            "hr" => self.newlines(2),
            t if PARAGRAPHS.contains(&t) => self.newlines(2),
            t if is_block(t) => self.newlines(1),
            _ => {}
        }
    }

    fn leave(&mut self, tag: &str) {
        match tag {
            "ul" | "ol" | "menu" => {
                self.lists.pop();
                self.newlines(if self.lists.is_empty() { 2 } else { 1 });
            }
            "tr" => {
                self.cells.pop();
                self.newlines(1);
            }
            "pre" => {
                self.pre = self.pre.saturating_sub(1);
                self.newlines(2);
            }
            t if PARAGRAPHS.contains(&t) => self.newlines(2),
            t if is_block(t) => self.newlines(1),
            _ => {}
        }
    }
}

/// The text of a cleaned document.
pub fn render(doc: &Handle) -> String {
    let mut w = Writer::default();
    let mut stack = vec![Step::Enter(doc.clone())];
    while let Some(step) = stack.pop() {
        match step {
            Step::Leave(tag) => w.leave(&tag),
            Step::Enter(node) => match &node.data {
                NodeData::Text { contents } => w.text(&contents.borrow()),
                NodeData::Element { name, attrs, .. } => {
                    let tag = name.local.to_string();
                    if tag == "img" {
                        if let Some(alt) = attrs.borrow().iter().find(|a| &*a.name.local == "alt") {
                            let alt = alt.value.trim();
                            if !alt.is_empty() {
                                w.text(&format!(" {alt} "));
                            }
                        }
                    }
                    w.enter(&tag);
                    stack.push(Step::Leave(tag));
                    stack.extend(
                        node.children
                            .borrow()
                            .iter()
                            .rev()
                            .cloned()
                            .map(Step::Enter),
                    );
                }
                NodeData::Document => {
                    stack.extend(
                        node.children
                            .borrow()
                            .iter()
                            .rev()
                            .cloned()
                            .map(Step::Enter),
                    );
                }
                _ => {}
            },
        }
    }
    crate::html::tidy(&w.out)
}

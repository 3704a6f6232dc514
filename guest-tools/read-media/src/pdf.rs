//! PDFs: the text of each page, with `pages` to choose which.
//!
//! Parsed by `lopdf` inside the component. The components are built with `panic = "abort"`, so
//! the input is bounded ([`MAX_FILE_BYTES`], a decompression limit per stream and per page)
//! and only APIs that return errors are used.

use lopdf::{Document, LoadOptions};
use toolgate_guest::text;
use toolgate_guest::{json, Report, ToolError};

/// Largest PDF file `read` opens.
pub const MAX_FILE_BYTES: u64 = 32 << 20;
/// Most bytes one stream (or one page's content) may inflate to.
const MAX_INFLATED_BYTES: usize = 32 << 20;

/// The pages a `pages` value names ("3", "1-5", "2,4-6", "7-"), 1-based, sorted, without
/// repeats; an end past the last page stops at it.
pub fn parse_pages(spec: &str, total: u32) -> Result<Vec<u32>, String> {
    let bad = |why: String| {
        format!(
            "`pages` {spec:?} {why}; give page numbers and ranges like \"3\", \"1-5\" or \"2,4-6\""
        )
    };
    let mut out = Vec::new();
    for part in spec.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(bad("has an empty part".into()));
        }
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), Some(b.trim())),
            None => (part, None),
        };
        let num = |s: &str| -> Result<u32, String> {
            match s.parse::<u32>() {
                Ok(0) => Err(bad("counts from 0, but pages count from 1".into())),
                Ok(n) => Ok(n),
                Err(_) => Err(bad(format!("has {s:?}, which is not a page number"))),
            }
        };
        let start = num(a)?;
        let end = match b {
            None => start,
            Some("") => total.max(start),
            Some(b) => num(b)?,
        };
        if end < start {
            return Err(bad(format!("has the range {part}, which runs backwards")));
        }
        if start > total {
            return Err(format!(
                "`pages` {spec:?} asks for page {start}, but the file has {total} page{}; use pages between 1 and {total}",
                if total == 1 { "" } else { "s" }
            ));
        }
        out.extend(start..=end.min(total));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Page numbers as the shortest `pages` value: [4, 5, 6, 9] is "4-6,9".
pub fn format_pages(pages: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < pages.len() {
        let start = pages[i];
        let mut end = start;
        while i + 1 < pages.len() && pages[i + 1] == end + 1 {
            i += 1;
            end = pages[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// One page's text, or a note saying why there is none.
fn page_text(doc: &Document, page: u32) -> String {
    match doc.extract_text_with_limit(&[page], MAX_INFLATED_BYTES) {
        Ok(t) if t.trim().is_empty() => {
            "[no text on this page: it may be a scanned image or a drawing]\n".to_string()
        }
        Ok(t) => {
            let mut s = String::with_capacity(t.len());
            for line in t.lines() {
                let line = line.trim_end();
                let (kept, full) = text::cut_chars(line, toolgate_reading::MAX_LINE_CHARS);
                s.push_str(kept);
                if let Some(full) = full {
                    s.push_str(&format!(
                        "… [line cut: {full} characters, showing {}]",
                        toolgate_reading::MAX_LINE_CHARS
                    ));
                }
                s.push('\n');
            }
            s
        }
        Err(e) => format!("[the text of this page could not be extracted: {e}]\n"),
    }
}

/// Read the PDF file `bytes`, the pages `pages` names (all, as far as the budget goes, when
/// `None`), within `budget` bytes of content.
pub fn read(
    bytes: &[u8],
    pages: Option<&str>,
    budget: usize,
    shown: &str,
    rel: &str,
) -> Result<Report, ToolError> {
    let size = bytes.len();
    let options = LoadOptions {
        max_decompressed_size: Some(MAX_INFLATED_BYTES),
        ..Default::default()
    };
    let doc = Document::load_mem_with_options(bytes, options).map_err(|e| {
        let message = match e {
            lopdf::Error::InvalidPassword => {
                format!("{shown} is an encrypted PDF; `read` cannot open it without its password")
            }
            e => format!("{shown} could not be read as a PDF: {e}"),
        };
        ToolError::new("bad-pdf", message).data(json!({"path": rel, "size": size}))
    })?;
    // Opened with the empty password, lopdf drops `/Encrypt`; still there, the file is locked.
    if doc.is_encrypted() || doc.trailer.has(b"Encrypt") {
        return Err(ToolError::new(
            "encrypted-pdf",
            format!("{shown} is an encrypted PDF; `read` cannot open it without its password"),
        )
        .data(json!({"path": rel, "size": size})));
    }
    let total = u32::try_from(doc.get_pages().len()).unwrap_or(u32::MAX);
    if total == 0 {
        return Err(ToolError::new(
            "bad-pdf",
            format!("{shown} is a PDF with no pages that `read` can find"),
        )
        .data(json!({"path": rel, "size": size})));
    }
    let wanted = match pages {
        Some(spec) => parse_pages(spec, total)
            .map_err(|m| ToolError::new("bad-input", m).data(json!({"path": rel})))?,
        None => (1..=total).collect(),
    };

    let mut content = String::new();
    let mut shown_pages: Vec<u32> = Vec::new();
    let mut cut_page = None;
    for &n in &wanted {
        let mut block = format!("--- page {n} of {total} ---\n");
        block.push_str(&page_text(&doc, n));
        if content.len() + block.len() <= budget {
            content.push_str(&block);
            shown_pages.push(n);
            continue;
        }
        if shown_pages.is_empty() {
            // Not even one page fits: show its start, cut on a line.
            let room = budget.saturating_sub(content.len());
            let mut end = room.min(block.len());
            while !block.is_char_boundary(end) {
                end -= 1;
            }
            if let Some(nl) = block[..end].rfind('\n') {
                end = nl + 1;
            }
            content.push_str(&block[..end]);
            shown_pages.push(n);
            cut_page = Some(n);
        }
        break;
    }
    let rest: Vec<u32> = wanted
        .iter()
        .copied()
        .filter(|p| p > shown_pages.last().unwrap_or(&0))
        .collect();
    let shown_list = format_pages(&shown_pages);
    let mut truncated = false;
    if let Some(n) = cut_page {
        truncated = true;
        content.push_str(&format!(
            "[page {n} was cut by the output size budget: its text is longer than one call can show]\n"
        ));
    }
    if !rest.is_empty() {
        truncated = true;
        content.push_str(&format!(
            "[truncated by output size budget: showing page{} {shown_list} of {total}; use pages=\"{}\" to read more]\n",
            if shown_pages.len() == 1 { "" } else { "s" },
            format_pages(&rest)
        ));
    }
    let summary = if shown_pages.len() as u64 == u64::from(total) {
        format!(
            "read {shown}: PDF, {total} page{}",
            if total == 1 { "" } else { "s" }
        )
    } else {
        format!("read {shown}: PDF, pages {shown_list} of {total}")
    };
    Ok(Report {
        summary,
        content,
        truncated,
        totals: vec![("pages", u64::from(total), shown_pages.len() as u64)],
        data: json!({
            "path": rel,
            "size": size,
            "kind": "pdf",
            "pages_total": total,
            "pages_shown": shown_pages,
            "next_pages": if rest.is_empty() { json!(null) } else { json!(format_pages(&rest)) },
        }),
    })
}

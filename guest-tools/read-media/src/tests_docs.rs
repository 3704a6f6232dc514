//! PDFs and notebooks written by the test.

use super::{code, read_budget, read_file, tmp};
use crate::pdf::{format_pages, parse_pages};
use toolgate_guest::json;

/// A minimal valid PDF: one page per entry of `pages`, each line of it drawn in Helvetica,
/// the cross-reference table computed. `trailer_extra` goes into the trailer dictionary.
pub fn pdf(pages: &[&str], trailer_extra: &str) -> Vec<u8> {
    let n = pages.len();
    let font = 3 + 2 * n; // objects: 1 catalog, 2 pages, then page + content pairs, then font
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {n} >>",
            (0..n)
                .map(|i| format!("{} 0 R", 3 + 2 * i))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    ];
    for (i, text) in pages.iter().enumerate() {
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 {font} 0 R >> >> /Contents {} 0 R >>",
            4 + 2 * i
        ));
        let mut stream = String::new();
        for (k, line) in text.lines().enumerate() {
            stream.push_str(&format!(
                "BT /F1 12 Tf 72 {} Td ({}) Tj ET\n",
                700 - 14 * k,
                line.replace('(', "\\(").replace(')', "\\)")
            ));
        }
        objects.push(format!(
            "<< /Length {} >>\nstream\n{stream}endstream",
            stream.len()
        ));
    }
    objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into());

    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    let mut table = format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1);
    for off in offsets {
        table.push_str(&format!("{off:010} 00000 n \n"));
    }
    out.extend_from_slice(table.as_bytes());
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R{trailer_extra} >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[test]
fn a_two_page_pdf_reads_as_text_per_page() {
    let root = tmp();
    let bytes = pdf(
        &["Hello from page one\nsecond line", "Page two says goodbye"],
        "",
    );
    let r = read_file(&root, "report.pdf", &bytes, json!({})).unwrap();
    assert_eq!(
        r.content,
        "--- page 1 of 2 ---\nHello from page one\nsecond line\n--- page 2 of 2 ---\nPage two says goodbye\n"
    );
    assert!(!r.truncated);
    assert_eq!(r.summary, "read report.pdf: PDF, 2 pages");
    assert_eq!(r.data["kind"], "pdf");
    assert_eq!(r.data["pages_total"], 2);
    assert_eq!(r.data["pages_shown"], json!([1, 2]));
    assert_eq!(r.totals, vec![("pages", 2, 2)]);

    let r = read_file(&root, "report.pdf", &bytes, json!({"pages": "2"})).unwrap();
    assert_eq!(r.content, "--- page 2 of 2 ---\nPage two says goodbye\n");
    assert_eq!(r.data["pages_shown"], json!([2]));
    assert_eq!(r.summary, "read report.pdf: PDF, pages 2 of 2");

    let e = read_file(&root, "report.pdf", &bytes, json!({"pages": "3"})).unwrap_err();
    assert_eq!(code(&e), "bad-input");
    assert!(format!("{e:?}").contains(
        "`pages` \\\"3\\\" asks for page 3, but the file has 2 pages; use pages between 1 and 2"
    ));
}

#[test]
fn pdf_pages_beyond_the_budget_are_named_for_the_next_call() {
    let root = tmp();
    let long: Vec<String> = (1..=6)
        .map(|p| {
            (1..=20)
                .map(|l| format!("page {p} line {l} of text\n"))
                .collect()
        })
        .collect();
    let pages: Vec<&str> = long.iter().map(String::as_str).collect();
    let bytes = pdf(&pages, "");
    // 900 bytes of budget (less the note's reserve) hold one 20-line page, not two.
    let r = read_budget(&root, "long.pdf", &bytes, json!({}), 900).unwrap();
    assert!(r.truncated);
    assert!(r
        .content
        .starts_with("--- page 1 of 6 ---\npage 1 line 1 of text\n"));
    assert!(
        r.content
            .ends_with("[truncated by output size budget: showing page 1 of 6; use pages=\"2-6\" to read more]\n"),
        "{}",
        r.content
    );
    assert_eq!(r.data["pages_shown"], json!([1]));
    assert_eq!(r.data["next_pages"], "2-6");

    // Following the hint continues where it stopped.
    let r = read_budget(&root, "long.pdf", &bytes, json!({"pages": "2-6"}), 900).unwrap();
    assert!(r
        .content
        .starts_with("--- page 2 of 6 ---\npage 2 line 1 of text\n"));
    assert_eq!(r.data["pages_shown"], json!([2]));
    assert_eq!(r.data["next_pages"], "3-6");

    // A list with gaps keeps them in the hint.
    let r = read_budget(&root, "long.pdf", &bytes, json!({"pages": "2,4-6"}), 900).unwrap();
    assert_eq!(r.data["next_pages"], "4-6");

    // A page bigger than the whole budget is shown cut, and says so.
    let r = read_budget(&root, "long.pdf", &bytes, json!({"pages": "3"}), 400).unwrap();
    assert!(r.truncated);
    assert!(r
        .content
        .contains("[page 3 was cut by the output size budget"));
}

#[test]
fn pages_values() {
    assert_eq!(parse_pages("3", 12).unwrap(), vec![3]);
    assert_eq!(parse_pages("1-5", 12).unwrap(), vec![1, 2, 3, 4, 5]);
    assert_eq!(parse_pages("2,4-6", 12).unwrap(), vec![2, 4, 5, 6]);
    assert!(parse_pages("6-4", 12)
        .unwrap_err()
        .contains("runs backwards"));
    assert_eq!(parse_pages("10-", 12).unwrap(), vec![10, 11, 12]);
    assert_eq!(parse_pages("11-99", 12).unwrap(), vec![11, 12]);
    assert_eq!(parse_pages("5,1-2,2", 12).unwrap(), vec![1, 2, 5]);
    assert!(parse_pages("0", 12)
        .unwrap_err()
        .contains("pages count from 1"));
    assert!(parse_pages("x", 12)
        .unwrap_err()
        .contains("\"x\", which is not a page number"));
    assert!(parse_pages("1,,2", 12).is_err());
    assert_eq!(format_pages(&[4, 5, 6, 9]), "4-6,9");
    assert_eq!(format_pages(&[1]), "1");
}

#[test]
fn a_broken_or_encrypted_pdf_is_a_plain_error_naming_the_file() {
    let root = tmp();
    let e = read_file(
        &root,
        "junk.pdf",
        b"%PDF-1.7\nthis is not really a pdf\n",
        json!({}),
    )
    .unwrap_err();
    assert_eq!(code(&e), "bad-pdf");
    assert!(
        format!("{e:?}").contains("junk.pdf could not be read as a PDF"),
        "{e:?}"
    );

    // An /Encrypt dictionary whose empty user password does not open it.
    let encrypt = format!(
        " /Encrypt << /Filter /Standard /V 1 /R 2 /O <{o}> /U <{u}> /P -4 >> /ID [<{id}> <{id}>]",
        o = "11".repeat(32),
        u = "22".repeat(32),
        id = "33".repeat(16)
    );
    let bytes = pdf(&["secret"], &encrypt);
    let e = read_file(&root, "locked.pdf", &bytes, json!({})).unwrap_err();
    assert!(
        format!("{e:?}")
            .contains("locked.pdf is an encrypted PDF; `read` cannot open it without its password"),
        "{e:?}"
    );
}

fn notebook() -> String {
    json!({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"language_info": {"name": "python"}},
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Title\n", "Some *notes*."]},
            {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "print('hi')\n1 + 1",
             "outputs": [
                {"output_type": "stream", "name": "stdout", "text": ["hi\n"]},
                {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                 "data": {"text/plain": ["2"]}}
             ]},
            {"cell_type": "code", "execution_count": 2, "metadata": {}, "source": ["1 / 0"],
             "outputs": [
                {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
                 "traceback": [
                    "\u{1b}[0;31m---------------------------------------------------------------------------\u{1b}[0m",
                    "\u{1b}[0;31mZeroDivisionError\u{1b}[0m: division by zero"
                 ]}
             ]},
            {"cell_type": "code", "execution_count": 3, "metadata": {}, "source": ["plot()"],
             "outputs": [
                {"output_type": "display_data", "metadata": {},
                 "data": {"image/png": "iVBORw0KGgoAAAANSUhEUgAAAAE=\n", "text/plain": ["<Figure size 640x480 with 1 Axes>"]}}
             ]}
        ]
    })
    .to_string()
}

#[test]
fn a_notebook_reads_as_cells_with_outputs() {
    let root = tmp();
    let r = read_file(&root, "analysis.ipynb", notebook().as_bytes(), json!({})).unwrap();
    assert_eq!(
        r.content,
        "# %% [markdown] cell 1\n# Title\nSome *notes*.\n\
         \n# %% [code] cell 2\nprint('hi')\n1 + 1\n# [output: stdout]\nhi\n# [output: result 1]\n2\n\
         \n# %% [code] cell 3\n1 / 0\n# [output: error] ZeroDivisionError: division by zero\n\
         ---------------------------------------------------------------------------\n\
         ZeroDivisionError: division by zero\n\
         \n# %% [code] cell 4\nplot()\n# [output: display]\n[image/png output, 20 bytes]\n\
         <Figure size 640x480 with 1 Axes>\n"
    );
    assert!(!r.truncated);
    assert_eq!(r.summary, "read analysis.ipynb: notebook, 4 cells");
    assert_eq!(r.data["kind"], "notebook");
    assert_eq!(r.data["cells"], 4);
    assert_eq!(r.data["language"], "python");
    assert_eq!(r.totals, vec![("cells", 4, 4)]);
}

#[test]
fn notebook_cells_page_with_offset_limit_and_the_budget() {
    let root = tmp();
    let nb = notebook();
    let r = read_file(
        &root,
        "a.ipynb",
        nb.as_bytes(),
        json!({"offset": 1, "limit": 2}),
    )
    .unwrap();
    assert!(r.content.starts_with("# %% [code] cell 2\n"));
    assert!(r.content.contains("# %% [code] cell 3\n"));
    assert!(!r.content.contains("cell 4"));
    assert!(r.content.ends_with(
        "[truncated by cell limit: showing cells 2-3 of 4; use offset=3 to read more]\n"
    ));
    assert!(r.truncated);

    let r = read_budget(&root, "a.ipynb", nb.as_bytes(), json!({}), 330).unwrap();
    assert!(r.truncated);
    assert!(
        r.content
            .contains("[truncated by output size budget: showing cells 1-"),
        "{}",
        r.content
    );

    let e = read_file(&root, "a.ipynb", nb.as_bytes(), json!({"offset": 4})).unwrap_err();
    assert_eq!(code(&e), "offset-out-of-range");

    // A file named .ipynb that is not a notebook reads as text, as before.
    let r = read_file(&root, "b.ipynb", b"not json\n", json!({})).unwrap();
    assert_eq!(r.content, "     1\tnot json\n");
}

#[test]
fn ansi_codes_are_removed() {
    assert_eq!(
        toolgate_reading::notebook::strip_ansi(
            "\u{1b}[0;31mred\u{1b}[0m \u{1b}]8;;http://x\u{7}link\u{1b}]8;;\u{1b}\\"
        ),
        "red link"
    );
}

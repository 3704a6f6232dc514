//! The search over each file and the page of results it prints.
//!
//! A *result* is a matching line in content mode and a file with a match in the other modes.
//! Results come in walk order; the first `offset` are counted but not printed, the next
//! `limit` are printed (while the output budget lasts), and the rest are counted up to
//! `offset + count_limit(limit)`.

use crate::lines::{Line, MatchLines};
use crate::options::{Mode, Options};
use crate::read::read_file;
use crate::{count_limit, report::push_row, NOTE_RESERVE};
use regex::bytes::Regex;
use std::borrow::Cow;
use std::path::Path;
use toolgate_guest::names::{self, Escaped};
use toolgate_guest::{text, Budget};

pub(crate) struct Searcher<'a> {
    pub(crate) re: &'a Regex,
    pub(crate) mode: Mode,
    pub(crate) multiline: bool,
    pub(crate) before: usize,
    pub(crate) after: usize,
    pub(crate) offset: u64,
    pub(crate) limit: u64,
    /// Results counted before the search stops (the offset included).
    pub(crate) count_limit: u64,
    pub(crate) budget: Budget,
    /// Whether results are still being printed.
    pub(crate) emitting: bool,
    /// Whether printing stopped because the output budget was full.
    pub(crate) budget_full: bool,
    /// Whether counting stopped at `count_limit`.
    pub(crate) stopped: bool,
    /// Results counted (skipped ones included).
    pub(crate) results: u64,
    /// Results printed.
    pub(crate) returned: u64,
    /// Matching lines counted (in `files_with_matches` mode only the first of each file).
    pub(crate) seen: u64,
    /// Matching lines printed (content) or in the counts printed (count).
    pub(crate) lines_returned: u64,
    pub(crate) files_searched: u64,
    pub(crate) files_matched: u64,
    pub(crate) files_returned: u64,
    pub(crate) binary_skipped: u64,
    pub(crate) too_large: u64,
    pub(crate) unreadable: u64,
    /// Whether any line has been printed (for `--` between groups).
    printed_any: bool,
    row: String,
    /// The names printed quoted (`data.escaped_names`).
    pub(crate) escaped: Escaped,
}

/// Where the printer is in one file: the start of the next unprinted line and its number.
struct Cursor {
    /// Byte offset up to which lines have been printed, or skipped (a line start).
    printed_upto: usize,
    /// 1-based number of the line at `printed_upto`.
    printed_no: u64,
    /// Whether anything of this file was printed.
    file_printed: bool,
    /// After-context lines still owed.
    pending_after: usize,
    /// A line start whose number is known, to count newlines from.
    known_pos: usize,
    known_no: u64,
}

impl Cursor {
    /// The number of the line starting at `ls` (at or after `known_pos`).
    fn line_no(&mut self, buf: &[u8], ls: usize) -> u64 {
        let no =
            self.known_no + memchr::memchr_iter(b'\n', &buf[self.known_pos..ls]).count() as u64;
        self.known_pos = ls;
        self.known_no = no;
        no
    }
}

impl<'a> Searcher<'a> {
    pub(crate) fn new(re: &'a Regex, opts: &Options, max_bytes: usize) -> Self {
        Searcher {
            re,
            mode: opts.mode,
            multiline: opts.multiline,
            before: opts.before,
            after: opts.after,
            offset: opts.offset,
            limit: opts.limit,
            count_limit: opts.offset.saturating_add(count_limit(opts.limit)),
            budget: Budget::new(max_bytes.saturating_sub(NOTE_RESERVE).max(1)),
            emitting: true,
            budget_full: false,
            stopped: false,
            results: 0,
            returned: 0,
            seen: 0,
            lines_returned: 0,
            files_searched: 0,
            files_matched: 0,
            files_returned: 0,
            binary_skipped: 0,
            too_large: 0,
            unreadable: 0,
            printed_any: false,
            row: String::new(),
            escaped: Escaped::new(),
        }
    }

    pub(crate) fn file(&mut self, path: &Path, rel: &str) {
        let buf = match read_file(path) {
            Ok(Some(b)) => b,
            Ok(None) => {
                self.too_large += 1;
                return;
            }
            Err(_) => {
                self.unreadable += 1;
                return;
            }
        };
        self.bytes(&buf, rel);
    }

    /// Search one file's whole contents, unless it is binary.
    pub(crate) fn bytes(&mut self, buf: &[u8], rel: &str) {
        if text::has_nul_prefix(buf) {
            self.binary_skipped += 1;
            return;
        }
        self.files_searched += 1;
        match self.mode {
            Mode::Content => self.search_lines(buf, rel),
            Mode::FilesWithMatches | Mode::Count => self.search_file(buf, rel),
        }
    }

    /// `files_with_matches` and `count`: the file is one result.
    fn search_file(&mut self, buf: &[u8], exact_rel: &str) {
        let mut lines = MatchLines::new(self.re, buf, self.multiline);
        let n = if self.mode == Mode::FilesWithMatches {
            u64::from(lines.next().is_some())
        } else {
            lines.count() as u64
        };
        if n == 0 {
            return;
        }
        self.seen += n;
        self.files_matched += 1;
        self.results += 1;
        if self.results > self.offset && self.emitting {
            let shown = names::display(exact_rel);
            self.row.clear();
            self.row.push_str(&shown);
            if self.mode == Mode::Count {
                self.row.push(':');
                self.row.push_str(&n.to_string());
            }
            if self.budget.push_line(&self.row) {
                self.returned += 1;
                self.files_returned += 1;
                self.lines_returned += n;
                if matches!(shown, Cow::Owned(_)) {
                    self.escaped.note(exact_rel);
                }
                if self.returned >= self.limit {
                    self.emitting = false;
                }
            } else {
                self.emitting = false;
                self.budget_full = true;
            }
        }
        if self.results >= self.count_limit {
            self.stopped = true;
        }
    }

    /// Content mode: every matching line is a result. Its rows name the file as [`names`]
    /// prints it: with context rows (`path-line-text`) a name with `-<digits>-` is quoted too.
    fn search_lines(&mut self, buf: &[u8], exact_rel: &str) {
        let context = self.before > 0 || self.after > 0;
        let shown = if context {
            names::display_in_rows(exact_rel)
        } else {
            names::display(exact_rel)
        };
        let rel: &str = &shown;
        let mut file_matches = 0u64;
        let mut file_returned = false;
        let mut cur = Cursor {
            printed_upto: 0,
            printed_no: 1,
            file_printed: false,
            pending_after: 0,
            known_pos: 0,
            known_no: 1,
        };
        // After-context owed to the page's last match once the page is full: it runs up to
        // the next matching line (a result of the next page, not context).
        let mut owed = false;
        let mut lines = MatchLines::new(self.re, buf, self.multiline);
        for line in lines.by_ref() {
            self.seen += 1;
            file_matches += 1;
            if self.seen <= self.offset {
                // Skipped (an earlier page's): later before-context does not reach back into
                // it.
                if self.before > 0 {
                    cur.printed_no = cur.line_no(buf, line.start) + 1;
                    cur.printed_upto = (line.end + 1).min(buf.len());
                }
            } else if self.emitting {
                if self.emit_match(buf, rel, &mut cur, line) {
                    file_returned = true;
                    self.returned += 1;
                    if self.returned >= self.limit {
                        self.emitting = false;
                        owed = cur.pending_after > 0;
                    }
                } else {
                    self.emitting = false;
                    self.budget_full = true;
                }
            } else if owed {
                self.flush_after(buf, rel, &mut cur, line.start);
                owed = false;
            }
            if self.seen >= self.count_limit {
                self.stopped = true;
                break;
            }
        }
        if self.emitting || owed {
            let bound = if self.stopped {
                lines.next().map_or(buf.len(), |l| l.start)
            } else {
                buf.len()
            };
            self.flush_after(buf, rel, &mut cur, bound);
        }
        self.results = self.seen;
        self.lines_returned = self.returned;
        if cur.file_printed && matches!(shown, Cow::Owned(_)) {
            self.escaped.note(exact_rel);
        }
        if file_matches > 0 {
            self.files_matched += 1;
        }
        if file_returned {
            self.files_returned += 1;
        }
    }

    /// Print a matching line with its context. Returns false when the budget is full (the
    /// match line itself was not printed).
    fn emit_match(&mut self, buf: &[u8], rel: &str, cur: &mut Cursor, line: Line) -> bool {
        let (ls, le) = (line.start, line.end);
        let line_no = cur.line_no(buf, ls);

        // After-context owed to the previous match, up to this line.
        while cur.pending_after > 0 && cur.printed_upto < ls {
            if !self.print_context_line(buf, rel, cur) {
                return false;
            }
            cur.pending_after -= 1;
        }
        cur.pending_after = 0;

        // Before-context: up to `before` lines, not reaching back into printed lines.
        let floor = cur.printed_upto;
        let mut b = ls;
        let mut b_no = line_no;
        for _ in 0..self.before {
            if b == 0 || b <= floor {
                break;
            }
            b = match memchr::memrchr(b'\n', &buf[..b - 1]) {
                Some(i) => i + 1,
                None => 0,
            };
            b_no -= 1;
        }
        if b < floor {
            b = floor;
            b_no = cur.printed_no;
        }
        let context = self.before > 0 || self.after > 0;
        let separate = context && self.printed_any && (!cur.file_printed || b > cur.printed_upto);
        if separate && !self.budget.push_line("--") {
            return false;
        }
        cur.printed_upto = b;
        cur.printed_no = b_no;
        while cur.printed_upto < ls {
            if !self.print_context_line(buf, rel, cur) {
                return false;
            }
        }
        // The match line.
        self.row.clear();
        push_row(&mut self.row, rel, ':', line_no, &buf[ls..le], line.col);
        if !self.budget.push_line(&self.row) {
            return false;
        }
        self.printed_any = true;
        cur.file_printed = true;
        cur.printed_upto = (le + 1).min(buf.len());
        cur.printed_no = line_no + 1;
        cur.pending_after = self.after;
        true
    }

    /// Print the line at `cur.printed_upto` as context and move past it.
    fn print_context_line(&mut self, buf: &[u8], rel: &str, cur: &mut Cursor) -> bool {
        let s = cur.printed_upto;
        let e = match memchr::memchr(b'\n', &buf[s..]) {
            Some(i) => s + i,
            None => buf.len(),
        };
        self.row.clear();
        push_row(&mut self.row, rel, '-', cur.printed_no, &buf[s..e], 0);
        if !self.budget.push_line(&self.row) {
            self.emitting = false;
            self.budget_full = true;
            return false;
        }
        self.printed_any = true;
        cur.file_printed = true;
        cur.printed_upto = (e + 1).min(buf.len());
        cur.printed_no += 1;
        true
    }

    /// Print the after-context still owed, up to `bound` (the next matching line, or the end
    /// of the file).
    fn flush_after(&mut self, buf: &[u8], rel: &str, cur: &mut Cursor, bound: usize) {
        while cur.pending_after > 0 && cur.printed_upto < bound {
            if !self.print_context_line(buf, rel, cur) {
                break;
            }
            cur.pending_after -= 1;
        }
        cur.pending_after = 0;
    }
}

//! The matching lines of one file's bytes, in order, each once.
//!
//! Line by line (the default): a line matches when the regex matches within it; the regex
//! runs over the whole buffer and line boundaries are found with `memchr` only around matches.
//! Multiline (`rg -U`): the regex runs over the whole buffer and every line a match touches is
//! a matching line (a match ending with a newline does not touch the next line); the next
//! search starts where the match ended, as in ripgrep.

use regex::bytes::Regex;

/// One matching line: `buf[start..end]`, without its newline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line {
    pub start: usize,
    pub end: usize,
    /// Where in the line the match starts (0 when it started on an earlier line).
    pub col: usize,
}

pub struct MatchLines<'r, 'b> {
    re: &'r Regex,
    buf: &'b [u8],
    multiline: bool,
    /// Where the next regex search starts.
    pos: usize,
    /// Multiline: the lines `[next_line, group_end)` still to give, and the first one's column.
    next_line: usize,
    group_end: usize,
    first_col: usize,
}

impl<'r, 'b> MatchLines<'r, 'b> {
    pub fn new(re: &'r Regex, buf: &'b [u8], multiline: bool) -> Self {
        MatchLines {
            re,
            buf,
            multiline,
            pos: 0,
            next_line: 0,
            group_end: 0,
            first_col: 0,
        }
    }

    fn next_in_line(&mut self) -> Option<Line> {
        let buf = self.buf;
        let len = buf.len();
        while self.pos < len {
            let pos = self.pos;
            let m = self.re.find_at(buf, pos)?;
            let start = match memchr::memrchr(b'\n', &buf[pos..m.start()]) {
                Some(i) => pos + i + 1,
                None => pos,
            };
            if start >= len {
                // An empty match after the final newline: not a line.
                return None;
            }
            let end = match memchr::memchr(b'\n', &buf[m.start()..]) {
                Some(i) => m.start() + i,
                None => len,
            };
            self.pos = end + 1;
            // A match that runs past the end of its line (`\s`, `[^x]` can match a newline)
            // does not count; the line matches only if the regex matches within it.
            if m.end() <= end {
                return Some(Line {
                    start,
                    end,
                    col: m.start() - start,
                });
            }
            if self.re.is_match(&buf[start..end]) {
                return Some(Line { start, end, col: 0 });
            }
        }
        None
    }

    fn next_multiline(&mut self) -> Option<Line> {
        let buf = self.buf;
        let len = buf.len();
        loop {
            if self.next_line < self.group_end {
                let start = self.next_line;
                let end = match memchr::memchr(b'\n', &buf[start..self.group_end]) {
                    Some(i) => start + i,
                    None => self.group_end,
                };
                self.next_line = end + 1;
                let col = std::mem::take(&mut self.first_col);
                return Some(Line { start, end, col });
            }
            if self.pos > len {
                return None;
            }
            let m = self.re.find_at(buf, self.pos)?;
            self.pos = if m.is_empty() { m.end() + 1 } else { m.end() };
            let first = match memchr::memrchr(b'\n', &buf[..m.start()]) {
                Some(i) => i + 1,
                None => 0,
            };
            if first >= len {
                return None;
            }
            let group_end = if m.end() > first && buf[m.end() - 1] == b'\n' {
                m.end()
            } else {
                match memchr::memchr(b'\n', &buf[m.end()..]) {
                    Some(i) => m.end() + i + 1,
                    None => len,
                }
            };
            // Lines already given (a match that starts on the line the last one ended on).
            let start = first.max(self.next_line);
            if start >= group_end {
                continue;
            }
            self.first_col = if start == first { m.start() - first } else { 0 };
            self.next_line = start;
            self.group_end = group_end;
        }
    }
}

impl Iterator for MatchLines<'_, '_> {
    type Item = Line;

    fn next(&mut self) -> Option<Line> {
        if self.multiline {
            self.next_multiline()
        } else {
            self.next_in_line()
        }
    }
}

//! `grep`: search file contents with a regular expression, like `rg -n`.
//!
//! Output lines are `path:line:text` for matching lines and, with `context`, `path-line-text`
//! for context lines, with `--` between groups that are not adjacent (as ripgrep prints them).
//! Paths are relative to the workspace root; files are visited in name order. A path that is
//! not an ordinary name is printed quoted (`toolgate_guest::names`: `"a:b\n.txt":3:text`; with
//! context, a name with `-<digits>-` too) and listed exactly in `data.escaped_names`. `.gitignore`,
//! `.ignore`, the default ignores and the host's deny-list are honoured; files with a NUL byte
//! in their first 8 KiB are skipped as binary (and counted), files over 64 MiB are skipped (and
//! counted; the sandbox's memory is limited). A match is a matching *line*: the regex runs in
//! multi-line mode (`^`/`$` at line ends, CRLF-aware) and a match spanning a newline only counts
//! if the regex also matches within the line. A single file given as `path` is searched even
//! if `include` or ignore files would skip it.
//!
//! Counting: at most `max_matches` lines are returned (default 100, at most 1000), but the
//! search keeps counting so the total is honest, until it has seen [`count_limit`] matching
//! lines (10 × `max_matches`, at least 1000); past that it stops and reports "at least N".
//!
//! Speed: the host walks and reads the files on threads of its own, ahead of the search
//! (`toolgate_guest::files`); a file it leaves to the tool is read here with one `read`. The
//! host also sorts out, on those threads, the binary files and the files that cannot match:
//! grep passes it a string every match must contain ([`required_literal`]), and a file without
//! it is counted as searched without being copied in. The regex runs over each whole file;
//! line boundaries are found with `memchr` only around matches, and nothing is allocated per
//! line.

use regex::bytes::{Regex, RegexBuilder};
use std::path::Path;
use toolgate_guest::files::{self, Contents, Include, Sift};
use toolgate_guest::names::{self, Escaped};
use toolgate_guest::text;
use toolgate_guest::{
    json, Budget, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value,
};

/// Matching lines returned when `max_matches` is not given.
pub const DEFAULT_MAX_MATCHES: u64 = 100;
/// The largest `max_matches` accepted.
pub const MAX_MAX_MATCHES: u64 = 1000;
/// The most context lines accepted before and after a match.
pub const MAX_CONTEXT: u64 = 20;
/// Longest line text (in characters) shown whole.
pub const MAX_LINE_CHARS: usize = 500;
/// Larger files are skipped (and reported): the sandbox's memory is limited and a file is read
/// whole.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// Bytes kept free in the budget for the closing note.
const NOTE_RESERVE: usize = 512;

/// How many matching lines are counted before the search stops: 10 × `max_matches`, at least
/// 1000.
pub fn count_limit(max_matches: u64) -> u64 {
    (max_matches.saturating_mul(10)).max(1000)
}

struct Grep;

impl Tool for Grep {
    fn describe() -> Descriptor {
        Descriptor::new(
            "grep",
            "Search file contents with a regular expression (Rust regex syntax, like ripgrep). \
             Returns matching lines as `path:line:text` (paths relative to the workspace root), \
             with `path-line-text` context lines and `--` between groups when `context` is set. \
             Skips .gitignore'd files, .git/node_modules/target/dist and binary files. At most \
             `max_matches` lines (default 100) are returned; the output says when it was cut and \
             how many matches there were. Use `include` to filter files by name and `path` to \
             narrow the search; use `read` to see a whole file. A path that is not a plain name (it \
             has `:`, a control or invisible character, a leading quote or blank ends) is shown \
             double-quoted with backslash escapes, e.g. `\"a:b\\n.rs\":3:text`.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1, "description": "Regular expression to search for (Rust regex syntax), or a plain string with literal=true. Matched against each line."},
                    "path": {"type": "string", "description": "File or directory to search. Default: the workspace root."},
                    "include": {"type": "string", "description": "Only search files whose name matches this glob, e.g. `*.rs` or `*.{ts,tsx}`. A glob containing `/` is matched against the path relative to `path` instead (`*` does not cross `/`, `**` does)."},
                    "literal": {"type": "boolean", "description": "Treat pattern as a plain string, not a regex. Default false."},
                    "ignore_case": {"type": "boolean", "description": "Match case-insensitively. Default false."},
                    "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines of context to show before and after each match. Default 0."},
                    "max_matches": {"type": "integer", "minimum": 1, "maximum": MAX_MAX_MATCHES, "description": "Most matching lines to return (default 100, at most 1000). Matches past this are still counted (up to 10x this, at least 1000)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            Risk::ReadOnly,
        )
        .path("path", PathAccess::Read)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        run(&input, cx).map(Report::into_output)
    }
}

toolgate_guest::register_tool!(Grep);

pub use toolgate_guest::Report;

/// The tool's logic, callable outside a component.
pub fn run(input: &Value, cx: &Context) -> Result<Report, ToolError> {
    let pattern = match input.get("pattern").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => p,
        _ => {
            return Err(ToolError::new(
                "bad-input",
                "`pattern` is required: the regex to search for",
            ))
        }
    };
    let literal = input
        .get("literal")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let ignore_case = input
        .get("ignore_case")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let context = input
        .get("context")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .min(MAX_CONTEXT) as usize;
    let max_matches = input
        .get("max_matches")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_MAX_MATCHES)
        .clamp(1, MAX_MAX_MATCHES);
    let start = match input.get("path").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => Path::new(p).to_path_buf(),
        _ => cx.root().to_path_buf(),
    };
    let start_rel = cx.relative(&start);

    let source = if literal {
        regex::escape(pattern)
    } else {
        pattern.to_string()
    };
    let re = RegexBuilder::new(&source)
        .multi_line(true)
        .crlf(true)
        .case_insensitive(ignore_case)
        .build()
        .map_err(|e| {
            ToolError::new(
                "bad-pattern",
                format!("`{pattern}` is not a valid regular expression: {e}\nFix the pattern, or pass literal=true to search for the plain string."),
            )
            .data(json!({"pattern": pattern}))
        })?;

    let include = match input.get("include").and_then(Value::as_str) {
        Some(g) if !g.is_empty() => {
            Some(Include::new(g).map_err(|e| ToolError::new("bad-include", e))?)
        }
        _ => None,
    };

    let meta =
        std::fs::metadata(&start).map_err(|e| ToolError::io_at(cx, &start, &start_rel, &e))?;
    let mut s = Searcher::new(&re, context, max_matches, cx.max_output_bytes());
    let mut walk_errors = 0;
    if meta.is_dir() {
        // Case-insensitive matching folds Unicode (`k` matches `\u{212A}`): no needle then.
        let needle = if ignore_case {
            None
        } else if literal {
            Some(pattern.to_string())
        } else {
            required_literal(pattern)
        };
        let sift = Sift {
            binary_prefix: text::BINARY_SNIFF_BYTES,
            needles: needle.map(String::into_bytes).into_iter().collect(),
        };
        walk_errors = files::files_sifted(
            cx,
            &start,
            include.as_ref(),
            MAX_FILE_BYTES,
            &sift,
            |file| {
                match file.contents {
                    Contents::Bytes(buf) => s.bytes(&buf, &file.rel),
                    Contents::TooLarge(_) => s.too_large += 1,
                    Contents::NotRead => s.file(&file.path, &file.rel),
                    Contents::Binary => s.binary_skipped += 1,
                    // No match can be in it: searched, nothing found.
                    Contents::NoNeedle => s.files_searched += 1,
                }
                !s.stopped
            },
        );
    } else {
        s.file(&start, &start_rel);
    }
    Ok(s.finish(pattern, &start_rel, walk_errors))
}

/// A string that every match of the regex `pattern` must contain (the longest one found), or
/// `None` when there is no such string or the pattern is beyond this simple reading. Only for
/// a pattern that compiled, matched case-sensitively: it reads the top level of the pattern
/// and gives up on alternation (`|`) and on any flag group (`(?i)`, `(?x)`, ...); groups,
/// classes, `.`, anchors and escapes that are not a plain punctuation character end a run of
/// literal characters; a character under `?`, `*` or `{0,…}` ends the run before it, one under
/// `+` or `{n,…}` (n ≥ 1) after it.
pub fn required_literal(pattern: &str) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut best = String::new();
    let mut run = String::new();
    let flush = |run: &mut String, best: &mut String| {
        if run.len() > best.len() {
            *best = std::mem::take(run);
        } else {
            run.clear();
        }
    };
    let mut i = 0;
    while i < chars.len() {
        let atom = match chars[i] {
            '|' => return None,
            '(' => {
                if chars.get(i + 1) == Some(&'?') {
                    match (chars.get(i + 2), chars.get(i + 3)) {
                        (Some(':'), _) | (Some('<'), _) | (Some('P'), Some('<')) => {}
                        _ => return None,
                    }
                }
                i = skip_group(&chars, i)?;
                None
            }
            '[' => {
                i = skip_class(&chars, i)?;
                None
            }
            '\\' => {
                let (next, literal) = escape(&chars, i)?;
                i = next;
                literal
            }
            '.' | '^' | '$' => {
                i += 1;
                None
            }
            '*' | '+' | '?' | '{' | ')' | ']' | '}' => return None,
            c => {
                i += 1;
                Some(c)
            }
        };
        // A quantifier after the atom: whether it may be absent.
        let mut quantified = None;
        match chars.get(i) {
            Some('?') | Some('*') => {
                quantified = Some(true);
                i += 1;
            }
            Some('+') => {
                quantified = Some(false);
                i += 1;
            }
            Some('{') => {
                let close = i + chars[i..].iter().position(|&c| c == '}')?;
                let inner: String = chars[i + 1..close].iter().collect();
                let min = inner.split(',').next()?.trim();
                let min: u64 = min.parse().ok()?;
                quantified = Some(min == 0);
                i = close + 1;
            }
            _ => {}
        }
        if quantified.is_some() && chars.get(i) == Some(&'?') {
            i += 1;
        }
        match (atom, quantified) {
            (Some(c), None) => run.push(c),
            (Some(c), Some(false)) => {
                run.push(c);
                flush(&mut run, &mut best);
            }
            _ => flush(&mut run, &mut best),
        }
    }
    flush(&mut run, &mut best);
    (!best.is_empty()).then_some(best)
}

/// The index after the group opening at `chars[at]` (`(`).
fn skip_group(chars: &[char], at: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = at;
    while i < chars.len() {
        match chars[i] {
            '\\' => i = escape(chars, i)?.0,
            '[' => i = skip_class(chars, i)?,
            '(' => {
                depth += 1;
                i += 1;
            }
            ')' => {
                depth -= 1;
                i += 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// The index after the class opening at `chars[at]` (`[`), nested classes included.
fn skip_class(chars: &[char], at: usize) -> Option<usize> {
    let mut i = at + 1;
    if chars.get(i) == Some(&'^') {
        i += 1;
    }
    // A `]` first is a literal `]`.
    if chars.get(i) == Some(&']') {
        i += 1;
    }
    while i < chars.len() {
        match chars[i] {
            '\\' => i = escape(chars, i)?.0,
            '[' => i = skip_class(chars, i)?,
            ']' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The escape at `chars[at]` (`\`): the index after it, and the character it stands for when
/// it is an escaped punctuation character.
fn escape(chars: &[char], at: usize) -> Option<(usize, Option<char>)> {
    let c = *chars.get(at + 1)?;
    let mut i = at + 2;
    if c.is_ascii_punctuation() && c != '<' && c != '>' {
        return Some((i, Some(c)));
    }
    // Arguments: `\x{…}`/`\xHH`, `\u{…}`/`\uHHHH`, `\U{…}`/`\UHHHHHHHH`, `\p{…}`/`\pL`,
    // `\b{start}`.
    let fixed = match c {
        'x' => 2,
        'u' => 4,
        'U' => 8,
        'p' | 'P' => 1,
        _ => 0,
    };
    if chars.get(i) == Some(&'{') && (fixed > 0 || c == 'b' || c == 'B') {
        i += chars[i..].iter().position(|&c| c == '}')? + 1;
    } else {
        i += fixed;
    }
    Some((i.min(chars.len()), None))
}

struct Searcher<'a> {
    re: &'a Regex,
    context: usize,
    max: u64,
    count_limit: u64,
    budget: Budget,
    /// Whether match lines are still being added to the content.
    emitting: bool,
    /// Whether counting stopped at `count_limit`.
    stopped: bool,
    seen: u64,
    returned: u64,
    files_searched: u64,
    files_matched: u64,
    files_returned: u64,
    binary_skipped: u64,
    too_large: u64,
    unreadable: u64,
    /// Whether any line has been printed (for `--` between groups).
    printed_any: bool,
    row: String,
    /// The names printed quoted (`data.escaped_names`).
    escaped: Escaped,
}

/// Where the printer is in one file: the start of the next unprinted line and its number.
struct Cursor {
    /// Byte offset up to which lines have been printed (a line start).
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

impl<'a> Searcher<'a> {
    fn new(re: &'a Regex, context: usize, max: u64, max_bytes: usize) -> Self {
        Searcher {
            re,
            context,
            max,
            count_limit: count_limit(max),
            budget: Budget::new(max_bytes.saturating_sub(NOTE_RESERVE).max(1)),
            emitting: true,
            stopped: false,
            seen: 0,
            returned: 0,
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

    fn file(&mut self, path: &Path, rel: &str) {
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
    fn bytes(&mut self, buf: &[u8], rel: &str) {
        if text::has_nul_prefix(buf) {
            self.binary_skipped += 1;
            return;
        }
        self.files_searched += 1;
        self.search(buf, rel);
    }

    /// Search one file's bytes. Its rows name it as [`names`] prints it: with context rows
    /// (`path-line-text`) a name with `-<digits>-` is quoted too.
    fn search(&mut self, buf: &[u8], exact_rel: &str) {
        let shown = if self.context > 0 {
            names::display_in_rows(exact_rel)
        } else {
            names::display(exact_rel)
        };
        let rel: &str = &shown;
        let len = buf.len();
        let mut pos = 0;
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
        while pos < len {
            let m = match self.re.find_at(buf, pos) {
                Some(m) => m,
                None => break,
            };
            let ls = match memchr::memrchr(b'\n', &buf[pos..m.start()]) {
                Some(i) => pos + i + 1,
                None => pos,
            };
            if ls >= len {
                // An empty match after the final newline: not a line.
                break;
            }
            let le = match memchr::memchr(b'\n', &buf[m.start()..]) {
                Some(i) => m.start() + i,
                None => len,
            };
            // A match that runs past the end of its line (`\s`, `[^x]` can match a newline) does
            // not count; the line matches only if the regex matches within it.
            let in_line = if m.end() <= le {
                true
            } else {
                self.re.is_match(&buf[ls..le])
            };
            pos = le + 1;
            if !in_line {
                continue;
            }
            self.seen += 1;
            file_matches += 1;
            if self.emitting {
                let match_col = if m.end() <= le { m.start() - ls } else { 0 };
                if self.emit_match(buf, rel, &mut cur, ls, le, match_col) {
                    file_returned = true;
                    self.returned += 1;
                    if self.returned >= self.max {
                        self.emitting = false;
                        self.flush_after(buf, rel, &mut cur);
                    }
                } else {
                    self.emitting = false;
                }
            }
            if self.seen >= self.count_limit {
                self.stopped = true;
                break;
            }
        }
        if self.emitting {
            self.flush_after(buf, rel, &mut cur);
        }
        if cur.file_printed && matches!(shown, std::borrow::Cow::Owned(_)) {
            self.escaped.note(exact_rel);
        }
        if file_matches > 0 {
            self.files_matched += 1;
        }
        if file_returned {
            self.files_returned += 1;
        }
    }

    /// Print a matching line `[ls, le)` with its context. Returns false when the budget is
    /// full (the match line itself was not printed).
    fn emit_match(
        &mut self,
        buf: &[u8],
        rel: &str,
        cur: &mut Cursor,
        ls: usize,
        le: usize,
        match_col: usize,
    ) -> bool {
        // The match line's number.
        let line_no =
            cur.known_no + memchr::memchr_iter(b'\n', &buf[cur.known_pos..ls]).count() as u64;
        cur.known_pos = ls;
        cur.known_no = line_no;

        // After-context owed to the previous match, up to this line.
        while cur.pending_after > 0 && cur.printed_upto < ls {
            if !self.print_context_line(buf, rel, cur) {
                return false;
            }
            cur.pending_after -= 1;
        }
        cur.pending_after = 0;

        // Before-context: up to `context` lines, not reaching back into printed lines.
        let floor = cur.printed_upto;
        let mut b = ls;
        let mut b_no = line_no;
        for _ in 0..self.context {
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
        let separate =
            self.context > 0 && self.printed_any && (!cur.file_printed || b > cur.printed_upto);
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
        push_row(&mut self.row, rel, ':', line_no, &buf[ls..le], match_col);
        if !self.budget.push_line(&self.row) {
            return false;
        }
        self.printed_any = true;
        cur.file_printed = true;
        cur.printed_upto = (le + 1).min(buf.len());
        cur.printed_no = line_no + 1;
        cur.pending_after = self.context;
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
            return false;
        }
        self.printed_any = true;
        cur.file_printed = true;
        cur.printed_upto = (e + 1).min(buf.len());
        cur.printed_no += 1;
        true
    }

    /// Print the after-context still owed at the end of a file or when the cap is reached;
    /// stops at a line that matches (it is a match not returned, not context).
    fn flush_after(&mut self, buf: &[u8], rel: &str, cur: &mut Cursor) {
        while cur.pending_after > 0 && cur.printed_upto < buf.len() {
            let s = cur.printed_upto;
            let e = match memchr::memchr(b'\n', &buf[s..]) {
                Some(i) => s + i,
                None => buf.len(),
            };
            if self.re.is_match(&buf[s..e]) {
                break;
            }
            if !self.print_context_line(buf, rel, cur) {
                break;
            }
            cur.pending_after -= 1;
        }
        cur.pending_after = 0;
    }

    fn finish(mut self, pattern: &str, start_rel: &str, walk_errors: usize) -> Report {
        let exact = !self.stopped;
        let seen_text = if exact {
            format!("{}", self.seen)
        } else {
            format!("at least {}", self.seen)
        };
        let files_text = if exact {
            format!("{} file{}", self.files_matched, plural(self.files_matched))
        } else {
            format!(
                "at least {} file{}",
                self.files_matched,
                plural(self.files_matched)
            )
        };
        let mut content = self.budget.into_string();
        let truncated = self.returned < self.seen;
        if self.seen == 0 {
            content.push_str(&format!(
                "No matches for `{pattern}` in {} file{} searched under {}",
                self.files_searched,
                plural(self.files_searched),
                self.escaped.show(start_rel)
            ));
            if self.binary_skipped > 0 {
                content.push_str(&format!(
                    " ({} binary file{} skipped)",
                    self.binary_skipped,
                    plural(self.binary_skipped)
                ));
            }
            content.push('\n');
        } else if truncated {
            let why = if self.returned >= self.max {
                format!("max_matches={}", self.max)
            } else {
                "the output size budget".to_string()
            };
            content.push_str(&format!(
                "[truncated: showing {} of {seen_text} matching lines in {files_text} (limited by {why}); narrow the pattern or use path/include{}]\n",
                self.returned,
                if self.returned >= self.max && self.max < MAX_MAX_MATCHES {
                    ", or raise max_matches"
                } else {
                    ""
                }
            ));
        }
        if self.too_large > 0 {
            content.push_str(&format!(
                "[{} file{} larger than {} MiB not searched]\n",
                self.too_large,
                plural(self.too_large),
                MAX_FILE_BYTES >> 20
            ));
        }
        let summary = if self.seen == 0 {
            format!(
                "grep `{pattern}`: no matches in {} files",
                self.files_searched
            )
        } else if truncated {
            format!(
                "grep `{pattern}`: showing {} of {seen_text} matching lines in {files_text}",
                self.returned
            )
        } else {
            format!(
                "grep `{pattern}`: {} matching lines in {files_text}",
                self.seen
            )
        };
        let mut data = json!({
                "pattern": pattern,
                "path": start_rel,
                "matches": self.seen,
                "matches_returned": self.returned,
                "matches_exact": exact,
                "max_matches": self.max,
                "files_searched": self.files_searched,
                "files_matched": self.files_matched,
                "binary_files_skipped": self.binary_skipped,
                "large_files_skipped": self.too_large,
                "unreadable": self.unreadable + walk_errors as u64,
        });
        self.escaped.add_to(&mut data);
        Report {
            summary,
            content,
            truncated,
            totals: vec![
                ("matches", self.seen, self.returned),
                ("files", self.files_matched, self.files_returned),
            ],
            data,
        }
    }
}

/// A file's bytes with one open, one size query and as few reads as possible; `None` when it
/// is larger than [`MAX_FILE_BYTES`].
#[cfg(target_arch = "wasm32")]
fn read_file(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    wasi_read::read_file(path, MAX_FILE_BYTES)
}

/// Reading through `wasi:filesystem` directly: one `open-at` (where the host's filesystem
/// guard applies, as for any open), one `stat`, and `read`s until a short one. std's `File`
/// adds several size and position queries per file, each a host call and a syscall.
#[cfg(target_arch = "wasm32")]
mod wasi_read {
    use std::cell::OnceCell;
    use std::io::{Error, ErrorKind};
    use std::path::Path;
    use wasip2::filesystem::preopens::get_directories;
    use wasip2::filesystem::types::{Descriptor, DescriptorFlags, ErrorCode, OpenFlags, PathFlags};

    /// The most bytes asked for in one `read` (the host hands out at most 64 KiB at a time).
    const CHUNK: u64 = 64 << 10;

    thread_local! {
        /// The preopened directories, longest guest path first.
        static PREOPENS: OnceCell<Vec<(Descriptor, String)>> = const { OnceCell::new() };
    }

    fn io(code: ErrorCode) -> Error {
        let kind = match code {
            ErrorCode::NoEntry => ErrorKind::NotFound,
            ErrorCode::Access | ErrorCode::NotPermitted => ErrorKind::PermissionDenied,
            _ => ErrorKind::Other,
        };
        Error::new(kind, format!("{code:?}"))
    }

    pub(super) fn read_file(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
        let text = path
            .to_str()
            .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "path is not UTF-8"))?;
        PREOPENS.with(|cell| {
            let preopens = cell.get_or_init(|| {
                let mut dirs = get_directories();
                dirs.sort_by_key(|(_, guest)| std::cmp::Reverse(guest.len()));
                dirs
            });
            let (dir, rel) = preopens
                .iter()
                .find_map(|(dir, guest)| {
                    let rest = text.strip_prefix(guest.trim_end_matches('/'))?;
                    if rest.is_empty() {
                        Some((dir, "."))
                    } else {
                        rest.strip_prefix('/').map(|r| (dir, r))
                    }
                })
                .ok_or_else(|| Error::new(ErrorKind::NotFound, "outside the preopens"))?;
            let file = dir
                .open_at(
                    PathFlags::SYMLINK_FOLLOW,
                    rel,
                    OpenFlags::empty(),
                    DescriptorFlags::READ,
                )
                .map_err(io)?;
            let size = file.stat().map_err(io)?.size;
            if size > max {
                return Ok(None);
            }
            let mut buf: Vec<u8> = Vec::new();
            loop {
                let want = (size + 1).saturating_sub(buf.len() as u64).clamp(1, CHUNK);
                let (bytes, eof) = file.read(want, buf.len() as u64).map_err(io)?;
                let got = bytes.len() as u64;
                if buf.is_empty() {
                    // Most files come in one read: keep its buffer instead of copying it.
                    buf = bytes;
                    if got == want {
                        buf.reserve((size + 1).saturating_sub(got) as usize);
                    }
                } else {
                    buf.extend_from_slice(&bytes);
                }
                if buf.len() as u64 > max {
                    return Ok(None);
                }
                // A regular file returns fewer bytes than asked only at its end.
                if eof || got < want {
                    return Ok(Some(buf));
                }
            }
        })
    }
}

/// A file's bytes with one open, one size query and as few reads as possible; `None` when it
/// is larger than [`MAX_FILE_BYTES`].
#[cfg(not(target_arch = "wasm32"))]
fn read_file(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > MAX_FILE_BYTES {
        return Ok(None);
    }
    let mut buf = Vec::with_capacity(size as usize + 1);
    file.read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Ok(None);
    }
    Ok(Some(buf))
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Append `rel{sep}no{sep}text` to `row`, the text without its `\r`, shown lossily as UTF-8
/// and cut to [`MAX_LINE_CHARS`]; when the match is far into a long line, the shown part starts
/// shortly before it.
fn push_row(row: &mut String, rel: &str, sep: char, no: u64, line: &[u8], match_col: usize) {
    use std::fmt::Write as _;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let _ = write!(row, "{rel}{sep}{no}{sep}");
    // Cheap path: short ASCII/UTF-8 lines.
    if line.len() <= MAX_LINE_CHARS {
        row.push_str(&String::from_utf8_lossy(line));
        return;
    }
    let mut from = 0;
    if match_col > MAX_LINE_CHARS / 2 {
        from = match_col - 100;
        // Do not start inside a UTF-8 sequence.
        while from < line.len() && (line[from] & 0xC0) == 0x80 {
            from += 1;
        }
    }
    let window = &line[from..line.len().min(from + MAX_LINE_CHARS * 4)];
    let shown = String::from_utf8_lossy(window);
    let (kept, _) = text::cut_chars(&shown, MAX_LINE_CHARS);
    if kept.len() == shown.len() && from + window.len() == line.len() && from == 0 {
        row.push_str(kept);
        return;
    }
    if from > 0 {
        let _ = write!(row, "[…{from} bytes] ");
    }
    row.push_str(kept);
    let _ = write!(
        row,
        " […line cut at {MAX_LINE_CHARS} chars; the line has {} bytes]",
        line.len()
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;

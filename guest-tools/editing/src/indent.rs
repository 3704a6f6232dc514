//! Indentation adaptation for the whitespace-normalized fallback.
//!
//! When `old_string` matched whole file lines only with whitespace ignored, `new_string` was
//! written in the caller's indentation, not the file's. Each line of `new_string` is rewritten:
//!
//! * a blank line becomes empty;
//! * a line whose indentation equals the indentation of one of `old_string`'s lines gets the
//!   indentation of the file line that `old_string` line matched (the most reliable mapping);
//! * any other line is measured in indentation levels of the caller's unit (tab, or N spaces,
//!   inferred from `old_string`, then `new_string`, then the file) and placed at the same depth
//!   relative to the first matched line, rendered in the file's unit (inferred from the matched
//!   lines, then the whole file).
//!
//! When `old_string`'s indentation already equals the file's on every matched line,
//! `new_string` is used as written.

use std::collections::BTreeMap;

/// Assumed width of a tab when spaces must be converted to tab levels.
const TAB_WIDTH: usize = 4;

/// One level of indentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// One tab per level.
    Tab,
    /// N spaces per level.
    Spaces(usize),
}

impl Unit {
    fn describe(self) -> String {
        match self {
            Unit::Tab => "tabs".to_string(),
            Unit::Spaces(1) => "1 space per level".to_string(),
            Unit::Spaces(n) => format!("{n} spaces per level"),
        }
    }
}

/// The result of adapting `new_string`'s lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Adaptation {
    /// The replacement lines, without line endings.
    pub lines: Vec<String>,
    /// How many lines differ from `new_string` as written.
    pub changed: usize,
    /// Whether `new_string` was used as written because the indentation already matched.
    pub identity: bool,
    file_unit: Unit,
    source_unit: Unit,
    base_indent: String,
}

impl Adaptation {
    /// One or two sentences for the model about what was adapted.
    pub fn describe(&self) -> String {
        if self.identity {
            return "Its indentation already matched the file, so new_string was used as written."
                .to_string();
        }
        if self.changed == 0 {
            return "new_string needed no re-indentation.".to_string();
        }
        let tabs = self.base_indent.chars().filter(|&c| c == '\t').count();
        let spaces = self.base_indent.len() - tabs;
        let base = match (tabs, spaces) {
            (0, 0) => "no indentation".to_string(),
            (t, 0) => format!("{t} tab(s)"),
            (0, s) => format!("{s} space(s)"),
            (t, s) => format!("{t} tab(s) and {s} space(s)"),
        };
        format!(
            "new_string was re-indented to the file's indentation ({}, matched block indented \
             by {base}; old_string used {}): {} of {} line(s) changed.",
            self.file_unit.describe(),
            self.source_unit.describe(),
            self.changed,
            self.lines.len()
        )
    }
}

/// The leading spaces and tabs of `line`.
pub fn indent_of(line: &str) -> &str {
    let end = line.len() - line.trim_start_matches([' ', '\t']).len();
    &line[..end]
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// The indentation unit of `lines`: tabs when most indented lines start with a tab, otherwise
/// the most common step (2 to 8 spaces) between neighbouring non-blank lines; `None` when the
/// lines give no evidence.
pub fn detect_unit(lines: &[&str]) -> Option<Unit> {
    let mut tabs = 0usize;
    let mut spaces = 0usize;
    let mut steps: BTreeMap<usize, usize> = BTreeMap::new();
    let mut prev: Option<usize> = None;
    for line in lines.iter().filter(|l| !is_blank(l)) {
        let ind = indent_of(line);
        if ind.starts_with('\t') {
            tabs += 1;
        } else if ind.starts_with(' ') {
            spaces += 1;
        }
        if ind.contains('\t') {
            prev = None;
            continue;
        }
        let width = ind.len();
        if let Some(p) = prev {
            let step = width.abs_diff(p);
            if (2..=8).contains(&step) {
                *steps.entry(step).or_insert(0) += 1;
            }
        }
        prev = Some(width);
    }
    if tabs > spaces {
        return Some(Unit::Tab);
    }
    // Most common step; the smaller one on a tie (BTreeMap iterates in ascending order).
    let mut best: Option<(usize, usize)> = None;
    for (&step, &count) in &steps {
        if best.is_none_or(|(_, c)| count > c) {
            best = Some((step, count));
        }
    }
    best.map(|(step, _)| Unit::Spaces(step))
}

/// Depth of `indent` in `unit` levels, and the spaces left over.
fn level(indent: &str, unit: Unit) -> (usize, usize) {
    let tabs = indent.chars().filter(|&c| c == '\t').count();
    let spaces = indent.len() - tabs;
    match unit {
        Unit::Tab => (tabs + spaces / TAB_WIDTH, spaces % TAB_WIDTH),
        Unit::Spaces(n) => {
            let n = n.max(1);
            let cols = tabs * n + spaces;
            (cols / n, cols % n)
        }
    }
}

fn render(level: usize, rem: usize, unit: Unit) -> String {
    match unit {
        Unit::Tab => format!("{}{}", "\t".repeat(level), " ".repeat(rem)),
        Unit::Spaces(n) => " ".repeat(level * n + rem),
    }
}

/// Re-indent `new_lines` for a block where `old_lines` matched the file lines `matched` (same
/// length) with whitespace ignored. `file_hint` is the unit detected on the whole file.
pub fn adapt(
    old_lines: &[&str],
    matched: &[&str],
    new_lines: &[&str],
    file_hint: Option<Unit>,
) -> Adaptation {
    let pairs: Vec<(&str, &str)> = old_lines
        .iter()
        .zip(matched.iter())
        .filter(|(o, _)| !is_blank(o))
        .map(|(o, f)| (indent_of(o), indent_of(f)))
        .collect();
    let (old_base, file_base) = pairs.first().copied().unwrap_or(("", ""));

    let region_unit = detect_unit(matched);
    let mut file_unit = region_unit.or(file_hint).unwrap_or(Unit::Spaces(4));
    let region_uses_spaces_only = matched
        .iter()
        .filter(|l| !is_blank(l))
        .all(|l| !indent_of(l).contains('\t'))
        && matched.iter().any(|l| indent_of(l).starts_with(' '));
    if file_unit == Unit::Tab && region_uses_spaces_only {
        file_unit = Unit::Spaces(TAB_WIDTH);
    }
    if file_base.contains('\t') && region_unit.is_none() {
        file_unit = Unit::Tab;
    }
    let caller_uses_tabs = old_lines
        .iter()
        .chain(new_lines.iter())
        .any(|l| indent_of(l).contains('\t'));
    let source_unit = if caller_uses_tabs {
        Unit::Tab
    } else {
        detect_unit(old_lines)
            .or_else(|| detect_unit(new_lines))
            .unwrap_or(match file_unit {
                Unit::Tab => Unit::Spaces(TAB_WIDTH),
                spaces => spaces,
            })
    };

    if pairs.iter().all(|(o, f)| o == f) {
        return Adaptation {
            lines: new_lines.iter().map(|l| l.to_string()).collect(),
            changed: 0,
            identity: true,
            file_unit,
            source_unit,
            base_indent: file_base.to_string(),
        };
    }

    let (old_base_level, _) = level(old_base, source_unit);
    let (file_base_level, _) = level(file_base, file_unit);
    let mut lines = Vec::with_capacity(new_lines.len());
    let mut changed = 0;
    for &line in new_lines {
        let adapted = if is_blank(line) {
            String::new()
        } else {
            let ind = indent_of(line);
            let body = &line[ind.len()..];
            match pairs.iter().find(|(o, _)| *o == ind) {
                Some((_, f)) => format!("{f}{body}"),
                None => {
                    let (lvl, rem) = level(ind, source_unit);
                    let target = (file_base_level + lvl).saturating_sub(old_base_level);
                    format!("{}{body}", render(target, rem, file_unit))
                }
            }
        };
        if adapted != line {
            changed += 1;
        }
        lines.push(adapted);
    }
    Adaptation {
        lines,
        changed,
        identity: false,
        file_unit,
        source_unit,
        base_indent: file_base.to_string(),
    }
}

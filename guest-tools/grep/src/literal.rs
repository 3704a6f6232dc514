//! The string every match of a pattern must contain, for the host to sort out files without it.

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

//! Every problem of a policy file, not just the first: serde stops at the first field it
//! cannot read, so after each one the offending line is blanked (offsets kept, so later
//! lines keep their numbers) and the file is read again. A `missing field` that only appears
//! because a line was blanked is the blanking's doing, not the user's, and is dropped.

use super::Problem;

/// At most this many problems are collected from one file.
const MAX_PROBLEMS: usize = 20;

/// The problems that stop `text` from being read as `T`, each with its line (`origin:line`).
/// Empty when it reads.
pub(crate) fn read_problems<T: serde::de::DeserializeOwned>(
    origin: &str,
    text: &str,
) -> Vec<Problem> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let mut current = text.to_string();
    let mut problems: Vec<Problem> = Vec::new();
    let mut blanked: Vec<usize> = Vec::new();
    while problems.len() < MAX_PROBLEMS {
        let Err(e) = toml::from_str::<T>(&current) else {
            break;
        };
        let Some(span) = e.span() else {
            problems.push(Problem {
                location: origin.to_string(),
                message: e.message().to_string(),
                severity: "error",
            });
            break;
        };
        let line = line_of(span.start);
        let secondary = !blanked.is_empty() && e.message().starts_with("missing field");
        if !secondary
            && !problems
                .iter()
                .any(|p| p.location.ends_with(&format!(":{line}")) && p.message == e.message())
        {
            problems.push(Problem {
                location: format!("{origin}:{line}"),
                message: e.message().to_string(),
                severity: "error",
            });
        }
        // Blank the line the error points into; for a table left without a field it needs
        // (its line was blanked before), the whole table up to the next header. A span over
        // several lines otherwise ends the search, as does a line blanked before.
        let start = current[..span.start.min(current.len())]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        let mut end = current[start..]
            .find('\n')
            .map_or(current.len(), |i| start + i);
        if secondary {
            end = table_end(&current, start);
        } else if span.end > end + 1 {
            break;
        }
        if blanked.contains(&start) || end <= start {
            break;
        }
        blanked.push(start);
        let spaces: String = current[start..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        current.replace_range(start..end, &spaces);
    }
    let line = |p: &Problem| {
        p.location
            .rsplit(':')
            .next()
            .and_then(|n| n.parse::<usize>().ok())
    };
    problems.sort_by_key(line);
    problems
}

/// Where the table whose header line starts at `start` ends: before the next line that is a
/// header (`[...]`), or at the end of the text.
fn table_end(text: &str, start: usize) -> usize {
    let mut at = text[start..]
        .find('\n')
        .map_or(text.len(), |i| start + i + 1);
    while at < text.len() {
        let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
        if text[at..line_end].trim_start().starts_with('[') {
            return at.saturating_sub(1).max(start);
        }
        at = line_end + 1;
    }
    text.len()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{Layer, LayerKind};

    #[test]
    fn every_problem_of_a_file_is_reported_in_line_order() {
        let text = "mode = \"ask\"\n[[rules]]\nkey = \"edit:src/**\"\ndecision = \"maybe\"\n[[rules]]\nkey = \"read\"\ndecision = \"allow\"\nbogus_field = 2\n[limits]\nbogus = 1\ntimeout_ms = \"slow\"\n";
        let Err(problems) = Layer::parse("p.toml", LayerKind::Workspace, text) else {
            panic!("a broken policy parsed");
        };
        let shown: Vec<String> = problems
            .iter()
            .map(|p| format!("{}: {}", p.location, p.message))
            .collect();
        let lines: Vec<&str> = problems.iter().map(|p| p.location.as_str()).collect();
        assert_eq!(
            lines,
            ["p.toml:4", "p.toml:8", "p.toml:10", "p.toml:11"],
            "{shown:#?}"
        );
        assert!(shown[0].contains("`maybe`"), "{shown:#?}");
        assert!(shown[1].contains("`bogus_field`"), "{shown:#?}");
        // No problem is made up by the search itself (a rule left without its decision).
        assert!(
            !shown.iter().any(|s| s.contains("missing field")),
            "{shown:#?}"
        );
    }

    #[test]
    fn a_real_missing_field_is_still_reported() {
        let text = "[[rules]]\nkey = \"read\"\n";
        let Err(problems) = Layer::parse("p.toml", LayerKind::Workspace, text) else {
            panic!("a rule without a decision parsed");
        };
        assert!(
            problems[0].message.contains("missing field `decision`"),
            "{problems:?}"
        );
    }
}

//! Cutting text to a budget, always visibly: what was left out is said in the text itself.

/// Cut `content` to `max` bytes keeping the head and the tail, with a visible marker saying
/// how much was left out and where the whole is. Returns `None` when it already fits.
pub fn cut_head_tail(content: &str, max: usize, full_ref: &str) -> Option<String> {
    if content.len() <= max {
        return None;
    }
    let marker_room = 200;
    let keep = max.saturating_sub(marker_room);
    let head_len = floor_boundary(content, keep * 2 / 3);
    let tail_start = ceil_boundary(
        content,
        content.len() - (keep - head_len).min(content.len()),
    );
    let head = &content[..head_len];
    let tail = &content[tail_start.max(head_len)..];
    let omitted = content.len() - head.len() - tail.len();
    let omitted_lines = content[head_len..tail_start.max(head_len)].lines().count();
    Some(format!(
        "{head}\n[... truncated: {omitted} bytes ({omitted_lines} lines) omitted; the whole output is in {full_ref}: read it with offset/limit ...]\n{tail}"
    ))
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_head_and_tail_and_says_so() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let cut = cut_head_tail(&text, 4096, ".toolgate/outputs/x.txt").unwrap();
        assert!(cut.len() <= 4096 + 200, "{}", cut.len());
        assert!(cut.starts_with("line 0\n"));
        assert!(cut.trim_end().ends_with("line 9999"));
        assert!(cut.contains("truncated"));
        assert!(cut.contains(".toolgate/outputs/x.txt"));
        assert_eq!(cut_head_tail("short", 4096, "x"), None);
    }
}

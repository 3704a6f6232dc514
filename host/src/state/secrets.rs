//! Values the host holds for tools and must never store or show (the credentials it brokers):
//! registered when a gate opens, replaced by their placeholders in everything the audit writes.

use std::sync::{OnceLock, RwLock};

/// Shorter values are not scrubbed from free text: a two-letter "secret" would turn every such
/// pair of letters in the audit into a placeholder. They are still never given to a tool.
const MIN_SCRUBBED: usize = 4;

fn known() -> &'static RwLock<Vec<(String, String)>> {
    static KNOWN: OnceLock<RwLock<Vec<(String, String)>>> = OnceLock::new();
    KNOWN.get_or_init(Default::default)
}

/// Replace `value` by `placeholder` in everything scrubbed from now on (for this process).
pub fn register(value: &str, placeholder: &str) {
    if value.len() < MIN_SCRUBBED {
        return;
    }
    let mut k = known().write().unwrap_or_else(|p| p.into_inner());
    if !k.iter().any(|(v, _)| v == value) {
        k.push((value.to_string(), placeholder.to_string()));
        // Longest first, so a value that contains another is replaced whole.
        k.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
    }
}

/// `text` with every registered value replaced (`None`: none was in it).
pub fn scrub_known(text: &str) -> Option<String> {
    let k = known().read().unwrap_or_else(|p| p.into_inner());
    let mut out: Option<String> = None;
    for (v, ph) in k.iter() {
        if out.as_deref().unwrap_or(text).contains(v.as_str()) {
            out = Some(out.as_deref().unwrap_or(text).replace(v.as_str(), ph));
        }
    }
    out
}

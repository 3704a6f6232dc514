//! Random-looking strings: the entropy and "wordiness" judges of a candidate with no name or
//! format to go by.

use super::{ENTROPY_BITS, MAX_WORDINESS, MIN_ENTROPY_LEN};

/// A random-looking string: long enough, upper and lower case and digits, not hex, high
/// Shannon entropy, and not mostly words.
pub(super) fn is_high_entropy(token: &str) -> bool {
    let t = token.trim_end_matches('=');
    let b = t.as_bytes();
    if b.len() < MIN_ENTROPY_LEN {
        return false;
    }
    let (mut upper, mut lower, mut digit, mut non_hex_letter) = (false, false, false, false);
    let mut counts = [0u32; 128];
    for &c in b {
        upper |= c.is_ascii_uppercase();
        lower |= c.is_ascii_lowercase();
        digit |= c.is_ascii_digit();
        non_hex_letter |= c.is_ascii_alphabetic() && !c.is_ascii_hexdigit();
        counts[usize::from(c & 0x7f)] += 1;
    }
    if !(upper && lower && digit && non_hex_letter) {
        return false;
    }
    let n = b.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&k| k > 0)
        .map(|&k| {
            let p = f64::from(k) / n;
            -p * p.log2()
        })
        .sum();
    entropy >= ENTROPY_BITS && wordiness(b) <= MAX_WORDINESS
}

/// The share of `b` in runs of 3+ lowercase letters, 4+ capitals or 3+ digits.
fn wordiness(b: &[u8]) -> f64 {
    let class = |c: u8| {
        if c.is_ascii_lowercase() {
            1
        } else if c.is_ascii_uppercase() {
            2
        } else if c.is_ascii_digit() {
            3
        } else {
            0
        }
    };
    let mut in_words = 0usize;
    let mut j = 0;
    while j < b.len() {
        let k = class(b[j]);
        let mut e = j + 1;
        while e < b.len() && class(b[e]) == k {
            e += 1;
        }
        let run = e - j;
        let long = match k {
            1 | 3 => run >= 3,
            2 => run >= 4,
            _ => false,
        };
        if long {
            in_words += run;
        }
        j = e;
    }
    in_words as f64 / b.len() as f64
}

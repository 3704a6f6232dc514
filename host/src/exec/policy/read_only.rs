//! The read-only allowlist: a program whose every option its table calls safe (git: a
//! read-only subcommand; `find`: safe primaries only), and the words it may read as files.

use super::argv::parse_find;
use crate::exec::catalog;
use crate::exec::option_tables::find_primary;
use crate::exec::options::{has, parse, Item};

/// For a read-only command, the words the program may read as files — its operands and its
/// options' values, exactly as it parses them (`sort -S 64K -k2 x` → `64K`, `2`, `x`); `None`
/// when the command is not read-only. The gate checks each against the scope.
pub fn read_only_words(argv: &[String]) -> Option<Vec<&str>> {
    let (program, args) = argv.split_first()?;
    match program.as_str() {
        // They print their arguments and read nothing.
        "echo" | "true" | "false" => Some(args.iter().map(String::as_str).collect()),
        // coreutils printf reads no options but --help/--version; a first argument like `-v`
        // (bash's builtin would assign a variable) is not read-only.
        "printf" => match args.first().map(String::as_str) {
            Some(f) if f.starts_with('-') && !matches!(f, "--" | "--help" | "--version") => None,
            _ => Some(args.iter().map(String::as_str).collect()),
        },
        "git" => git_read_only(args),
        "find" => {
            let f = parse_find(args).ok()?;
            f.primaries
                .iter()
                .all(|(p, _)| find_primary(p).is_some_and(|(_, _, safe)| safe))
                .then_some(f.words)
        }
        name => {
            let t = catalog::table(name)?;
            let items = parse(t, args).ok()?;
            let words = safe_words(&items)?;
            if name == "date" {
                // Only a +FORMAT operand; anything else sets the clock.
                let operands: Vec<_> = items
                    .iter()
                    .filter_map(|i| match i {
                        Item::Operand(w) => Some(*w),
                        Item::Opt(_) => None,
                    })
                    .collect();
                if operands.len() > 1 || operands.iter().any(|w| !w.starts_with('+')) {
                    return None;
                }
            }
            Some(words)
        }
    }
}

/// The operands and option values of parsed items when every option is safe. A value that may
/// name a file must be spelled where the gate looks for it: in its own word, after `=`, or
/// right after its letter (`-f.env`, not `-rf.env`).
fn safe_words<'a>(items: &[Item<'a>]) -> Option<Vec<&'a str>> {
    let mut words = Vec::new();
    for item in items {
        match item {
            Item::Operand(w) => words.push(*w),
            Item::Opt(f) => {
                if !f.opt.safe {
                    return None;
                }
                if f.opt.path && f.attached_at.is_some_and(|at| at != 2) {
                    return None;
                }
                words.extend(f.values.iter().copied());
            }
        }
    }
    Some(words)
}

/// `git <sub> …` (args without `git`): read-only subcommands with only safe options. Global
/// options before the subcommand are never read-only; nor is a `<rev>:<path>` operand (it
/// reads a file's content from history, which the scope check cannot see), `log -L`, or any
/// form that could print or search a blob's content ([`super::blobs`]: `log -p`, `diff`
/// without `--stat`-like formats, `show <object id>`, `grep <rev>`, `cat-file --batch`, …).
fn git_read_only(args: &[String]) -> Option<Vec<&str>> {
    let (sub, rest) = args.split_first()?;
    let t = catalog::git_table(sub)?;
    let items = parse(t, rest).ok()?;
    let words = safe_words(&items)?;
    let operands: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::Operand(w) => Some(*w),
            Item::Opt(_) => None,
        })
        .collect();
    if operands.iter().any(|w| w.contains(':')) {
        return None;
    }
    match sub.as_str() {
        "log" | "show" | "rev-list" | "shortlog" if has(&items, "-L") => return None,
        // Names after `branch`/`tag` create one unless listing.
        "branch" | "tag" if !operands.is_empty() && !has(&items, "--list") => return None,
        "remote" if !operands.is_empty() => return None,
        _ => {}
    }
    if super::blobs::git_blob_printer(sub, &items, rest).is_some() {
        return None;
    }
    Some(words)
}

/// Why `argv` (`git <sub> …`, no global options) could print a blob's content, when its
/// subcommand and options are otherwise read-only.
pub(super) fn git_blob_reason(argv: &[String]) -> Option<String> {
    let (program, args) = argv.split_first()?;
    if super::argv::program_name(program) != "git" {
        return None;
    }
    let (sub, rest) = args.split_first()?;
    let items = parse(catalog::git_table(sub)?, rest).ok()?;
    super::blobs::git_blob_printer(sub, &items, rest)
}

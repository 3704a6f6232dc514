//! git's blob printers: the read-only git commands that could print a committed file's
//! content, or answer questions about it.
//!
//! The sandbox masks every deny-listed file of the working tree (the kernel does), but git's
//! object database keeps the content of every path ever committed or staged, a deny-listed
//! `.env` included, and the masks do not cover it. So a git command is read-only only when it
//! cannot print (or search) the content of a blob:
//!
//! - `log`, `rev-list`, `show`, `diff`: no option from [`CONTENT`] (patches, word diffs,
//!   combined diffs, `--check`'s lines, and the searches `-S`, `-G`, `-I`, `--anchored`,
//!   whose matches answer "does the secret contain …"); `diff` and `show` print a patch unless
//!   a format from [`FORMATS`] (`--stat`, `--name-only`, `-s`, …) replaces it, so they need one;
//!   plain `git diff` is one too (the index keeps `.env`'s blob, the masked file reads as
//!   another, and the difference is printed as removed lines). `diff --no-index` compares two
//!   files of the working tree, which the masks do cover, and keeps its read-only class.
//! - `show` and `cat-file`: no operand that may be an object id ([`may_name_blob`]):
//!   `git show <blob>` prints the blob whatever the format; `cat-file` prints content only with
//!   `-p`, the type `blob`, `--batch` or `--batch-command` (`-t`, `-s`, `-e`, `--batch-check`
//!   print metadata); `show --stdin` reads its objects from the input.
//! - `status`: not `-v` (it prints the staged diff).
//! - `grep`: not `--cached` (the index's blobs), and no word after the pattern that may be a
//!   revision (`git grep x HEAD` searches the tree of HEAD): a path must come after `--`, or be
//!   spelled so no revision can be (`.`, `./src`, `../x`, `/abs`: no ref name starts with a
//!   dot or a slash).
//! - `branch`, `tag`: no `%(raw)` in `--format` (a ref to a blob prints the blob).
//!
//! A pathspec never makes a blob printer read-only: the built-in deny-list matches at any
//! depth (`**/.env`), so every directory pathspec (`src/`, or `config` when it is a
//! directory in any commit) may match a secret, the classifier cannot tell a file from a
//! directory, and the policy's own secret patterns are not known here. `blame` prints the
//! one file it is given, a literal path the gate checks against the deny-list (with its
//! ancestors) like any other argument, so it keeps its read-only class; `ls-files`, `ls-tree`,
//! `rev-parse`, `shortlog`, `describe` print names, ids and commit metadata only.
//!
//! Left out: notes (`log --notes`) are blobs too, but only what someone wrote as a note.

use crate::exec::options::{Found, Item, Opt};

/// Diff and revision options that print or search blob content, by spelling (the first name
/// that names the option in its table). Every diff option is in this list or in
/// [`METADATA`] (a test walks the table).
pub(super) const CONTENT: &[&str] = &[
    "--patch",
    "--unified",
    "--patch-with-raw",
    "--patch-with-stat",
    "--word-diff",
    "--word-diff-regex",
    "--color-words",
    "--check",
    "--binary",
    "-S",
    "-G",
    "--pickaxe-all",
    "--pickaxe-regex",
    "--ignore-matching-lines",
    "--anchored",
    "--function-context",
    "--inter-hunk-context",
    "--output",
    "--ext-diff",
    "--textconv",
    "--cc",
    "-c",
    "--dd",
    "-m",
    "--remerge-diff",
    "--diff-merges",
];

/// The diff options that print no content and search none: formats, rename detection,
/// whitespace handling, prefixes, colours (every one of them harmless without a patch). Not
/// read by the classifier (an option outside [`CONTENT`] is metadata): the list makes the
/// choice for each option explicit, and a test checks every diff option is in one list.
#[cfg_attr(not(test), allow(dead_code))]
pub(super) const METADATA: &[&str] = &[
    "--no-patch",
    "--output-indicator-new",
    "--output-indicator-old",
    "--output-indicator-context",
    "--raw",
    "--indent-heuristic",
    "--no-indent-heuristic",
    "--minimal",
    "--patience",
    "--histogram",
    "--diff-algorithm",
    "--stat",
    "--stat-width",
    "--stat-name-width",
    "--stat-graph-width",
    "--stat-count",
    "--compact-summary",
    "--no-compact-summary",
    "--numstat",
    "--shortstat",
    "--dirstat",
    "--cumulative",
    "--dirstat-by-file",
    "--summary",
    "-z",
    "--name-only",
    "--name-status",
    "--submodule",
    "--color",
    "--no-color",
    "--color-moved",
    "--no-color-moved",
    "--color-moved-ws",
    "--no-color-moved-ws",
    "--no-renames",
    "--rename-empty",
    "--no-rename-empty",
    "--ws-error-highlight",
    "--full-index",
    "--no-full-index",
    "--abbrev",
    "--no-abbrev",
    "--break-rewrites",
    "--find-renames",
    "--find-copies",
    "--find-copies-harder",
    "--no-find-copies-harder",
    "--irreversible-delete",
    "-l",
    "--diff-filter",
    "--find-object",
    "-O",
    "--skip-to",
    "--rotate-to",
    "-R",
    "--relative",
    "--no-relative",
    "--text",
    "--no-text",
    "--ignore-cr-at-eol",
    "--ignore-space-at-eol",
    "--ignore-space-change",
    "--ignore-all-space",
    "--ignore-blank-lines",
    "--no-ignore-matching-lines",
    "--no-function-context",
    "--exit-code",
    "--no-exit-code",
    "--quiet",
    "--no-quiet",
    "--no-ext-diff",
    "--no-textconv",
    "--ignore-submodules",
    "--src-prefix",
    "--dst-prefix",
    "--no-prefix",
    "--default-prefix",
    "--line-prefix",
    "--ita-invisible-in-index",
    "--ita-visible-in-index",
    "--follow",
    "--no-follow",
];

/// The output formats that replace the patch `diff` and `show` print by default.
const FORMATS: &[&str] = &[
    "--no-patch",
    "--raw",
    "--stat",
    "--compact-summary",
    "--numstat",
    "--shortstat",
    "--dirstat",
    "--dirstat-by-file",
    "--summary",
    "--name-only",
    "--name-status",
    "--quiet",
];

/// The risk, said once for every refusal.
const RISK: &str = "git's object database keeps the content of every file ever committed or staged, deny-listed secrets (`.env`, keys) included, and the sandbox's masks cover only the working tree";

/// Whether `opt` is the option a listed spelling (`--patch`, `-S`) names.
pub(super) fn named(opt: &Opt, spelling: &str) -> bool {
    match spelling.strip_prefix("--") {
        Some(long) => opt.longs.contains(&long),
        None => {
            let short = &spelling[1..];
            short.chars().count() == 1 && short.chars().all(|c| opt.shorts.contains(c))
        }
    }
}

fn opts<'i, 'a>(items: &'i [Item<'a>]) -> impl Iterator<Item = &'i Found<'a>> {
    items.iter().filter_map(|i| match i {
        Item::Opt(f) => Some(f),
        Item::Operand(_) => None,
    })
}

fn has(items: &[Item<'_>], spelling: &str) -> bool {
    opts(items).any(|f| named(f.opt, spelling))
}

/// The first option found that prints or searches content, as spelled.
fn content_option<'a>(items: &[Item<'a>]) -> Option<&'a str> {
    opts(items)
        .find(|f| CONTENT.iter().any(|s| named(f.opt, s)))
        .map(|f| f.word)
}

/// Whether a revision operand may name a blob: an abbreviated or full object id (4 to 64 hex
/// digits), bare or with a peel that keeps a blob (`^{}`, `^{blob}`, `^{object}`, `^{tag}`).
/// `~n`, `^n`, `^{commit}`, `^{tree}`, `@{…}` and ranges of commits name commits or trees;
/// `<rev>:<path>` is refused before this. A ref name could point at a blob only if someone
/// made it so (the sandbox cannot write refs).
pub(super) fn may_name_blob(operand: &str) -> bool {
    let w = operand.trim_start_matches('^');
    let base_end = w.find(['~', '^', '@', '.']).unwrap_or(w.len());
    let (base, rest) = w.split_at(base_end);
    let keeps_blob = rest.is_empty()
        || ["^{}", "^{blob}", "^{object}", "^{tag}"].contains(&rest)
        || rest.starts_with("..")
        || rest.starts_with('.');
    (4..=64).contains(&base.len()) && base.chars().all(|c| c.is_ascii_hexdigit()) && keeps_blob
}

/// A word `git grep` cannot read as a revision: `.`, or starting with `./`, `../` or `/` (no
/// ref name or object id starts with a dot or a slash).
fn only_a_path(word: &str) -> bool {
    word == "."
        || word == ".."
        || word.starts_with("./")
        || word.starts_with("../")
        || word.starts_with('/')
}

/// Why `git <sub>` with these parsed `items` (from `args`) could print or search the content
/// of a blob, if it could. `None` for the commands that print names, ids and metadata only.
pub(super) fn git_blob_printer(sub: &str, items: &[Item<'_>], args: &[String]) -> Option<String> {
    let operands: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::Operand(w) => Some(*w),
            Item::Opt(_) => None,
        })
        .collect();
    let why = |what: String| Some(format!("`git {sub}` {what}: {RISK}"));
    match sub {
        "log" | "rev-list" | "show" | "diff" => {
            if sub == "diff" && has(items, "--no-index") {
                return None;
            }
            if let Some(w) = content_option(items) {
                return why(format!("with `{w}` prints or searches committed content"));
            }
            let defaults_to_patch = matches!(sub, "diff" | "show");
            if defaults_to_patch && !FORMATS.iter().any(|f| has(items, f)) {
                return why(
                    "prints a patch (committed content) unless a format such as `--stat` or `--name-only` replaces it"
                        .into(),
                );
            }
            if sub == "show" {
                if has(items, "--stdin") {
                    return why("reads the objects to print from its input".into());
                }
                if let Some(o) = operands.iter().find(|o| may_name_blob(o)) {
                    return why(format!(
                        "prints `{o}` whole if it is a blob, whatever the format"
                    ));
                }
            }
            None
        }
        "status" if has(items, "--verbose") => {
            why("with `-v` prints the staged changes' content".into())
        }
        "cat-file" => {
            if let Some(f) = ["--batch", "--batch-command"]
                .iter()
                .find(|f| has(items, f))
            {
                return why(format!(
                    "with `{f}` prints the content of the objects it is given"
                ));
            }
            if operands.first() == Some(&"blob") {
                return why("prints the blob it is given".into());
            }
            if has(items, "-p") {
                if let Some(o) = operands.iter().find(|o| may_name_blob(o)) {
                    return why(format!("-p prints `{o}` whole if it is a blob"));
                }
            }
            None
        }
        "grep" => {
            if has(items, "--cached") {
                return why("with `--cached` searches the index's blobs".into());
            }
            // git reads the first word as the pattern unless `-e`/`-f` gave one, then
            // revisions up to a `--` (one that is not an option's value), then paths.
            let values: Vec<*const u8> = opts(items)
                .flat_map(|f| f.values.iter().map(|v| v.as_ptr()))
                .collect();
            let index_of = |w: &str| args.iter().position(|a| std::ptr::eq(a.as_str(), w));
            let mut words = operands.iter().copied();
            let start = if has(items, "-e") || has(items, "-f") {
                0
            } else {
                match words.next() {
                    Some(p) => index_of(p).map_or(0, |i| i + 1),
                    None => return None,
                }
            };
            let dashdash = (start..args.len())
                .find(|&i| args[i] == "--" && !values.contains(&args[i].as_ptr()));
            let revision_place = |w: &str| {
                matches!((index_of(w), dashdash), (Some(i), Some(d)) if i < d) || dashdash.is_none()
            };
            if let Some(w) = words.find(|w| revision_place(w) && !only_a_path(w)) {
                return why(format!(
                    "searches the tree of `{w}` if it is a revision (put paths after `--`, or spell them `./{w}`)"
                ));
            }
            None
        }
        "branch" | "tag" => {
            let raw = opts(items)
                .filter(|f| named(f.opt, "--format"))
                .flat_map(|f| f.values.iter())
                .any(|v| v.contains("%(raw") || v.contains("%(*raw"));
            raw.then(|| {
                format!("`git {sub}` with `%(raw)` prints the objects the refs point at: {RISK}")
            })
        }
        _ => None,
    }
}

//! The option tables of the read-only programs, one [`Table`] each, for
//! [`super::options::parse`].
//!
//! Each table lists every option the program has — not only the safe ones — because a GNU
//! abbreviation is resolved against all of them: `sort --co` is `--compress-program` only
//! because no other option of sort starts with `co`. They were written from the programs' own
//! option arrays (`long_options[]` and the `getopt` strings of coreutils 9.1, grep 3.8,
//! diffutils 3.8; file 5.44, util-linux 2.38 `hexdump`, procps-ng 4.0 `ps`/`free`/`uptime`,
//! findutils 4.9, ripgrep's flag definitions, tree 2.x's argument loop, jq 1.6's `main.c`,
//! and git 2.47's `--git-completion-helper-all` and `-h` output). An option marked
//! [`Opt::not_read_only`] writes, runs another program or changes the system.
//!
//! `find` (single-dash predicates) is in [`FIND`]; `echo`, `printf`, `true` and `false` read
//! no options that matter and are handled in [`super::policy`].
//!
//! Split by command family, one file each: `files` (listing and inspecting files and path
//! names), `text` (text tools, `diff`, `jq`), `search` (`grep`, ripgrep), `system` (the user and
//! the system: `id`, `ps`, `date`, …), `git_history` (`git diff`, `log`, `shortlog`), `git_tree`
//! (`git status`, `ls-files`, `grep`, …), `git_refs` (`git rev-parse`, `branch`, `tag`, `config`,
//! …) and `find`. This file keeps what they share (`STD`, `DIGITS`, git's option style) and
//! [`ALL`], and re-exports every table.

mod files;
mod find;
mod git_history;
mod git_refs;
mod git_tree;
mod search;
mod system;
mod text;

pub use files::{
    BASENAME, CAT, DF, DIRNAME, DU, FILE, HEAD, LS, PWD, READLINK, REALPATH, STAT, TAIL,
    TREE_TABLE, WC,
};
pub use find::{find_primary, FindArgs, FindPrimary, FIND};
pub use git_history::{GIT_DIFF_TABLE, GIT_LOG, GIT_SHORTLOG};
pub use git_refs::{
    GIT_BRANCH, GIT_CONFIG, GIT_DESCRIBE, GIT_MERGE_BASE, GIT_REMOTE, GIT_REV_PARSE, GIT_TAG,
};
pub use git_tree::{GIT_BLAME, GIT_CAT_FILE, GIT_GREP, GIT_LS_FILES, GIT_LS_TREE, GIT_STATUS};
pub use search::{GREP, RG};
pub use system::{DATE, FREE, ID, NPROC, PRINTENV, PS, UNAME, UPTIME, WHICH, WHOAMI};
pub use text::{CMP, CUT, DIFF, DIGEST, HEXDUMP, JQ, OD, SORT, TR};

use super::options::{flag, Opt, Table, GNU};

/// `--help` and `--version` of every GNU program.
const STD: &[Opt] = &[flag("", &["help"]), flag("", &["version"])];

/// `0` … `9` as flags (`head -5`, `grep -3`, `git log -5`, `diff -3`).
const DIGITS: &[Opt] = &[flag("0123456789", &[])];

/// git's parse-options: unique abbreviations of long options, `--no-` forms listed.
const GIT_PO: super::options::Style = GNU;

/// Every table, for tests that walk all of them.
pub const ALL: &[&Table] = &[
    &LS,
    &PWD,
    &CAT,
    &HEAD,
    &TAIL,
    &WC,
    &WHICH,
    &WHOAMI,
    &ID,
    &UNAME,
    &DF,
    &DU,
    &FILE,
    &STAT,
    &TREE_TABLE,
    &PRINTENV,
    &BASENAME,
    &DIRNAME,
    &REALPATH,
    &READLINK,
    &CUT,
    &DIFF,
    &CMP,
    &DIGEST,
    &GREP,
    &RG,
    &PS,
    &NPROC,
    &FREE,
    &UPTIME,
    &DATE,
    &SORT,
    &TR,
    &OD,
    &HEXDUMP,
    &JQ,
    &GIT_STATUS,
    &GIT_DIFF_TABLE,
    &GIT_LOG,
    &GIT_BLAME,
    &GIT_REV_PARSE,
    &GIT_LS_FILES,
    &GIT_LS_TREE,
    &GIT_DESCRIBE,
    &GIT_SHORTLOG,
    &GIT_CAT_FILE,
    &GIT_GREP,
    &GIT_MERGE_BASE,
    &GIT_BRANCH,
    &GIT_TAG,
    &GIT_REMOTE,
];

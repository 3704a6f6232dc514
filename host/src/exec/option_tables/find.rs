//! `find`'s primaries (single-dash, matched in full, findutils 4.9): a list of their own, not a
//! [`Table`](crate::exec::options::Table).

/// How many words a `find` primary takes after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindArgs {
    /// None (`-print`, `-empty`, operators).
    Zero,
    /// One (`-name PATTERN`).
    One,
    /// Two (`-fprintf FILE FORMAT`).
    Two,
    /// Up to and including `;` or `+` (`-exec COMMAND ;`).
    Command,
}

/// A `find` primary (option, test, action or operator): name, words after it, safe.
pub type FindPrimary = (&'static str, FindArgs, bool);

/// findutils 4.9's primaries. find matches them in full (no abbreviations).
pub const FIND: &[FindPrimary] = &[
    // Operators.
    ("!", FindArgs::Zero, true),
    ("(", FindArgs::Zero, true),
    (")", FindArgs::Zero, true),
    (",", FindArgs::Zero, true),
    ("-not", FindArgs::Zero, true),
    ("-a", FindArgs::Zero, true),
    ("-and", FindArgs::Zero, true),
    ("-o", FindArgs::Zero, true),
    ("-or", FindArgs::Zero, true),
    // Positional and normal options.
    ("-daystart", FindArgs::Zero, true),
    ("-follow", FindArgs::Zero, true),
    ("-nowarn", FindArgs::Zero, true),
    ("-warn", FindArgs::Zero, true),
    ("-regextype", FindArgs::One, true),
    ("-depth", FindArgs::Zero, true),
    ("-d", FindArgs::Zero, true),
    ("-files0-from", FindArgs::One, true),
    ("-maxdepth", FindArgs::One, true),
    ("-mindepth", FindArgs::One, true),
    ("-mount", FindArgs::Zero, true),
    ("-xdev", FindArgs::Zero, true),
    ("-noleaf", FindArgs::Zero, true),
    ("-ignore_readdir_race", FindArgs::Zero, true),
    ("-noignore_readdir_race", FindArgs::Zero, true),
    ("-help", FindArgs::Zero, true),
    ("--help", FindArgs::Zero, true),
    ("-version", FindArgs::Zero, true),
    ("--version", FindArgs::Zero, true),
    // Tests.
    ("-amin", FindArgs::One, true),
    ("-anewer", FindArgs::One, true),
    ("-atime", FindArgs::One, true),
    ("-cmin", FindArgs::One, true),
    ("-cnewer", FindArgs::One, true),
    ("-context", FindArgs::One, true),
    ("-ctime", FindArgs::One, true),
    ("-empty", FindArgs::Zero, true),
    ("-executable", FindArgs::Zero, true),
    ("-false", FindArgs::Zero, true),
    ("-fstype", FindArgs::One, true),
    ("-gid", FindArgs::One, true),
    ("-group", FindArgs::One, true),
    ("-ilname", FindArgs::One, true),
    ("-iname", FindArgs::One, true),
    ("-inum", FindArgs::One, true),
    ("-ipath", FindArgs::One, true),
    ("-iregex", FindArgs::One, true),
    ("-iwholename", FindArgs::One, true),
    ("-links", FindArgs::One, true),
    ("-lname", FindArgs::One, true),
    ("-mmin", FindArgs::One, true),
    ("-mtime", FindArgs::One, true),
    ("-name", FindArgs::One, true),
    ("-newer", FindArgs::One, true),
    ("-nogroup", FindArgs::Zero, true),
    ("-nouser", FindArgs::Zero, true),
    ("-path", FindArgs::One, true),
    ("-perm", FindArgs::One, true),
    ("-readable", FindArgs::Zero, true),
    ("-regex", FindArgs::One, true),
    ("-samefile", FindArgs::One, true),
    ("-size", FindArgs::One, true),
    ("-true", FindArgs::Zero, true),
    ("-type", FindArgs::One, true),
    ("-uid", FindArgs::One, true),
    ("-used", FindArgs::One, true),
    ("-user", FindArgs::One, true),
    ("-wholename", FindArgs::One, true),
    ("-writable", FindArgs::Zero, true),
    ("-xtype", FindArgs::One, true),
    // Actions that only print.
    ("-print", FindArgs::Zero, true),
    ("-print0", FindArgs::Zero, true),
    ("-printf", FindArgs::One, true),
    ("-ls", FindArgs::Zero, true),
    ("-prune", FindArgs::Zero, true),
    ("-quit", FindArgs::Zero, true),
    // Actions that delete, write files or run programs.
    ("-delete", FindArgs::Zero, false),
    ("-fls", FindArgs::One, false),
    ("-fprint", FindArgs::One, false),
    ("-fprint0", FindArgs::One, false),
    ("-fprintf", FindArgs::Two, false),
    ("-exec", FindArgs::Command, false),
    ("-execdir", FindArgs::Command, false),
    ("-ok", FindArgs::Command, false),
    ("-okdir", FindArgs::Command, false),
];

/// The primary a find word names: the table's, or `-newerXY` (X in `aBcm`, Y in `aBcmt`).
pub fn find_primary(word: &str) -> Option<FindPrimary> {
    if let Some(p) = FIND.iter().find(|(n, _, _)| *n == word) {
        return Some(*p);
    }
    let xy = word.strip_prefix("-newer")?.as_bytes();
    (xy.len() == 2 && b"aBcm".contains(&xy[0]) && b"aBcmt".contains(&xy[1])).then_some((
        "-newerXY",
        FindArgs::One,
        true,
    ))
}

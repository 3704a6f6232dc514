//! Command-line options read the way the programs themselves read them.
//!
//! The shell's lists decide from argv alone, so they must see the options a program will act
//! on, not the spellings someone thought of: GNU `getopt_long` accepts any unambiguous
//! abbreviation of a long option (`--co` is `--compress-program` for `sort`), a value attached
//! or in the next word (`--output=x`, `--output x`, `-ox`, `-o x`), grouped short flags where a
//! value-taking letter swallows the rest of the group (`-nro.txt`), and options after operands.
//! A [`Table`] lists *every* option of a program (what it takes, whether it is safe for the
//! read-only class); [`parse`] reads argv with it. Anything the table does not know is an
//! error, and the callers treat an error as "not read-only" (it asks).
//!
//! The tables themselves are in [`super::option_tables`]; they were written from the programs'
//! own option arrays (coreutils 9.1, grep 3.8, diffutils 3.8, file 5.44, util-linux 2.38,
//! procps-ng 4.0, findutils 4.9, git 2.47, ripgrep 14, tree 2.x, jq 1.6).

/// Whether and how an option takes a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A flag: `-x`, `--name`; `--name=value` is an error.
    No,
    /// A value, attached or in the next word: `-xVALUE`, `-x VALUE`, `--name=VALUE`,
    /// `--name VALUE` (the next word is taken even when it starts with `-`).
    Required,
    /// An optional value, attached only: `-xVALUE`, `--name=VALUE`; `-x VALUE` is a flag and an
    /// operand.
    Optional,
    /// Two following words (`jq --arg NAME VALUE`), long options only.
    Two,
    /// tree's `-L`: the digits attached to it, or else the next word.
    DigitsOrNext,
}

/// One option: its short letters and long names (aliases of one option), what it takes, and
/// whether the read-only class may use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opt {
    /// Its short letters (`"qs"` when `-q` and `-s` are the same option); empty if none.
    pub shorts: &'static str,
    /// Its long names without dashes (`["quiet", "silent"]`); empty if none.
    pub longs: &'static [&'static str],
    /// What it takes.
    pub arg: Arg,
    /// Only displays or reads: allowed in a read-only command.
    pub safe: bool,
    /// Its value may name a file the program reads (the gate checks it like a path).
    pub path: bool,
}

/// A safe flag.
pub const fn flag(shorts: &'static str, longs: &'static [&'static str]) -> Opt {
    Opt {
        shorts,
        longs,
        arg: Arg::No,
        safe: true,
        path: false,
    }
}

/// A safe option with a required value.
pub const fn value(shorts: &'static str, longs: &'static [&'static str]) -> Opt {
    Opt {
        arg: Arg::Required,
        ..flag(shorts, longs)
    }
}

/// A safe option with an optional (attached) value.
pub const fn optional(shorts: &'static str, longs: &'static [&'static str]) -> Opt {
    Opt {
        arg: Arg::Optional,
        ..flag(shorts, longs)
    }
}

/// A safe option whose required value names a file the program reads.
pub const fn path(shorts: &'static str, longs: &'static [&'static str]) -> Opt {
    Opt {
        arg: Arg::Required,
        path: true,
        ..flag(shorts, longs)
    }
}

impl Opt {
    /// The same option, but it writes, runs a program or changes the system: a command using
    /// it is never read-only.
    pub const fn not_read_only(self) -> Opt {
        Opt {
            safe: false,
            ..self
        }
    }

    /// The same option, taking `arg`.
    pub const fn taking(self, arg: Arg) -> Opt {
        Opt { arg, ..self }
    }

    /// How it is usually spelled, for messages (`--output`, `-o`).
    pub fn spelling(&self) -> String {
        match (self.longs.first(), self.shorts.chars().next()) {
            (Some(l), _) => format!("--{l}"),
            (None, Some(c)) => format!("-{c}"),
            (None, None) => "?".into(),
        }
    }
}

/// How a program reads its command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    /// A unique prefix of a long option is that option (`getopt_long`, git's parse-options).
    pub abbrev: bool,
    /// Options may follow operands (GNU permutation); otherwise the first operand ends them
    /// (`getopt` with a leading `+`, POSIX `getopts`).
    pub permute: bool,
    /// tree's own loop: a value-taking short option takes the *next word* and the group goes
    /// on (`-oI a b` is `-o a -I b`); long options take `=value` or the next word.
    pub next_word_values: bool,
}

/// glibc `getopt_long`.
pub const GNU: Style = Style {
    abbrev: true,
    permute: true,
    next_word_values: false,
};
/// `getopt_long` with a leading `+` in its option string (the first operand ends options).
pub const GNU_POSIX: Style = Style {
    permute: false,
    ..GNU
};
/// Long options only in full (ripgrep's lexopt, procps `ps`, jq, git's revision options).
pub const EXACT: Style = Style {
    abbrev: false,
    ..GNU
};
/// POSIX `getopts` (the `which` script): short options only, the first operand ends them.
pub const GETOPTS: Style = Style {
    abbrev: false,
    permute: false,
    next_word_values: false,
};
/// tree's hand-written loop.
pub const TREE: Style = Style {
    abbrev: false,
    permute: true,
    next_word_values: true,
};

/// Every option of one program (or git subcommand), in groups that are searched in order.
#[derive(Debug)]
pub struct Table {
    /// The program (`sort`, `git grep`), for messages.
    pub program: &'static str,
    /// Its options. A short letter or long name found in an earlier group wins.
    pub opts: &'static [&'static [Opt]],
    /// How it reads them.
    pub style: Style,
}

/// Why argv does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// An option the table does not have.
    Unknown(String),
    /// A long-option abbreviation that fits more than one option.
    Ambiguous(String),
    /// An option without the value it needs.
    MissingValue(String),
    /// A value given to an option that takes none.
    UnexpectedValue(String),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Unknown(w) => write!(f, "unknown option {w}"),
            ParseError::Ambiguous(w) => write!(f, "ambiguous option {w}"),
            ParseError::MissingValue(w) => write!(f, "option {w} needs a value"),
            ParseError::UnexpectedValue(w) => write!(f, "option {w} takes no value"),
        }
    }
}

/// One option as found in argv.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found<'a> {
    /// The option it resolved to.
    pub opt: &'static Opt,
    /// The word it was spelled in (`-rnA3`, `--co=bash`).
    pub word: &'a str,
    /// Its values: attached, after `=`, or the following words.
    pub values: Vec<&'a str>,
    /// For a short option's attached value, where it starts in `word` (in bytes).
    pub attached_at: Option<usize>,
}

/// One argument as the program reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// An option, with its values.
    Opt(Found<'a>),
    /// An operand (a file, a pattern, a revision, ...).
    Operand(&'a str),
}

impl Table {
    /// Every option, in search order.
    pub fn all(&self) -> impl Iterator<Item = &'static Opt> + '_ {
        self.opts.iter().flat_map(|g| g.iter())
    }

    /// The option a short letter names.
    pub fn short(&self, c: char) -> Option<&'static Opt> {
        self.all().find(|o| o.shorts.contains(c))
    }

    /// The option a long name (without dashes, without `=value`) resolves to: the option of
    /// that exact name, or (when the style allows abbreviations) the one option whose names
    /// start with it. Aliases of one option are one option, as for glibc.
    pub fn long(&self, name: &str) -> Result<&'static Opt, ParseError> {
        if name.is_empty() {
            return Err(ParseError::Unknown("--".into()));
        }
        if let Some(o) = self.all().find(|o| o.longs.contains(&name)) {
            return Ok(o);
        }
        if !self.style.abbrev {
            return Err(ParseError::Unknown(format!("--{name}")));
        }
        let mut found: Option<&'static Opt> = None;
        for o in self.all() {
            if o.longs.iter().any(|l| l.starts_with(name)) {
                match found {
                    Some(f) if f != o => return Err(ParseError::Ambiguous(format!("--{name}"))),
                    _ => found = Some(o),
                }
            }
        }
        found.ok_or_else(|| ParseError::Unknown(format!("--{name}")))
    }
}

/// Read `args` (argv without the program) as the program would.
pub fn parse<'a>(table: &Table, args: &'a [String]) -> Result<Vec<Item<'a>>, ParseError> {
    let style = table.style;
    let mut items = Vec::new();
    let mut only_operands = false;
    let mut i = 0;
    // The next word as a value, consumed.
    let next = |i: &mut usize, what: &str| -> Result<&'a str, ParseError> {
        let w = args
            .get(*i)
            .ok_or_else(|| ParseError::MissingValue(what.to_string()))?;
        *i += 1;
        Ok(w.as_str())
    };
    while let Some(word) = args.get(i) {
        let word = word.as_str();
        i += 1;
        if only_operands || word == "-" || !word.starts_with('-') {
            items.push(Item::Operand(word));
            if !style.permute {
                only_operands = true;
            }
            continue;
        }
        if word == "--" {
            only_operands = true;
            continue;
        }
        if let Some(body) = word.strip_prefix("--") {
            let (name, attached) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let opt = table.long(name)?;
            let values = match (opt.arg, attached) {
                (Arg::No, Some(_)) => return Err(ParseError::UnexpectedValue(word.into())),
                (Arg::No, None) | (Arg::Optional, None) => vec![],
                (Arg::Two, Some(_)) => return Err(ParseError::Unknown(word.into())),
                (Arg::Two, None) => vec![next(&mut i, word)?, next(&mut i, word)?],
                (_, Some(v)) => vec![v],
                (Arg::Required | Arg::DigitsOrNext, None) => vec![next(&mut i, word)?],
            };
            items.push(Item::Opt(Found {
                opt,
                word,
                values,
                attached_at: None,
            }));
            continue;
        }
        // A group of short options.
        let group = &word[1..];
        let mut chars = group.char_indices();
        while let Some((at, c)) = chars.next() {
            let opt = table
                .short(c)
                .ok_or_else(|| ParseError::Unknown(format!("-{c} (in {word})")))?;
            let rest_at = 1 + at + c.len_utf8();
            let rest = &word[rest_at..];
            let mut found = Found {
                opt,
                word,
                values: vec![],
                attached_at: None,
            };
            let mut ends_group = false;
            match opt.arg {
                Arg::No => {}
                Arg::Two => return Err(ParseError::Unknown(format!("-{c}"))),
                Arg::DigitsOrNext => {
                    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                    if digits > 0 {
                        found.values.push(&rest[..digits]);
                        found.attached_at = Some(rest_at);
                        // Skip the digits; the group goes on after them.
                        for _ in 0..digits {
                            chars.next();
                        }
                    } else {
                        found.values.push(next(&mut i, word)?);
                    }
                }
                Arg::Required if style.next_word_values => {
                    found.values.push(next(&mut i, word)?);
                }
                Arg::Required => {
                    if rest.is_empty() {
                        found.values.push(next(&mut i, word)?);
                    } else {
                        found.values.push(rest);
                        found.attached_at = Some(rest_at);
                    }
                    ends_group = true;
                }
                Arg::Optional => {
                    if !rest.is_empty() {
                        found.values.push(rest);
                        found.attached_at = Some(rest_at);
                    }
                    ends_group = true;
                }
            }
            items.push(Item::Opt(found));
            if ends_group {
                break;
            }
        }
    }
    Ok(items)
}

/// Whether a listed option spelling (`--set`, `-s`) is among the options found.
pub fn has(items: &[Item<'_>], listed: &str) -> bool {
    let opts = items.iter().filter_map(|i| match i {
        Item::Opt(f) => Some(f.opt),
        Item::Operand(_) => None,
    });
    if let Some(long) = listed.strip_prefix("--") {
        return opts.into_iter().any(|o| o.longs.contains(&long));
    }
    if let Some(short) = listed.strip_prefix('-') {
        let mut cs = short.chars();
        if let (Some(c), None) = (cs.next(), cs.next()) {
            return opts.into_iter().any(|o| o.shorts.contains(c));
        }
        return false;
    }
    items
        .iter()
        .any(|i| matches!(i, Item::Operand(w) if *w == listed))
}

/// Whether `arg` could be the listed option `listed` for a program without a table, erring
/// strict: a long option counts when it is any prefix of the listed name (GNU would take an
/// unambiguous one), with or without `=value`; a listed short letter counts anywhere in a
/// group of short options, attached values included (`-s2030` has `-s`); a single-dash long
/// option (`-exec`, Go's flags) counts as `-name`, `--name` and either with `=value`; a listed
/// word without a dash counts when it is the argument.
pub fn loose_hit(arg: &str, listed: &str) -> bool {
    if !listed.starts_with('-') || listed == "--" {
        return arg == listed;
    }
    if let Some(name) = listed.strip_prefix("--") {
        return arg.strip_prefix("--").is_some_and(|w| {
            let w = w.split_once('=').map_or(w, |(n, _)| n);
            !w.is_empty() && name.starts_with(w)
        });
    }
    let name = &listed[1..];
    let mut cs = name.chars();
    if let (Some(c), None) = (cs.next(), cs.next()) {
        return arg
            .strip_prefix('-')
            .is_some_and(|g| !g.is_empty() && !g.starts_with('-') && g.contains(c));
    }
    let body = arg
        .strip_prefix("--")
        .or_else(|| arg.strip_prefix('-'))
        .unwrap_or("");
    body.split_once('=').map_or(body, |(n, _)| n) == name
}

#[cfg(test)]
#[path = "options_tests.rs"]
mod tests;

//! The user and the system: `which`, `whoami`, `id`, `uname`, `printenv`, `ps`, `nproc`, `free`,
//! `uptime`, `date`.

use super::STD;
use crate::exec::options::{flag, optional, path, value, Table, EXACT, GETOPTS, GNU, GNU_POSIX};

/// debianutils `which` is a shell script using `getopts a`.
pub const WHICH: Table = Table {
    program: "which",
    style: GETOPTS,
    opts: &[&[flag("a", &[])]],
};

pub const WHOAMI: Table = Table {
    program: "whoami",
    style: GNU,
    opts: &[STD],
};

pub const ID: Table = Table {
    program: "id",
    style: GNU,
    opts: &[
        &[
            flag("a", &[]),
            flag("Z", &["context"]),
            flag("g", &["group"]),
            flag("G", &["groups"]),
            flag("n", &["name"]),
            flag("r", &["real"]),
            flag("u", &["user"]),
            flag("z", &["zero"]),
        ],
        STD,
    ],
};

pub const UNAME: Table = Table {
    program: "uname",
    style: GNU,
    opts: &[
        &[
            flag("a", &["all"]),
            flag("s", &["kernel-name", "sysname"]),
            flag("n", &["nodename"]),
            flag("r", &["kernel-release", "release"]),
            flag("v", &["kernel-version"]),
            flag("m", &["machine"]),
            flag("p", &["processor"]),
            flag("i", &["hardware-platform"]),
            flag("o", &["operating-system"]),
        ],
        STD,
    ],
};

pub const PRINTENV: Table = Table {
    program: "printenv",
    style: GNU_POSIX,
    opts: &[&[flag("0", &["null"])], STD],
};

/// procps `ps`: UNIX (`-ef`), BSD (`aux`, operands) and GNU long options (in full).
pub const PS: Table = Table {
    program: "ps",
    style: EXACT,
    opts: &[&[
        flag("Ae", &[]),
        flag("a", &[]),
        flag("d", &[]),
        flag("N", &["deselect"]),
        value("C", &[]),
        value("G", &["Group"]),
        value("g", &["group"]),
        value("p", &["pid"]),
        value("", &["ppid"]),
        value("q", &["quick-pid"]),
        value("s", &["sid"]),
        value("t", &["tty"]),
        value("u", &["user"]),
        value("U", &["User"]),
        flag("F", &[]),
        flag("f", &[]),
        flag("", &["forest"]),
        flag("H", &[]),
        flag("j", &[]),
        flag("l", &[]),
        flag("M", &[]),
        value("O", &[]),
        value("o", &["format"]),
        flag("P", &[]),
        flag("y", &[]),
        flag("", &["context"]),
        flag("", &["headers"]),
        flag("", &["no-headers"]),
        value("", &["cols", "columns", "width"]),
        value("", &["rows", "lines"]),
        flag("L", &[]),
        flag("m", &[]),
        flag("T", &[]),
        flag("c", &[]),
        value("", &["sort"]),
        flag("", &["cumulative"]),
        flag("V", &["version"]),
        flag("w", &[]),
        flag("", &["help"]),
        flag("", &["info"]),
    ]],
};

pub const NPROC: Table = Table {
    program: "nproc",
    style: GNU,
    opts: &[&[flag("", &["all"]), value("", &["ignore"])], STD],
};

pub const FREE: Table = Table {
    program: "free",
    style: GNU,
    opts: &[&[
        flag("b", &["bytes"]),
        flag("", &["kilo"]),
        flag("", &["mega"]),
        flag("", &["giga"]),
        flag("", &["tera"]),
        flag("", &["peta"]),
        flag("k", &["kibi"]),
        flag("m", &["mebi"]),
        flag("g", &["gibi"]),
        flag("", &["tebi"]),
        flag("", &["pebi"]),
        flag("h", &["human"]),
        flag("", &["si"]),
        flag("l", &["lohi"]),
        flag("t", &["total"]),
        flag("v", &["committed"]),
        value("s", &["seconds"]),
        value("c", &["count"]),
        flag("w", &["wide"]),
        flag("", &["help"]),
        flag("V", &["version"]),
    ]],
};

pub const UPTIME: Table = Table {
    program: "uptime",
    style: GNU,
    opts: &[&[
        flag("p", &["pretty"]),
        flag("h", &["help"]),
        flag("s", &["since"]),
        flag("V", &["version"]),
    ]],
};

pub const DATE: Table = Table {
    program: "date",
    style: GNU,
    opts: &[
        &[
            value("d", &["date"]),
            flag("", &["debug"]),
            path("f", &["file"]),
            optional("I", &["iso-8601"]),
            path("r", &["reference"]),
            flag("", &["resolution"]),
            flag("R", &["rfc-email", "rfc-822", "rfc-2822"]),
            value("", &["rfc-3339"]),
            // Sets the system clock.
            value("s", &["set"]).not_read_only(),
            flag("u", &["utc", "uct", "universal"]),
        ],
        STD,
    ],
};

//! The shell's lists by name, for lookups and for what the model is told: the read-only
//! programs with an option table ([`table`], [`git_table`]), and the names the shell refuses
//! whatever the mode ([`banned_programs`]). The tables themselves are in
//! [`super::option_tables`]; what a command may do is decided in [`super::policy`] and enforced
//! by the confinement, never by these names alone.

use super::option_tables::*;
use super::options::Table;

/// The table of a read-only program, by name.
pub fn table(program: &str) -> Option<&'static Table> {
    PROGRAMS
        .iter()
        .find(|(names, _)| names.contains(&program))
        .map(|(_, t)| *t)
}

/// The read-only programs with a table: their names (several for one table) and the table.
pub const PROGRAMS: &[(&[&str], &Table)] = &[
    (&["ls"], &LS),
    (&["pwd"], &PWD),
    (&["cat"], &CAT),
    (&["head"], &HEAD),
    (&["tail"], &TAIL),
    (&["wc"], &WC),
    (&["which"], &WHICH),
    (&["whoami"], &WHOAMI),
    (&["id"], &ID),
    (&["uname"], &UNAME),
    (&["df"], &DF),
    (&["du"], &DU),
    (&["file"], &FILE),
    (&["stat"], &STAT),
    (&["tree"], &TREE_TABLE),
    (&["printenv"], &PRINTENV),
    (&["basename"], &BASENAME),
    (&["dirname"], &DIRNAME),
    (&["realpath"], &REALPATH),
    (&["readlink"], &READLINK),
    (&["cut"], &CUT),
    (&["diff"], &DIFF),
    (&["cmp"], &CMP),
    (
        &[
            "md5sum",
            "sha1sum",
            "sha224sum",
            "sha256sum",
            "sha384sum",
            "sha512sum",
        ],
        &DIGEST,
    ),
    (&["grep", "egrep", "fgrep"], &GREP),
    (&["rg"], &RG),
    (&["ps"], &PS),
    (&["nproc"], &NPROC),
    (&["free"], &FREE),
    (&["uptime"], &UPTIME),
    (&["date"], &DATE),
    (&["sort"], &SORT),
    (&["tr"], &TR),
    (&["od"], &OD),
    (&["hexdump"], &HEXDUMP),
    (&["jq"], &JQ),
];

/// The table of a git subcommand that can be read-only, by name.
pub fn git_table(sub: &str) -> Option<&'static Table> {
    GIT_PROGRAMS
        .iter()
        .find(|(names, _)| names.contains(&sub))
        .map(|(_, t)| *t)
}

/// The git subcommands that can be read-only, and their tables.
pub const GIT_PROGRAMS: &[(&[&str], &Table)] = &[
    (&["status"], &GIT_STATUS),
    (&["diff"], &GIT_DIFF_TABLE),
    (&["log", "show", "rev-list"], &GIT_LOG),
    (&["blame"], &GIT_BLAME),
    (&["rev-parse"], &GIT_REV_PARSE),
    (&["ls-files"], &GIT_LS_FILES),
    (&["ls-tree"], &GIT_LS_TREE),
    (&["describe"], &GIT_DESCRIBE),
    (&["shortlog"], &GIT_SHORTLOG),
    (&["cat-file"], &GIT_CAT_FILE),
    (&["grep"], &GIT_GREP),
    (&["merge-base"], &GIT_MERGE_BASE),
    (&["branch"], &GIT_BRANCH),
    (&["tag"], &GIT_TAG),
    (&["remote"], &GIT_REMOTE),
];

/// Programs that run without asking when every option given is a read-only one (each checked
/// against its table; `echo`, `printf`, `true`, `false` print, `find` without its actions that
/// write or run programs, `git` with a read-only subcommand).
pub fn read_only_programs() -> Vec<&'static str> {
    let mut names: Vec<&str> = PROGRAMS
        .iter()
        .flat_map(|(n, _)| n.iter().copied())
        .collect();
    names.extend(["echo", "printf", "true", "false", "find", "git"]);
    names.sort_unstable();
    names
}

/// The git subcommands that can be read-only.
pub fn git_read_only_subcommands() -> Vec<&'static str> {
    GIT_PROGRAMS
        .iter()
        .flat_map(|(n, _)| n.iter().copied())
        .collect()
}

/// The programs the shell refuses in every mode, built in (the policy's `[shell] banned` adds
/// to them).
pub fn banned_programs() -> Vec<&'static str> {
    BANNED.iter().map(|(name, _)| *name).collect()
}

/// Programs denied in every mode, with why.
pub const BANNED: &[(&str, &str)] = &[
    ("curl", "a network downloader (use the fetch tool)"),
    ("wget", "a network downloader (use the fetch tool)"),
    ("aria2c", "a network downloader (use the fetch tool)"),
    ("axel", "a network downloader (use the fetch tool)"),
    ("http", "a network client (use the fetch tool)"),
    ("https", "a network client (use the fetch tool)"),
    ("httpie", "a network client (use the fetch tool)"),
    ("xh", "a network client (use the fetch tool)"),
    ("lynx", "a browser"),
    ("w3m", "a browser"),
    ("links", "a browser"),
    ("elinks", "a browser"),
    ("chrome", "a browser"),
    ("chromium", "a browser"),
    ("firefox", "a browser"),
    ("ssh", "a remote shell"),
    ("scp", "a remote copy"),
    ("sftp", "a remote copy"),
    ("rsync", "a remote copy"),
    ("nc", "a raw network tool"),
    ("ncat", "a raw network tool"),
    ("netcat", "a raw network tool"),
    ("socat", "a raw network tool"),
    ("telnet", "a remote shell"),
    ("ftp", "a remote copy"),
    ("sudo", "privilege escalation"),
    ("su", "privilege escalation"),
    ("doas", "privilege escalation"),
    ("pkexec", "privilege escalation"),
    ("runuser", "privilege escalation"),
    ("systemctl", "a system change"),
    ("service", "a system change"),
    ("mount", "a system change"),
    ("umount", "a system change"),
    ("fdisk", "a system change"),
    ("parted", "a system change"),
    ("crontab", "a system change"),
    ("iptables", "a system change"),
    ("ip6tables", "a system change"),
    ("nft", "a system change"),
    ("shutdown", "a system change"),
    ("reboot", "a system change"),
    ("halt", "a system change"),
    ("poweroff", "a system change"),
    ("insmod", "a system change"),
    ("rmmod", "a system change"),
    ("modprobe", "a system change"),
    ("useradd", "a system change"),
    ("userdel", "a system change"),
    ("usermod", "a system change"),
    ("passwd", "a system change"),
    ("visudo", "a system change"),
    ("timedatectl", "a system change"),
    ("hwclock", "a system change"),
    ("sysctl", "a system change"),
    ("chroot", "a system change"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_program_has_its_table() {
        for name in read_only_programs() {
            let special = ["echo", "printf", "true", "false", "find", "git"];
            assert!(special.contains(&name) || table(name).is_some(), "{name}");
        }
        for sub in git_read_only_subcommands() {
            assert!(git_table(sub).is_some(), "{sub}");
        }
        assert!(table("rm").is_none() && git_table("push").is_none());
        assert!(banned_programs().contains(&"curl"));
        assert!(!read_only_programs()
            .iter()
            .any(|p| banned_programs().contains(p)));
    }
}

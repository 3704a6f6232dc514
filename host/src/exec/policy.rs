//! The shell's lists (SPEC §6), all argv-aware:
//!
//! - **banned**: denied in every mode, `allow-all` included, whatever a grant says — network
//!   downloaders and remote shells, privilege escalation, global package installs, system
//!   changes, loader-injection variables, and argument combinations such as `go test -exec`;
//! - **exact-text** (wrappers and options that run another program): never keyed on the program
//!   name, always on the whole text — `env`, `nohup`, `timeout`, `xargs`, `sh -c`, `find -exec`,
//!   `git -c`, `git diff --textconv`, `rg --pre`, …;
//! - **dangerous**: always asked, even under a broader session grant for the program —
//!   `git push`, `git reset --hard`, `rm -r`, `kill`, …;
//! - **read-only**: run without a prompt in `ask` mode — `ls`, `cat`, `git status`, … unless an
//!   option makes them write or run something (`find -delete`, `sort -o`, `git log --output`).
//!
//! A policy may only make these stricter (`[shell] banned = [...]` adds programs).

/// What the lists say about one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Class {
    /// Denied in every mode.
    Banned(String),
    /// Runs without a prompt in `ask` mode.
    ReadOnly,
    /// Always asks (unless a grant names exactly this command).
    Dangerous(String),
    /// The ladder decides as for any exec call.
    Normal,
}

/// Programs that run another command given as arguments: never keyed on their own name.
pub const WRAPPERS: &[&str] = &[
    "env",
    "nohup",
    "timeout",
    "xargs",
    "sudo",
    "doas",
    "su",
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "csh",
    "tcsh",
    "eval",
    "exec",
    "command",
    "builtin",
    "nice",
    "ionice",
    "stdbuf",
    "setsid",
    "chroot",
    "strace",
    "ltrace",
    "time",
    "watch",
    "script",
    "busybox",
    "unshare",
    "nsenter",
    "flock",
    "parallel",
    "chrt",
    "taskset",
    "systemd-run",
    "runuser",
    "sg",
    "newgrp",
    "firejail",
    "expect",
    "caffeinate",
    "unbuffer",
    "proxychains",
    "torsocks",
];

/// Programs denied in every mode, with why.
const BANNED: &[(&str, &str)] = &[
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

/// Program + argument combinations denied in every mode: (program, subcommand or `None`,
/// options any of which bans it, or none for "the subcommand alone", why).
const BANNED_ARGS: &[(&str, Option<&str>, &[&str], &str)] = &[
    (
        "go",
        Some("test"),
        &["-exec", "-toolexec"],
        "runs an arbitrary program through the test",
    ),
    (
        "go",
        Some("run"),
        &["-exec", "-toolexec"],
        "runs an arbitrary program",
    ),
    (
        "go",
        Some("build"),
        &["-toolexec"],
        "runs an arbitrary program",
    ),
    ("go", Some("install"), &[], "a global package install"),
    ("go", Some("get"), &[], "a global package install"),
    ("cargo", Some("install"), &[], "a global package install"),
    (
        "npm",
        Some("install"),
        &["-g", "--global"],
        "a global package install",
    ),
    (
        "npm",
        Some("i"),
        &["-g", "--global"],
        "a global package install",
    ),
    (
        "npm",
        Some("uninstall"),
        &["-g", "--global"],
        "a global package change",
    ),
    (
        "pnpm",
        Some("add"),
        &["-g", "--global"],
        "a global package install",
    ),
    ("yarn", Some("global"), &[], "a global package install"),
    (
        "pip",
        Some("install"),
        &["--user", "--break-system-packages"],
        "a global package install",
    ),
    (
        "pip3",
        Some("install"),
        &["--user", "--break-system-packages"],
        "a global package install",
    ),
    ("gem", Some("install"), &[], "a global package install"),
    ("brew", Some("install"), &[], "a global package install"),
    ("brew", Some("uninstall"), &[], "a global package change"),
    ("brew", Some("upgrade"), &[], "a global package change"),
    ("apt", Some("install"), &[], "a system package install"),
    ("apt", Some("remove"), &[], "a system package change"),
    ("apt", Some("purge"), &[], "a system package change"),
    ("apt", Some("upgrade"), &[], "a system package change"),
    ("apt-get", Some("install"), &[], "a system package install"),
    ("apt-get", Some("remove"), &[], "a system package change"),
    ("apt-get", Some("purge"), &[], "a system package change"),
    ("apt-get", Some("upgrade"), &[], "a system package change"),
    (
        "apt-get",
        Some("dist-upgrade"),
        &[],
        "a system package change",
    ),
    ("dnf", Some("install"), &[], "a system package install"),
    ("yum", Some("install"), &[], "a system package install"),
    (
        "pacman",
        None,
        &["-S", "-Syu", "-R", "-U"],
        "a system package change",
    ),
    ("apk", Some("add"), &[], "a system package install"),
    ("zypper", Some("install"), &[], "a system package install"),
    (
        "git",
        Some("config"),
        &["--global", "--system"],
        "changes configuration outside the workspace",
    ),
    ("date", None, &["-s", "--set"], "changes the system clock"),
];

/// Options that make a command run another program (or write somewhere unexpected): the command
/// is keyed on its whole text. (program, subcommand or `None`, options.)
const EXACT_TEXT_ARGS: &[(&str, Option<&str>, &[&str])] = &[
    (
        "find",
        None,
        &[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
            "-fls",
        ],
    ),
    ("rg", None, &["--pre"]),
    (
        "git",
        None,
        &[
            "-c",
            "--config-env",
            "--exec-path",
            "--git-dir",
            "--work-tree",
            "--textconv",
            "--ext-diff",
            "--upload-pack",
            "--receive-pack",
            "--exec",
            "--extcmd",
            "-x",
        ],
    ),
    ("git", Some("difftool"), &[]),
    ("git", Some("mergetool"), &[]),
    ("git", Some("bisect"), &["run"]),
    ("sort", None, &["--compress-program"]),
    (
        "tar",
        None,
        &[
            "--to-command",
            "--use-compress-program",
            "-I",
            "--checkpoint-action",
            "--info-script",
            "-F",
            "--rsh-command",
        ],
    ),
    ("zip", None, &["-TT", "--unzip-command"]),
];

/// Dangerous forms: (program, subcommand or `None`, options any of which makes it dangerous —
/// empty: the subcommand alone, why).
const DANGEROUS: &[(&str, Option<&str>, &[&str], &str)] = &[
    ("git", Some("push"), &[], "publishes commits"),
    (
        "git",
        Some("reset"),
        &["--hard", "--merge", "--keep"],
        "discards work",
    ),
    ("git", Some("clean"), &[], "deletes untracked files"),
    (
        "git",
        Some("checkout"),
        &["-f", "--force", "--", "."],
        "discards work",
    ),
    ("git", Some("restore"), &[], "discards work"),
    (
        "git",
        Some("branch"),
        &["-D", "-d", "--delete", "-f", "--force"],
        "deletes branches",
    ),
    ("git", Some("stash"), &["drop", "clear"], "discards stashes"),
    ("git", Some("rebase"), &[], "rewrites history"),
    ("git", Some("filter-branch"), &[], "rewrites history"),
    ("git", Some("update-ref"), &[], "rewrites refs"),
    (
        "git",
        Some("reflog"),
        &["expire", "delete"],
        "discards history",
    ),
    ("git", Some("commit"), &["--amend"], "rewrites history"),
    (
        "rm",
        None,
        &["-r", "-R", "--recursive", "-f", "--force"],
        "deletes recursively or by force",
    ),
    ("find", None, &["-delete"], "deletes files"),
    (
        "chmod",
        None,
        &["-R", "--recursive"],
        "changes permissions recursively",
    ),
    (
        "chown",
        None,
        &["-R", "--recursive"],
        "changes ownership recursively",
    ),
    ("kill", None, &[], "signals host processes"),
    ("pkill", None, &[], "signals host processes"),
    ("killall", None, &[], "signals host processes"),
    ("dd", None, &[], "writes raw data"),
    ("shred", None, &[], "destroys files"),
    ("truncate", None, &[], "destroys file contents"),
    ("docker", None, &[], "controls containers on the host"),
    ("podman", None, &[], "controls containers on the host"),
];

/// Read-only programs (any arguments, minus the options listed that write or execute).
const READ_ONLY: &[(&str, &[&str])] = &[
    ("ls", &[]),
    ("pwd", &[]),
    ("cat", &[]),
    ("head", &[]),
    ("tail", &[]),
    ("wc", &[]),
    ("echo", &[]),
    ("printf", &["-v"]),
    ("which", &[]),
    ("whoami", &[]),
    ("id", &[]),
    ("uname", &[]),
    ("df", &[]),
    ("du", &[]),
    ("file", &["-C", "--compile"]),
    ("stat", &[]),
    ("tree", &["-o"]),
    ("printenv", &[]),
    ("basename", &[]),
    ("dirname", &[]),
    ("realpath", &[]),
    ("readlink", &[]),
    ("cut", &[]),
    ("diff", &[]),
    ("cmp", &[]),
    ("md5sum", &[]),
    ("sha1sum", &[]),
    ("sha256sum", &[]),
    ("sha512sum", &[]),
    ("grep", &[]),
    ("egrep", &[]),
    ("fgrep", &[]),
    ("rg", &["--pre"]),
    ("ps", &[]),
    ("true", &[]),
    ("false", &[]),
    ("nproc", &[]),
    ("free", &[]),
    ("uptime", &[]),
    ("date", &["-s", "--set"]),
    ("sort", &["-o", "--output", "--compress-program"]),
    (
        "find",
        &[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
            "-fls",
        ],
    ),
    ("tr", &[]),
    ("od", &[]),
    ("hexdump", &[]),
    ("jq", &[]),
];

/// git subcommands that only read (with the options that would make them write or execute).
const GIT_READ_ONLY: &[&str] = &[
    "status",
    "diff",
    "log",
    "show",
    "blame",
    "rev-parse",
    "ls-files",
    "ls-tree",
    "describe",
    "shortlog",
    "cat-file",
    "grep",
    "rev-list",
    "merge-base",
];

/// Options that make a read-only git subcommand write or run something.
const GIT_NOT_READ_ONLY_OPTS: &[&str] = &[
    "--output",
    "-o",
    "--textconv",
    "--ext-diff",
    "-O",
    "--open-files-in-pager",
];

/// Whether `arg` is the option `opt` (`--opt`, `--opt=value`, or a short flag `-x` possibly
/// combined with others like `-rf`).
pub fn has_opt(arg: &str, opt: &str) -> bool {
    if arg == opt {
        return true;
    }
    if opt.starts_with("--") || opt.len() > 2 {
        return arg
            .strip_prefix(opt)
            .is_some_and(|rest| rest.starts_with('='));
    }
    // `-x` inside a group of short flags (`-rf`), not for long single-dash options (`-exec`).
    if opt.len() == 2 && opt.starts_with('-') && !opt.starts_with("--") {
        if let Some(group) = arg.strip_prefix('-') {
            if !group.starts_with('-')
                && group.len() > 1
                && group.len() <= 4
                && group.chars().all(|c| c.is_ascii_alphabetic())
            {
                return group.contains(&opt[1..]);
            }
        }
    }
    false
}

/// The basename of a program word (`/usr/bin/curl` → `curl`).
pub fn program_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The subcommand of `argv`: the first argument that is not an option (skipping the value of
/// git's `-C`).
fn subcommand(argv: &[String]) -> Option<&str> {
    let mut i = 1;
    while let Some(a) = argv.get(i) {
        if a == "-C" && program_name(&argv[0]) == "git" {
            i += 2;
            continue;
        }
        if !a.starts_with('-') {
            return Some(a);
        }
        i += 1;
    }
    None
}

fn table_hit(argv: &[String], program: &str, sub: Option<&str>, opts: &[&str]) -> bool {
    if program_name(&argv[0]) != program {
        return false;
    }
    if let Some(s) = sub {
        if subcommand(argv) != Some(s) {
            return false;
        }
    }
    if opts.is_empty() {
        return true;
    }
    argv[1..].iter().any(|a| {
        opts.iter()
            .any(|o| has_opt(a, o) || (!o.starts_with('-') && a == o))
    })
}

/// Whether a word assigns a loader-injection variable (`LD_PRELOAD=x.so`, `DYLD_…=`).
fn injects_loader(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.starts_with("LD_") || name.starts_with("DYLD_") || name == "BASH_ENV"
    })
}

/// Why `argv` (one command, program first) is banned, if it is. `extra` are programs the
/// policy bans on top of the built-in list. Wrappers are looked through: every word that
/// could be a program (a non-option after a wrapper) is checked too.
pub fn banned(argv: &[String], extra: &[String]) -> Option<String> {
    if argv.is_empty() {
        return None;
    }
    if let Some(w) = argv.iter().find(|w| injects_loader(w)) {
        return Some(format!("`{w}` injects code into the programs it runs"));
    }
    // Look through wrappers: `env curl x`, `nohup timeout 5 wget y`, `xargs ssh`.
    let mut start = 0;
    loop {
        let cmd = &argv[start..];
        let name = program_name(&cmd[0]);
        if let Some((_, why)) = BANNED.iter().find(|(p, _)| *p == name) {
            return Some(format!("`{name}` is banned: {why}"));
        }
        if extra.iter().any(|p| p == name) {
            return Some(format!("`{name}` is banned by the policy ([shell] banned)"));
        }
        for (p, sub, opts, why) in BANNED_ARGS {
            if table_hit(cmd, p, *sub, opts) {
                let what = match sub {
                    Some(s) => format!("`{p} {s}`"),
                    None => format!("`{p}`"),
                };
                let with = if opts.is_empty() {
                    String::new()
                } else {
                    format!(" with {}", opts.join(" / "))
                };
                return Some(format!("{what}{with} is banned: {why}"));
            }
        }
        if !WRAPPERS.contains(&name) {
            return None;
        }
        // The wrapped program: the next word that is not an option, an assignment or a number.
        let next = cmd[1..].iter().position(|w| {
            !w.starts_with('-')
                && !w.contains('=')
                && !w
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == 's' || c == 'm')
        });
        match next {
            Some(i) => start += i + 1,
            None => return None,
        }
    }
}

/// Why a simple command is keyed on its whole text instead of its program, if it is.
pub fn exact_text(argv: &[String]) -> Option<String> {
    let name = program_name(&argv[0]);
    if WRAPPERS.contains(&name) {
        return Some(format!("`{name}` runs another command"));
    }
    for (p, sub, opts) in EXACT_TEXT_ARGS {
        if table_hit(argv, p, *sub, opts) {
            return Some(format!(
                "`{p}` with these options runs or changes more than itself"
            ));
        }
    }
    None
}

/// Why a command is dangerous (always asks), if it is.
pub fn dangerous(argv: &[String]) -> Option<String> {
    for (p, sub, opts, why) in DANGEROUS {
        if table_hit(argv, p, *sub, opts) {
            let what = match sub {
                Some(s) => format!("{p} {s}"),
                None => p.to_string(),
            };
            return Some(format!("`{what}` {why}"));
        }
    }
    None
}

/// Whether a simple command only reads.
pub fn read_only(argv: &[String]) -> bool {
    let name = argv[0].as_str();
    if name == "git" {
        let Some(sub) = subcommand(argv) else {
            return false;
        };
        if subcommand_index(argv) != 1 {
            // Global options before the subcommand (`-C dir`, `-p`, ...) are not read-only.
            return false;
        }
        let args = &argv[subcommand_index(argv) + 1..];
        let opts_ok = !args
            .iter()
            .any(|a| GIT_NOT_READ_ONLY_OPTS.iter().any(|o| has_opt(a, o)));
        return opts_ok
            && match sub {
                s if GIT_READ_ONLY.contains(&s) => true,
                "branch" => args.iter().all(|a| {
                    [
                        "-a",
                        "-r",
                        "-v",
                        "-vv",
                        "--list",
                        "-l",
                        "--show-current",
                        "--all",
                        "--remotes",
                    ]
                    .contains(&a.as_str())
                }),
                "tag" => args.iter().all(|a| a == "-l" || a == "--list"),
                "remote" => args.iter().all(|a| a == "-v"),
                _ => false,
            };
    }
    READ_ONLY
        .iter()
        .any(|(p, bad)| *p == name && !argv[1..].iter().any(|a| bad.iter().any(|o| has_opt(a, o))))
}

fn subcommand_index(argv: &[String]) -> usize {
    let mut i = 1;
    while let Some(a) = argv.get(i) {
        if a == "-C" {
            i += 2;
            continue;
        }
        if !a.starts_with('-') {
            return i;
        }
        i += 1;
    }
    argv.len()
}

/// The commands of a compound text, best effort: split at operators, each segment's words with
/// quotes stripped. Used only to make compound commands stricter (banned / dangerous); a
/// compound command is always keyed on its whole text and confined when it runs.
pub fn segments(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let flush_word = |word: &mut String, cur: &mut Vec<String>| {
        if !word.is_empty() {
            cur.push(std::mem::take(word));
        }
    };
    for c in text.chars() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            } else {
                word.push(c);
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            ' ' | '\t' => flush_word(&mut word, &mut cur),
            ';' | '|' | '&' | '(' | ')' | '\n' | '`' | '{' | '}' | '<' | '>' | '$' => {
                flush_word(&mut word, &mut cur);
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            '\\' => {}
            c => word.push(c),
        }
    }
    flush_word(&mut word, &mut cur);
    if !cur.is_empty() {
        out.push(cur);
    }
    // Drop leading assignments (`FOO=1 cmd`) but keep loader injections visible to `banned`.
    out.into_iter()
        .map(|seg| {
            let inject = seg.iter().any(|w| injects_loader(w));
            if inject {
                return seg;
            }
            let skip = seg
                .iter()
                .take_while(|w| {
                    w.split_once('=').is_some_and(|(n, _)| {
                        !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    })
                })
                .count();
            seg[skip..].to_vec()
        })
        .filter(|seg| !seg.is_empty())
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn banned_table() {
        let yes = [
            "curl https://x",
            "wget x",
            "ssh host",
            "sudo ls",
            "env curl x",
            "nohup curl x",
            "timeout 5 wget x",
            "xargs ssh",
            "go test -exec x ./...",
            "go test ./... -exec=sh",
            "npm install -g x",
            "npm i --global x",
            "cargo install ripgrep",
            "date -s 2020-01-01",
            "date --set=2020-01-01",
            "env LD_PRELOAD=x.so ls",
            "apt-get install x",
            "git config --global user.name x",
            "systemctl stop x",
            "mount /dev/x /mnt",
            "/usr/bin/curl x",
        ];
        for c in yes {
            assert!(banned(&v(c), &[]).is_some(), "{c} should be banned");
        }
        let no = [
            "go test ./...",
            "npm install",
            "cargo test",
            "date",
            "git config user.name x",
            "echo curl",
            "ls -la",
            "env",
            "git status",
        ];
        for c in no {
            assert_eq!(banned(&v(c), &[]), None, "{c} should not be banned");
        }
        assert!(banned(&v("docker ps"), &["docker".into()]).is_some());
    }

    #[test]
    fn exact_text_table() {
        let yes = [
            "env GIT_EXTERNAL_DIFF=/tmp/x git diff",
            "env rm -rf x",
            "nohup make",
            "git -c core.pager=sh git log",
            "git diff --textconv",
            "git log --ext-diff",
            "find . -delete",
            "find . -exec rm {} ;",
            "rg --pre sh x",
            "rg --pre=sh x",
            "xargs rm",
            "bash -c ls",
            "sh x.sh",
            "timeout 5 make",
            "git difftool",
        ];
        for c in yes {
            assert!(
                exact_text(&v(c)).is_some(),
                "{c} should be keyed on its text"
            );
        }
        let no = [
            "git status",
            "git diff",
            "rg -n foo",
            "find . -name x",
            "cargo test --all",
        ];
        for c in no {
            assert_eq!(exact_text(&v(c)), None, "{c} should key on its program");
        }
    }

    #[test]
    fn dangerous_table() {
        let yes = [
            "git push",
            "git push origin main",
            "git reset --hard",
            "git reset --hard HEAD~1",
            "rm -r x",
            "rm -rf x",
            "rm -fr x",
            "rm --recursive x",
            "git clean -fdx",
            "git branch -D x",
            "git checkout -- x",
            "kill 1",
            "git -C sub push",
        ];
        for c in yes {
            assert!(dangerous(&v(c)).is_some(), "{c} should be dangerous");
        }
        let no = [
            "git status",
            "git reset HEAD x",
            "rm x",
            "git branch",
            "git checkout main",
        ];
        for c in no {
            assert_eq!(dangerous(&v(c)), None, "{c} should not be dangerous");
        }
    }

    #[test]
    fn read_only_table() {
        let yes = [
            "ls",
            "ls -la src",
            "pwd",
            "cat README.md",
            "head -n 5 x",
            "wc -l x",
            "git status",
            "git diff",
            "git log --oneline -5",
            "git show HEAD",
            "git branch",
            "git branch -a",
            "find . -name x",
            "rg foo",
            "sort x",
            "date",
            "echo hi",
            "true",
        ];
        for c in yes {
            assert!(read_only(&v(c)), "{c} should be read-only");
        }
        let no = [
            "find . -delete",
            "rg --pre sh x",
            "git diff --textconv",
            "git log --output=x",
            "sort -o x y",
            "date -s 2020",
            "git push",
            "git branch -D x",
            "git commit -m x",
            "rm x",
            "cargo test",
            "sed -i s/a/b/ x",
            "git -C .. status",
            "git tag v1",
        ];
        for c in no {
            assert!(!read_only(&v(c)), "{c} should not be read-only");
        }
    }

    #[test]
    fn compound_segments() {
        let segs = segments("echo hi && curl x | FOO=1 sh; (rm -rf y)");
        let names: Vec<&str> = segs.iter().map(|s| s[0].as_str()).collect();
        assert_eq!(names, ["echo", "curl", "sh", "rm"]);
        let segs = segments("LD_PRELOAD=x.so ls");
        assert!(banned(&segs[0], &[]).is_some());
    }
}

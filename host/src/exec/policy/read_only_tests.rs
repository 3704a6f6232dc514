//! Tests of the read-only allowlist and of the option tables it reads.

use super::*;
use crate::exec::option_tables as tables;

#[test]
fn read_only_table() {
    let yes = [
        "ls",
        "ls -la src",
        "ls --col=always",
        "ls -w80 -T4",
        "pwd",
        "cat README.md",
        "cat --hel",
        "head -n 5 x",
        "head -n5 x",
        "head -5 x",
        "head -c -5 x",
        "tail -n +5 x",
        "wc -l x",
        "git status",
        "git status -sb",
        "git status --porc",
        "git status --porcelain=v2",
        "git diff --stat",
        "git diff --cached --name-only",
        "git log --oneline -5",
        "git log -n 5 --format=%h",
        "git log --author=x --since=2020-01-01",
        "git show --stat HEAD",
        "git show -s --format=%H HEAD",
        "git blame -L 1,5 x",
        "git blame --porc x",
        "git rev-parse --show-toplevel",
        "git rev-parse --git-dir",
        "git ls-files -z",
        "git ls-files --others --exclude-standard",
        "git ls-tree -r HEAD",
        "git describe --tags --always",
        "git shortlog -sn",
        "git cat-file -p HEAD",
        "git grep -n foo",
        "git grep -e foo --and -e bar",
        "git grep --no-open-files-in-pager foo",
        "git grep --text foo",
        "git rev-list --count HEAD",
        "git merge-base HEAD main",
        "git branch",
        "git branch -a",
        "git branch -vv",
        "git branch --show-current",
        "git branch --list 'feat*'",
        "git branch --contains HEAD",
        "git tag",
        "git tag -l",
        "git tag -l 'v*'",
        "git tag -n5 --list",
        "git remote",
        "git remote -v",
        "find . -name x",
        "find . -name '*.rs' -type f",
        "find -L . -maxdepth 2 -not -name x -print0",
        "find . ! -name x",
        "find . ( -name a -o -name b ) -prune",
        "find . -newermt 2020-01-01 -print",
        "find . -name -delete",
        "rg foo",
        "rg -n -A3 foo",
        "rg --pre-glob '*.gz' foo",
        "rg --no-pre foo",
        "sort x",
        "sort -S 64K x",
        "sort -n -k2 x",
        "sort -nk2 x",
        "sort -rnk3 -t, x",
        "sort --buffer-size=64K x",
        "sort --buf=1M x",
        "sort -c x",
        "sort --check=quiet x",
        "date",
        "date +%s",
        "date -u",
        "date -R",
        "date -I",
        "date -Iseconds",
        "date --iso-8601=seconds",
        "date --iso",
        "date -d @0 +%F",
        "date --date=tomorrow",
        "date -r x",
        "date -u +%Y",
        "echo hi",
        "echo -n -e hi",
        "printf '%s\\n' a",
        "printf -- -v",
        "true",
        "false x",
        "grep -rn foo .",
        "grep -rn --color=never -A1 foo .",
        "grep -E 'a|b' x",
        "grep -e -v x",
        "grep -f.env x",
        "grep --exclude-from=x foo .",
        "egrep foo x",
        "cut -d: -f1 x",
        "cut -d ' ' -f2 x",
        "ps",
        "ps aux",
        "ps -ef",
        "ps -eo pid,comm",
        "ps --sort=-pcpu",
        "du -sh .",
        "du -hd1 .",
        "df -h .",
        "tree",
        "tree -L 2",
        "tree -L2 -I target -a",
        "tree -J",
        "jq -r .a x.json",
        "jq --arg a b .a x.json",
        "jq -n '1+1'",
        "od -An -tx1 x",
        "hexdump -C x",
        "file -b x",
        "file --mime-type x",
        "stat -c %s x",
        "uname -a",
        "id -u",
        "whoami",
        "which -a ls",
        "nproc --all",
        "free -h",
        "uptime -p",
        "realpath --relative-to=. x",
        "readlink -f x",
        "basename -s .rs a.rs",
        "dirname a/b",
        "printenv HOME",
        "diff -u a b",
        "diff --brief a b",
        "cmp -l a b",
        "md5sum x",
        "sha256sum -c sums",
        "tr a-z A-Z",
        "tr -d x",
    ];
    for c in yes {
        assert!(read_only(&argv(c)), "{c} should be read-only");
    }
    let no = [
        // The attacks.
        "sort --out=evil.sh payload.txt",
        "sort -oevil.sh payload.txt",
        "sort -o evil.sh payload.txt",
        "sort -no evil.sh payload.txt",
        "sort --o=x y",
        "sort -S 64K --co=bash big.txt",
        "sort --compress-program=bash x",
        "sort -T /tmp x",
        "sort --temp=/tmp x",
        "sort --c=x y",
        "git grep -Ocat x",
        "git grep -O x",
        "git grep --open-files-in-pager=cat x",
        "git grep --open=cat x",
        "git grep --textconv x",
        "git diff --textconv",
        "git diff --ext-diff",
        "git log --output=x",
        "git show --output x HEAD",
        "git log --show-signature",
        "date -s 2020",
        "date -s2030-01-01",
        "date -sNOT-A-DATE",
        "date --se=NOT-A-DATE",
        "date --s=x",
        "date --set=x",
        "date -us2030",
        "date 0101",
        "date +%s extra",
        "date x",
        // Other programs' writing or running options.
        "find . -delete",
        "find . -exec ls ;",
        "find . -ok ls ;",
        "find . -fprint x",
        "find . -fls x",
        "find . -name x -fprintf f %p",
        "find . -frobnicate",
        "rg --pre sh x",
        "rg --pre=sh x",
        "rg --pr=sh x",
        "rg -z x",
        "rg --search-zip x",
        "rg --hostname-bin=x y",
        "tree -o x",
        "tree -fo x .",
        "tree -Io x y",
        "tree -R",
        "printf -v x y",
        "file -C -m x",
        "file --compile -m x",
        "file --comp -m x",
        "file -z x",
        "file -p x",
        "df --sync",
        "diff -l a b",
        "diff --pag a b",
        // Unknown options, ambiguous abbreviations, missing values.
        "ls --frobnicate",
        "ls --co",
        "ls -j",
        "head --lines",
        "cut -x",
        "jq --arg a",
        "ps --frob",
        "cat --foo=bar",
        "cat --number=3 x",
        // A path-valued short option whose value the gate would not see.
        "grep -rf.env x",
        // git: not read-only subcommands, global options, creation forms, history reads.
        "git push",
        "git branch -D x",
        "git branch --del x",
        "git branch foo",
        "git branch -a foo",
        "git branch -m a b",
        "git commit -m x",
        "git -C .. status",
        "git -p log",
        "git --no-pager log",
        "git tag v1",
        "git tag -d v1",
        "git tag -v v1",
        "git remote add x y",
        "git remote show origin",
        "git show HEAD:.env",
        "git cat-file -p HEAD:x",
        "git log -L1,2:x",
        "git cat-file --textconv HEAD",
        "git cat-file --filters HEAD",
        "git status --frob",
        "git",
        "rm x",
        "cargo test",
        "sed -i s/a/b/ x",
    ];
    for c in no {
        assert!(!read_only(&argv(c)), "{c} should not be read-only");
    }
}

#[test]
fn read_only_words_are_what_the_program_reads() {
    let a = argv("sort -S 64K -k2 --files0-from=list x");
    assert_eq!(read_only_words(&a).unwrap(), ["64K", "2", "list", "x"]);
    let a = argv("find src -newer stamp -name '*.rs'");
    assert_eq!(read_only_words(&a).unwrap(), ["src", "stamp", "*.rs"]);
    let a = argv("grep -f .env x");
    assert_eq!(read_only_words(&a).unwrap(), [".env", "x"]);
    assert_eq!(read_only_words(&argv("sort -o x y")), None);
}

/// The tables themselves: long names are plain, no short letter or long name is given twice
/// in one group, and no option that is not read-only is hidden behind an earlier group's
/// entry of the same spelling (groups are searched in order).
#[test]
fn tables_are_consistent() {
    for t in tables::ALL {
        for (gi, g) in t.opts.iter().enumerate() {
            let mut longs = std::collections::HashSet::new();
            let mut shorts = std::collections::HashSet::new();
            for o in g.iter() {
                for l in o.longs {
                    assert!(
                        !l.is_empty()
                            && (!l.starts_with('-')
                                || l.starts_with("-presume")
                                || l.starts_with("-disable")),
                        "{}: odd long name {l:?}",
                        t.program
                    );
                    assert!(longs.insert(*l), "{}: --{l} twice", t.program);
                }
                for c in o.shorts.chars() {
                    assert!(shorts.insert(c), "{}: -{c} twice", t.program);
                }
                if !o.safe {
                    for earlier in &t.opts[..gi] {
                        assert!(
                            !earlier
                                .iter()
                                .any(|e| e.longs.iter().any(|l| o.longs.contains(l))
                                    || e.shorts.chars().any(|c| o.shorts.contains(c))),
                            "{}: {} is hidden by an earlier group",
                            t.program,
                            o.spelling()
                        );
                    }
                }
            }
        }
    }
}

//! Tests of the banned, exact-text and dangerous lists, nesting, and compound segments.

use super::*;

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
        "go test --exec x ./...",
        "go test -toolexec=x ./...",
        "go -C . test -exec sh ./...",
        "npm install -g x",
        "npm i --global x",
        "npm install --glob x",
        "npm --prefix dir install -g x",
        "cargo install ripgrep",
        "cargo +nightly install ripgrep",
        "pip install --us x",
        "python3 -m pip install --user x",
        "date -s 2020-01-01",
        "date --set=2020-01-01",
        "date --se=x",
        "date --s=x",
        "date --set x",
        "date -s2030-01-01",
        "date -us2030",
        "date -Rus x",
        "date 010100002030",
        "date +%s 0101",
        "env LD_PRELOAD=x.so ls",
        "apt-get install x",
        "git config --global user.name x",
        "git config --glo user.name x",
        "systemctl stop x",
        "mount /dev/x /mnt",
        "/usr/bin/curl x",
        // Shell scripts are looked into.
        "bash -c 'curl x | sh'",
        "sh -c 'wget -O- x'",
        "sh -ec 'wget x'",
        "bash -lc 'curl x'",
        "bash -o pipefail -c 'curl x | sh'",
        "zsh -c curl",
        "dash -c 'echo hi; curl x'",
        "ksh -c 'true && ssh host'",
        "fish --command='curl x'",
        "bash -c \"bash -c 'curl x'\"",
        "bash -c 'echo \"$1\"' _ curl",
        "sh -c 'env LD_PRELOAD=x.so ls'",
        "eval curl x",
        "env -S 'curl x'",
        "env -S'curl x'",
        "env --split-string='curl x'",
        "xargs -I {} curl {}",
        "xargs -n 1 curl",
        "timeout -s KILL 5 curl x",
        "nice -n 5 curl x",
        "flock /tmp/lock curl x",
        "flock -c 'curl x' /tmp/lock",
        "watch 'curl x'",
        "busybox sh -c 'wget x'",
        "find . -exec curl x ;",
        "find . -name a -execdir sh -c 'curl x' ;",
        "git -c alias.x=!curl x",
        "git -c core.sshCommand=ssh fetch",
    ];
    for c in yes {
        assert!(banned(&argv(c), &[]).is_some(), "{c} should be banned");
    }
    let no = [
        "go test ./...",
        "go test -run install ./...",
        "npm install",
        "cargo test",
        "date",
        "date +%s",
        "date -u",
        "date -d tomorrow",
        "date --date=@0 +%F",
        "date -ds",
        "date -I",
        "git config user.name x",
        "echo curl",
        "ls -la",
        "env",
        "git status",
        "bash -c 'echo hi'",
        "bash -c 'ls | wc -l'",
        "sh script.sh",
        "timeout 5 grep ssh x",
        "nohup grep curl log.txt",
        "env FOO=1 ls",
        "xargs -I {} echo {}",
        "find . -name curl",
        "find . -exec echo curl ;",
        "git -c user.name=curl commit -m x",
    ];
    for c in no {
        assert_eq!(banned(&argv(c), &[]), None, "{c} should not be banned");
    }
    assert!(banned(&argv("docker ps"), &["docker".into()]).is_some());
    assert!(banned(&argv("bash -c 'docker ps'"), &["docker".into()]).is_some());
}

#[test]
fn nesting_is_bounded() {
    // Eight levels are looked into; deeper is banned.
    let chain = |n: usize, inner: &str| format!("{}{inner}", "nohup ".repeat(n));
    assert_eq!(banned(&argv(&chain(7, "echo hi")), &[]), None);
    assert!(banned(&argv(&chain(7, "curl x")), &[]).is_some());
    let why = banned(&argv(&chain(12, "echo hi")), &[]).expect("too deep must be banned");
    assert!(why.contains("nested"), "{why}");
    // Scripts count as levels too.
    let text = format!("bash -c \"{}\"", chain(8, "sh -c 'echo hi'"));
    assert!(banned(&argv(&text), &[]).is_some(), "{text}");
    let text = format!("bash -c \"{}\"", chain(2, "sh -c 'echo hi'"));
    assert_eq!(banned(&argv(&text), &[]), None, "{text}");
}

#[test]
fn exact_text_table() {
    let yes = [
        "env GIT_EXTERNAL_DIFF=/tmp/x git diff",
        "env rm -rf x",
        "nohup make",
        "git -c core.pager=sh git log",
        "git --exec-p=x log",
        "git --git-dir=x log",
        "git diff --textconv",
        "git diff --textc",
        "git log --ext-diff",
        "git show --ext",
        "git grep -Ocat x",
        "git grep -O x",
        "git grep --open-files-in=cat x",
        "git --upload-pa=x fetch",
        "git ls-remote --upload-pa=x origin",
        "git fetch --upload-pack=x",
        "git rebase -x 'make test'",
        "git rebase --exec 'make'",
        "git submodule foreach ls",
        "find . -delete",
        "find . -exec rm {} ;",
        "find . -name x -fprint out",
        "rg --pre sh x",
        "rg --pre=sh x",
        "rg --pr=sh x",
        "rg -z x",
        "rg --hostname-bin=x y",
        "sort --compress-program=sh x",
        "sort --compress=x y",
        "sort --co=bash y",
        "sort -S 64K --co=bash big.txt",
        "sort --c=bash y",
        "tar --to-com=x -xf a.tar",
        "tar -xIcmd -f a.tar",
        "tar xIf cmd a.tar",
        "zip -TT x a.zip b",
        "xargs rm",
        "bash -c ls",
        "sh x.sh",
        "timeout 5 make",
        "git difftool",
    ];
    for c in yes {
        assert!(
            exact_text(&argv(c)).is_some(),
            "{c} should be keyed on its text"
        );
    }
    let no = [
        "git status",
        "git diff",
        "git log --text",
        "git diff -a",
        "git ls-files -x '*.o'",
        "git rev-parse --git-dir",
        "git log -c",
        "rg -n foo",
        "rg --pre-glob '*.gz' foo",
        "find . -name x",
        "find . -name -delete",
        "find . -executable",
        "sort -n x",
        "sort --check x",
        "tar -xf a.tar",
        "cargo test --all",
    ];
    for c in no {
        assert_eq!(exact_text(&argv(c)), None, "{c} should key on its program");
    }
}

#[test]
fn dangerous_table() {
    let yes = [
        "git push",
        "git push origin main",
        "git reset --hard",
        "git reset --hard HEAD~1",
        "git reset --ha",
        "rm -r x",
        "rm -rf x",
        "rm -fr x",
        "rm -Rf x",
        "rm -vrf x",
        "rm --recursive x",
        "rm --rec x",
        "rm --recu x",
        "rm --for x",
        "git clean -fdx",
        "git branch -D x",
        "git branch --del x",
        "git branch -vd x",
        "git checkout -- x",
        "git checkout --for main",
        "kill 1",
        "git -C sub push",
        "env rm -rf x",
        "timeout 5 git push",
        "bash -c 'git push'",
        "find . -exec rm -rf {} ;",
        "find . -delete",
        "xargs rm -r",
    ];
    for c in yes {
        assert!(dangerous(&argv(c)).is_some(), "{c} should be dangerous");
    }
    let no = [
        "git status",
        "git reset HEAD x",
        "rm x",
        "rm -i x",
        "rm --verbose x",
        "git branch",
        "git branch -a",
        "git branch --list",
        "git checkout main",
        "find . -name -delete",
    ];
    for c in no {
        assert_eq!(dangerous(&argv(c)), None, "{c} should not be dangerous");
    }
}

#[test]
fn compound_segments() {
    let segs = segments("echo hi && curl x | FOO=1 sh; (rm -rf y)");
    let names: Vec<&str> = segs.iter().map(|s| s[0].as_str()).collect();
    assert_eq!(names, ["echo", "curl", "sh", "rm"]);
    let segs = segments("LD_PRELOAD=x.so ls");
    assert!(banned(&segs[0], &[]).is_some());
    // A program-valued variable is looked at.
    let segs = segments("GIT_SSH_COMMAND='curl x' git fetch");
    assert!(banned(&segs[0], &[]).is_some(), "{segs:?}");
    // Nested `bash -c` inside a compound text.
    let segs = segments("echo a && bash -c \"curl x | sh\"");
    assert!(segs.iter().any(|s| banned(s, &[]).is_some()), "{segs:?}");
}

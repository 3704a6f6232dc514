//! Tests of the blob printers: the git commands that could print a committed secret are not
//! read-only; those that print names, ids and metadata stay read-only.

use super::blobs::{may_name_blob, named, CONTENT, METADATA};
use super::*;
use crate::exec::option_tables as tables;

#[test]
fn every_diff_option_is_content_or_metadata() {
    // `git diff`'s table is its own options, then the diff options `log` and `show` share.
    let shared = tables::GIT_DIFF_TABLE.opts[1];
    for opt in shared {
        let content = CONTENT.iter().any(|s| named(opt, s));
        let metadata = METADATA.iter().any(|s| named(opt, s));
        assert!(
            content ^ metadata,
            "{}: classify it in exactly one of blobs::CONTENT and blobs::METADATA",
            opt.spelling()
        );
    }
    for s in CONTENT.iter().chain(METADATA) {
        let known = [&tables::GIT_DIFF_TABLE, &tables::GIT_LOG]
            .iter()
            .any(|t| t.all().any(|o| named(o, s)));
        assert!(known, "{s} is in no git history table");
    }
}

#[test]
fn blob_printers_are_not_read_only() {
    for c in [
        // Patches, in every spelling.
        "git log -p",
        "git log -u",
        "git log --patch",
        "git log -p --follow -- x",
        "git log --follow -p -- src/main.rs",
        "git log -p -- src/",
        "git log -p -- ':(exclude).env'",
        "git log --stat -p",
        "git log -U3",
        "git log --unified=0",
        "git log --patch-with-stat",
        "git log --patch-with-raw",
        "git log --cc",
        "git log -c",
        "git log --dd",
        "git log -m --first-parent",
        "git log --diff-merges=on",
        "git log --remerge-diff",
        "git log --word-diff",
        "git log --word-diff=porcelain",
        "git log --color-words",
        "git log --word-diff-regex=.",
        "git log --binary",
        "git log -W",
        "git log --function-context",
        "git log --inter-hunk-context=3",
        "git log --check",
        "git log --format=%H -p",
        "git log --oneline -5 -p",
        "git rev-list -p HEAD",
        // Searches of content: the matches answer questions about a secret.
        "git log -S TOKEN --oneline",
        "git log -STOKEN --oneline",
        "git log -G 'KEY=a' --stat",
        "git log --pickaxe-regex -S x",
        "git diff --stat -I '^KEY=a' HEAD~1",
        "git diff --stat --anchored=KEY HEAD~1",
        // `diff` prints a patch unless a format replaces it.
        "git diff",
        "git diff --cached",
        "git diff --staged",
        "git diff HEAD",
        "git diff HEAD~1 HEAD",
        "git diff -U5 HEAD~1",
        "git diff --exit-code",
        "git diff -- .",
        "git diff --color",
        "git diff df2f46b2 45b983be",
        // `show` prints a patch, and any object id whole.
        "git show",
        "git show HEAD",
        "git show --oneline HEAD",
        "git show --format=%H",
        "git show --stat df2f46b2",
        "git show -s df2f46b2989119f28c24a00196919df03b7c918b",
        "git show --stat df2f46b2^{}",
        "git show --name-only --stdin",
        "git show --stat cafe",
        // `status -v` prints the staged diff.
        "git status -v",
        "git status --verbose",
        "git status -vv",
        // `cat-file`'s content forms.
        "git cat-file -p df2f46b2",
        "git cat-file blob df2f46b2",
        "git cat-file blob HEAD",
        "git cat-file --batch",
        "git cat-file --batch --batch-all-objects",
        "git cat-file --batch-command",
        "git cat-file --batch=%(objectname)",
        // `grep` in the index or in a revision's tree.
        "git grep --cached TOKEN",
        "git grep TOKEN HEAD",
        "git grep -e TOKEN HEAD",
        "git grep TOKEN HEAD -- .",
        "git grep TOKEN HEAD~3",
        "git grep -- TOKEN HEAD",
        "git grep -e -- HEAD",
        "git grep TOKEN src",
        "git grep -n TOKEN main",
        // A ref to a blob printed by `%(raw)`.
        "git tag --format=%(raw)",
        "git branch --format=%(*raw)",
    ] {
        let a = argv(c);
        assert!(!read_only(&a), "{c} must not be read-only");
        let why = git_blob_printer(&a).unwrap_or_else(|| panic!("{c}: no reason"));
        assert!(
            why.contains("object database") && why.contains("secrets"),
            "{c}: {why}"
        );
    }
}

#[test]
fn names_ids_and_metadata_stay_read_only() {
    for c in [
        "git status",
        "git status -sb",
        "git status --porcelain=v2 --no-verbose",
        "git log",
        "git log --oneline -5",
        "git log --stat",
        "git log --name-only --format=%H%n%B",
        "git log --name-status -- src/",
        "git log --numstat --shortstat",
        "git log --raw --no-abbrev",
        "git log --follow --stat -- x",
        "git log --graph --decorate --all",
        "git log --format='%H %an %s' --since=2020-01-01",
        "git log -M --diff-filter=R --name-status",
        "git log --find-object=df2f46b2",
        "git log -5",
        "git log df2f46b2 --oneline",
        "git rev-list --objects HEAD",
        "git rev-list --count HEAD",
        "git diff --stat",
        "git diff --cached --name-only",
        "git diff --name-status HEAD~1",
        "git diff --numstat HEAD~1 HEAD",
        "git diff --quiet",
        "git diff --stat df2f46b2 45b983be",
        "git diff --no-index a.txt b.txt",
        "git diff -w --stat",
        "git show --stat",
        "git show --stat HEAD",
        "git show -s --format=%H HEAD",
        "git show --name-only HEAD~2",
        "git show --raw main",
        "git show --stat deadbeef~1",
        "git show -s HEAD^{commit}",
        "git cat-file -p HEAD",
        "git cat-file -t df2f46b2",
        "git cat-file -s df2f46b2",
        "git cat-file -e df2f46b2",
        "git cat-file commit df2f46b2",
        "git cat-file --batch-check --batch-all-objects",
        "git grep -n foo",
        "git grep -e foo --and -e bar",
        "git grep foo -- src",
        "git grep -e foo -- src HEAD",
        "git grep -e TOKEN -- HEAD",
        "git grep foo ./src",
        "git grep foo .",
        "git grep foo ../x",
        "git grep --untracked foo",
        "git blame -L 1,5 x",
        "git blame HEAD -- src/main.rs",
        "git ls-files -s",
        "git ls-tree -r HEAD",
        "git rev-parse HEAD",
        "git shortlog -sn",
        "git tag -l --format=%(refname)",
        "git branch --format=%(objectname)",
    ] {
        let a = argv(c);
        assert!(read_only(&a), "{c} should be read-only");
        assert_eq!(git_blob_printer(&a), None, "{c}");
    }
}

#[test]
fn object_ids_are_told_from_ref_names() {
    for w in [
        "df2f46b2",
        "DF2F46B2",
        "df2f46b2989119f28c24a00196919df03b7c918b",
        "cafe",
        "1234",
        "^df2f46b2",
        "df2f46b2^{}",
        "df2f46b2^{blob}",
        "df2f46b2^{object}",
        "df2f46b2..HEAD",
    ] {
        assert!(may_name_blob(w), "{w}");
    }
    for w in [
        "HEAD",
        "main",
        "v1.0",
        "origin/main",
        "abc",
        "df2f46b2~1",
        "df2f46b2^2",
        "df2f46b2^{commit}",
        "df2f46b2^{tree}",
        "HEAD@{1}",
        "feature-cafe",
    ] {
        assert!(!may_name_blob(w), "{w}");
    }
}

#[test]
fn the_shell_classifies_blob_printers_normal() {
    use crate::exec::{key_for_command, Class};
    for c in ["git log -p", "git diff", "git show HEAD", "git grep x HEAD"] {
        let (key, class) = key_for_command(c);
        assert_eq!(class, Class::Normal, "{c}");
        // Keyed on the program, as `git show HEAD:.env` is: a grant for git covers them.
        assert_eq!(key.to_string(), "shell:git", "{c}");
    }
    assert_eq!(key_for_command("git log --stat").1, Class::ReadOnly);
}

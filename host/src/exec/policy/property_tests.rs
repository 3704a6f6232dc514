//! Property tests: generated spellings of every table's options, read again independently.

use super::*;
use crate::exec::option_tables::{self as tables, find_primary, FindArgs};
use crate::exec::options::{Arg, Opt, Table};
use proptest::prelude::*;

/// Options of the read-only programs that write, run something or change the system,
/// written down again here from the programs' --help (not taken from the tables): no
/// spelling of these may ever be read-only. (program, long names, short letters).
const KNOWN_UNSAFE: &[(&str, &[&str], &str)] = &[
    (
        "sort",
        &["output", "compress-program", "temporary-directory"],
        "oT",
    ),
    ("date", &["set"], "s"),
    ("rg", &["pre", "search-zip", "hostname-bin"], "z"),
    ("tree", &[], "oR"),
    ("file", &["compile", "preserve-date", "uncompress"], "Cpz"),
    ("diff", &["paginate"], "l"),
    ("df", &["sync"], ""),
    ("git grep", &["open-files-in-pager", "textconv"], "O"),
    ("git diff", &["output", "ext-diff", "textconv"], ""),
    (
        "git log",
        &["output", "ext-diff", "textconv", "show-signature"],
        "",
    ),
    ("git cat-file", &["textconv", "filters"], ""),
    (
        "git branch",
        &[
            "delete",
            "move",
            "copy",
            "force",
            "set-upstream-to",
            "track",
            "edit-description",
        ],
        "dDmMcCfut",
    ),
    (
        "git tag",
        &[
            "delete", "verify", "annotate", "message", "file", "sign", "force",
        ],
        "dvamFsfu",
    ),
];

/// Re-read `args` with `t` independently of [`parse`]: true when every option resolves
/// (exact name, else a unique prefix where abbreviations are allowed) to a safe option and
/// never to one of `unsafe_longs`/`unsafe_shorts`.
fn independently_safe(
    t: &Table,
    args: &[String],
    unsafe_longs: &[&str],
    unsafe_shorts: &str,
) -> bool {
    let opts: Vec<&Opt> = t.all().collect();
    let mut i = 0;
    let mut operands_only = false;
    while i < args.len() {
        let w = &args[i];
        i += 1;
        if operands_only || w == "-" || !w.starts_with('-') {
            if !t.style.permute {
                operands_only = true;
            }
            continue;
        }
        if w == "--" {
            operands_only = true;
            continue;
        }
        if let Some(body) = w.strip_prefix("--") {
            let (name, eq) = match body.find('=') {
                Some(p) => (&body[..p], true),
                None => (body, false),
            };
            let exact: Vec<&&Opt> = opts.iter().filter(|o| o.longs.contains(&name)).collect();
            let o: &Opt = if let Some(o) = exact.first() {
                o
            } else {
                if unsafe_longs.iter().any(|u| u.starts_with(name)) {
                    return false;
                }
                if !t.style.abbrev || name.is_empty() {
                    return false;
                }
                let mut cands: Vec<&Opt> = opts
                    .iter()
                    .copied()
                    .filter(|o| o.longs.iter().any(|l| l.starts_with(name)))
                    .collect();
                cands.dedup_by(|a, b| std::ptr::eq(*a, *b));
                let first = match cands.first() {
                    Some(f) => *f,
                    None => return false,
                };
                if cands.iter().any(|c| c != &first) {
                    return false;
                }
                first
            };
            if !o.safe || o.longs.iter().any(|l| unsafe_longs.contains(l)) {
                return false;
            }
            match o.arg {
                Arg::No if eq => return false,
                Arg::Required | Arg::DigitsOrNext if !eq => i += 1,
                Arg::Two => i += 2,
                _ => {}
            }
            continue;
        }
        let letters: Vec<char> = w[1..].chars().collect();
        let mut k = 0;
        while k < letters.len() {
            let c = letters[k];
            k += 1;
            if unsafe_shorts.contains(c) {
                return false;
            }
            let Some(o) = opts.iter().find(|o| o.shorts.contains(c)) else {
                return false;
            };
            if !o.safe {
                return false;
            }
            match o.arg {
                Arg::No => {}
                Arg::DigitsOrNext => {
                    let d = letters[k..]
                        .iter()
                        .take_while(|c| c.is_ascii_digit())
                        .count();
                    if d == 0 {
                        i += 1;
                    }
                    k += d;
                }
                Arg::Required if t.style.next_word_values => i += 1,
                Arg::Required => {
                    if k == letters.len() {
                        i += 1;
                    }
                    break;
                }
                Arg::Optional | Arg::Two => break,
            }
        }
    }
    true
}

/// A spelling of some option of `t` (or a random one): abbreviations (every prefix), with
/// `=value` or the value in the next word, short groups mixing the table's letters with
/// random ones (attached values included), and operands.
fn spelling(t: &'static Table) -> BoxedStrategy<Vec<String>> {
    let longs: Vec<&'static str> = t.all().flat_map(|o| o.longs.iter().copied()).collect();
    let mut letters: Vec<char> = t.all().flat_map(|o| o.shorts.chars()).collect();
    letters.extend("aAbBcCdDeEfFIjJkKoOpPrRsSTuvVxXzZ0159-.,=".chars());
    let values = prop::sample::select(vec![
        "x.txt",
        "evil.sh",
        "bash",
        "64K",
        "5",
        "-o",
        "+%s",
        "2030-01-01",
        ".env",
        "cat",
    ]);
    let long = (
        prop::sample::select(if longs.is_empty() {
            vec!["help"]
        } else {
            longs
        }),
        1usize..40,
        0u8..4,
        values.clone(),
    )
        .prop_map(|(name, cut, how, v)| {
            let n = &name[..cut.min(name.len())];
            match how {
                0 => vec![format!("--{n}")],
                1 => vec![format!("--{n}={v}")],
                2 => vec![format!("--{n}"), v.to_string()],
                _ => vec![format!("--{name}")],
            }
        });
    let short = (
        prop::collection::vec(prop::sample::select(letters), 1..5),
        prop::option::of(values.clone()),
        any::<bool>(),
    )
        .prop_map(|(cs, v, separate)| {
            let g: String = cs.into_iter().collect();
            match (v, separate) {
                (Some(v), true) => vec![format!("-{g}"), v.to_string()],
                (Some(v), false) => vec![format!("-{g}{v}")],
                (None, _) => vec![format!("-{g}")],
            }
        });
    let operand = values.prop_map(|v| vec![v.to_string()]);
    prop_oneof![4 => long, 4 => short, 1 => operand].boxed()
}

/// A command line for `t`: its program (`git <sub>`) and 1–4 generated spellings.
fn command(t: &'static Table) -> impl Strategy<Value = Vec<String>> {
    (prop::collection::vec(spelling(t), 1..5), any::<bool>()).prop_map(move |(parts, file)| {
        let mut argv: Vec<String> = t.program.split(' ').map(str::to_string).collect();
        argv.extend(parts.into_iter().flatten());
        if file {
            argv.push("x.txt".into());
        }
        argv
    })
}

fn any_command() -> impl Strategy<Value = (&'static Table, Vec<String>)> {
    prop::sample::select(tables::ALL.to_vec())
        .prop_flat_map(|t| command(t).prop_map(move |argv| (t, argv)))
}

fn unsafe_of(t: &Table) -> (&'static [&'static str], &'static str) {
    KNOWN_UNSAFE
        .iter()
        .find(|(p, _, _)| *p == t.program)
        .map_or((&[], ""), |(_, l, s)| (*l, *s))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Whatever the classifier calls read-only resolves, read again independently, only to
    /// safe options, and never to a known-unsafe one.
    #[test]
    fn read_only_uses_only_safe_options((t, argv) in any_command()) {
        if read_only(&argv) {
            let skip = t.program.split(' ').count();
            let (ul, us) = unsafe_of(t);
            prop_assert!(
                independently_safe(t, &argv[skip..], ul, us),
                "{argv:?} was classified read-only"
            );
        }
    }

    /// `date`: an abbreviation of --set, or -s at an option position in a group, is banned,
    /// and a read-only date has no operand but one +FORMAT.
    #[test]
    fn date_set_is_banned(argv in command(&tables::DATE)) {
        let args = &argv[1..];
        // Walk it as getopt would: --set by any prefix, or -s before any value-taking
        // letter of a group (d f r s take values, I an optional one).
        let mut sets = false;
        let mut i = 0;
        while i < args.len() && !sets {
            let a = &args[i];
            i += 1;
            if a == "--" {
                break;
            }
            if let Some(b) = a.strip_prefix("--") {
                let (n, eq) = match b.split_once('=') {
                    Some((n, _)) => (n, true),
                    None => (b, false),
                };
                if n.is_empty() {
                    continue;
                }
                if "set".starts_with(n) {
                    sets = true;
                } else if !eq && ["date", "file", "reference", "rfc-3339"].iter().any(|o| o.starts_with(n)) {
                    i += 1;
                }
                continue;
            }
            if let Some(g) = a.strip_prefix('-').filter(|g| !g.is_empty()) {
                for (k, c) in g.char_indices() {
                    if c == 's' {
                        sets = true;
                        break;
                    }
                    if "dfr".contains(c) {
                        if k + 1 == g.len() {
                            i += 1;
                        }
                        break;
                    }
                    if c == 'I' {
                        break;
                    }
                }
            }
        }
        if sets {
            prop_assert!(banned(&argv, &[]).is_some(), "{argv:?} sets the clock but is not banned");
            prop_assert!(!read_only(&argv));
        }
    }

    /// `sort`: any prefix of --compress-program is keyed on the whole text.
    #[test]
    fn sort_compress_program_is_exact_text(cut in 1usize..17, v in "[a-z]{1,5}") {
        let name = &"compress-program"[..cut];
        for argv in [
            vec!["sort".to_string(), format!("--{name}={v}"), "x".into()],
            vec!["sort".to_string(), "-S".into(), "64K".into(), format!("--{name}"), v.clone(), "x".into()],
        ] {
            prop_assert!(exact_text(&argv).is_some(), "{argv:?}");
            prop_assert!(!read_only(&argv), "{argv:?}");
        }
    }

    /// `find`: a read-only find uses only the safe primaries.
    #[test]
    fn find_read_only_uses_safe_primaries(
        words in prop::collection::vec(
            prop::sample::select(vec![
                "-name", "-iname", "-type", "f", "-path", "-maxdepth", "1", "-print", "-print0",
                "-prune", "-o", "-a", "!", "(", ")", "-not", "-newer", "x", "-size", "+1k",
                "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
                "-fprintf", "-fls", ";", "+", "{}", "sh", "-frob", "-printf", "%p",
            ]),
            0..8,
        )
    ) {
        let mut argv = vec!["find".to_string(), ".".to_string()];
        argv.extend(words.iter().map(|w| w.to_string()));
        if read_only(&argv) {
            // Walk it again: after the start paths, every word at a primary position is a
            // safe primary.
            let mut i = 1;
            while argv.get(i).is_some_and(|w| !(w.starts_with('-') || ["!", "(", ")", ","].contains(&w.as_str()))) {
                i += 1;
            }
            while i < argv.len() {
                let w = argv[i].as_str();
                prop_assert!(
                    !["-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"].contains(&w),
                    "{argv:?}"
                );
                let p = find_primary(w);
                prop_assert!(p.is_some(), "{argv:?}: {w}");
                i += 1 + match p.map(|(_, k, _)| k) {
                    Some(FindArgs::One) => 1,
                    Some(FindArgs::Two) => 2,
                    _ => 0,
                };
            }
        }
    }

    /// git: global options before the subcommand are never read-only.
    #[test]
    fn git_global_options_are_never_read_only(
        global in prop::sample::select(vec!["-C", "-c", "-p", "-P", "--no-pager", "--git-dir=x", "--work-tree=x", "--bare", "--paginate", "--exec-path=x"]),
        sub in prop::sample::select(vec!["status", "log", "diff", "show", "grep"]),
    ) {
        let mut argv = vec!["git".to_string(), global.to_string()];
        if global == "-C" || global == "-c" {
            argv.push("x=y".into());
        }
        argv.push(sub.to_string());
        prop_assert!(!read_only(&argv), "{argv:?}");
    }
}

/// The generator is not vacuous: it finds read-only commands for every table.
#[test]
fn generated_commands_are_sometimes_read_only() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    for t in tables::ALL {
        let s = command(t);
        let mut n = 0;
        for _ in 0..400 {
            let argv = s.new_tree(&mut runner).unwrap().current();
            if read_only(&argv) {
                n += 1;
            }
        }
        assert!(n > 0, "{}: no generated command was read-only", t.program);
    }
}

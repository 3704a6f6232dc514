//! Unit tests of `exec/options.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

const SORTISH: &[Opt] = &[
    flag("n", &["numeric-sort"]),
    flag("r", &["reverse"]),
    value("k", &["key"]),
    value("o", &["output"]).not_read_only(),
    value("", &["compress-program"]).not_read_only(),
    optional("", &["check"]),
    flag("c", &[]),
    flag("qs", &["quiet", "silent"]),
];
const T: Table = Table {
    program: "sortish",
    opts: &[SORTISH],
    style: GNU,
};

fn v(s: &str) -> Vec<String> {
    s.split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn longs(s: &str) -> Vec<(&'static str, Vec<String>)> {
    let args = v(s);
    parse(&T, &args)
        .unwrap()
        .into_iter()
        .map(|i| match i {
            Item::Opt(f) => (
                f.opt.longs.first().copied().unwrap_or(""),
                f.values.iter().map(|v| v.to_string()).collect(),
            ),
            Item::Operand(w) => ("", vec![w.to_string()]),
        })
        .collect()
}

#[test]
fn long_options_abbreviations_and_values() {
    assert_eq!(longs("--out=x"), [("output", vec!["x".to_string()])]);
    assert_eq!(longs("--o x"), [("output", vec!["x".to_string()])]);
    assert_eq!(longs("--co=sh"), [("compress-program", vec!["sh".into()])]);
    // Aliases of one option are not ambiguous.
    assert_eq!(longs("--q"), [("quiet", vec![])]);
    // `--c` fits check and compress-program.
    let args = v("--c");
    assert!(matches!(parse(&T, &args), Err(ParseError::Ambiguous(_))));
    let args = v("--numeric-sort=1");
    assert!(matches!(
        parse(&T, &args),
        Err(ParseError::UnexpectedValue(_))
    ));
    let args = v("--key");
    assert!(matches!(parse(&T, &args), Err(ParseError::MissingValue(_))));
    // An optional value is only ever attached.
    assert_eq!(
        longs("--check x"),
        [("check", vec![]), ("", vec!["x".to_string()])]
    );
}

#[test]
fn short_groups_and_attached_values() {
    assert_eq!(
        longs("-nrk2 f"),
        [
            ("numeric-sort", vec![]),
            ("reverse", vec![]),
            ("key", vec!["2".to_string()]),
            ("", vec!["f".to_string()])
        ]
    );
    assert_eq!(
        longs("-oevil.sh"),
        [("output", vec!["evil.sh".to_string()])]
    );
    assert_eq!(longs("-k -o"), [("key", vec!["-o".to_string()])]);
    let args = v("-nx");
    assert!(matches!(parse(&T, &args), Err(ParseError::Unknown(_))));
    let args = v("-nrk2");
    let items = parse(&T, &args).unwrap();
    let Item::Opt(f) = &items[2] else { panic!() };
    assert_eq!(f.attached_at, Some(4));
    // `--` ends the options.
    assert_eq!(
        longs("-- -o x"),
        [("", vec!["-o".to_string()]), ("", vec!["x".to_string()])]
    );
}

#[test]
fn loose_matching() {
    for (arg, listed) in [
        ("--se=x", "--set"),
        ("--s", "--set"),
        ("--recu", "--recursive"),
        ("-Rf", "-R"),
        ("-s2030", "-s"),
        ("-exec=x", "-exec"),
        ("--exec", "-exec"),
        ("drop", "drop"),
    ] {
        assert!(loose_hit(arg, listed), "{arg} should count as {listed}");
    }
    for (arg, listed) in [
        ("--", "--set"),
        ("--sex", "--set"),
        ("-x", "-s"),
        ("--s", "-s"),
        ("-executable", "-exec"),
        ("dropped", "drop"),
    ] {
        assert!(
            !loose_hit(arg, listed),
            "{arg} should not count as {listed}"
        );
    }
}

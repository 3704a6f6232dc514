//! The shell approval's scopes: each pattern matches the asked command; the narrower ones
//! nothing the user was not shown.
#![allow(clippy::unwrap_used)]
use super::*;
use crate::key::KeyPattern;

fn key(text: &str) -> CallKey {
    crate::exec::key_for_command(text).0
}

fn full() -> Confinement {
    Confinement {
        landlock: true,
        netns: true,
        view: true,
        mountns: true,
        ..Confinement::default()
    }
}

fn keys(text: &str) -> Vec<String> {
    shell_scopes(&key(text), &full())
        .into_iter()
        .map(|s| s.key)
        .collect()
}

#[test]
fn a_unittest_run_offers_exact_module_and_program() {
    let asked = "python3 -m unittest tests/test_window.py";
    let scopes = shell_scopes(&key(asked), &full());
    let k: Vec<&str> = scopes.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        k,
        [
            "shell:python3 -m unittest tests/test_window.py",
            "shell:python3 -m unittest **",
            "shell:python3"
        ]
    );
    assert_eq!(scopes[1].allows, "also any other unittest run");
    assert_eq!(
        scopes[2].allows,
        "any python3 command, whatever its arguments; it still runs confined: secret files stay hidden, .git hooks and config read-only, writes only in the workspace, no network"
    );
    for s in &scopes {
        assert!(
            KeyPattern::parse(&s.key).unwrap().matches(&key(asked)),
            "{}",
            s.key
        );
    }
    let other = key("python3 -m unittest tests/test_other.py");
    let code = key("python3 -c 'print(open(\".env\").read())'");
    let exact = KeyPattern::parse(&scopes[0].key).unwrap();
    let module = KeyPattern::parse(&scopes[1].key).unwrap();
    assert!(!exact.matches(&other));
    assert!(module.matches(&other));
    for p in [&exact, &module] {
        assert!(!p.matches(&code), "{}", p.as_str());
        assert!(!p.matches(&key("python3 -m http.server")), "{}", p.as_str());
        assert!(!p.matches(&key("python3 -m unittest tests/x.py; rm -rf x")));
    }
}

#[test]
fn code_flags_and_unsafe_words_narrow_the_offer() {
    // `-c`: no middle pattern; the code has quotes and spaces, so no exact one either.
    assert!(keys("python3 -c 'print(1)'").is_empty());
    assert_eq!(
        keys("python3 -c pass"),
        ["shell:python3 -c pass", "shell:python3"]
    );
    assert_eq!(keys("node -e 1"), ["shell:node -e 1", "shell:node"]);
    // A word with a space or a glob cannot be a pattern word: no exact scope.
    assert_eq!(
        keys("cargo test 'a b'"),
        ["shell:cargo test **", "shell:cargo"]
    );
    assert_eq!(keys("ls 'x*'"), Vec::<String>::new());
    // The program alone: nothing narrower.
    assert!(keys("make").is_empty());
    // Options before any subcommand word: only the exact command.
    assert_eq!(keys("ls -la sub"), ["shell:ls -la sub", "shell:ls"]);
    // At most three words after the program.
    assert_eq!(keys("cargo test a b c d")[1], "shell:cargo test a b **");
    // Compound commands are keyed on their text: nothing narrower.
    assert!(keys("make && make install").is_empty());
}

#[test]
fn the_confinement_sentence_says_only_what_holds() {
    let none = Confinement::default();
    assert_eq!(
        confined(&none),
        "it runs unconfined here: secret files are readable, it can write wherever you can, the network is reachable"
    );
    let mut net = full();
    net.netns = false;
    net.network_granted = true;
    assert!(confined(&net).ends_with("but the network is reachable"));
}

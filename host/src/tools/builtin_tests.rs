#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[test]
fn names_round_trip() {
    for b in Builtin::ALL {
        assert_eq!(Builtin::from_name(b.as_str()), Some(b));
    }
    assert_eq!(Builtin::from_name("plugin__read"), None);
    assert_eq!(Builtin::from_name("Read"), None);
}

/// The build script reads the table without a TOML parser; read as TOML, it gives the same
/// tools, names and variants, in the same order.
#[test]
fn the_enum_is_the_table_read_as_toml() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/builtins.toml");
    let table: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let rows: Vec<(String, String)> = table["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let field = |key: &str| row[key].as_str().unwrap().to_string();
            (field("name"), field("variant"))
        })
        .collect();
    let kinds: Vec<(String, String)> = Builtin::ALL
        .iter()
        .map(|b| (b.as_str().to_string(), format!("{b:?}")))
        .collect();
    assert_eq!(rows, kinds);
}

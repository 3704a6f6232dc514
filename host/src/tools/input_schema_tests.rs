#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use serde_json::json;

#[test]
fn only_keywords_with_one_meaning_are_draft_neutral() {
    let plain = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "a file", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
            "mode": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "either": {"anyOf": [{"type": "string"}, {"type": "null"}]}
        },
        "required": ["path"],
        "additionalProperties": false
    });
    assert!(draft_neutral(&plain));
    for (why, schema) in [
        (
            "$ref siblings are ignored in draft 7",
            json!({"$ref": "#/$defs/a", "type": "object"}),
        ),
        (
            "$defs is 2020-12 only",
            json!({"$defs": {"a": {"type": "string"}}}),
        ),
        (
            "$schema picks a dialect",
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}),
        ),
        (
            "draft 7 checks formats by default",
            json!({"type": "string", "format": "email"}),
        ),
        (
            "items as an array is a tuple in draft 7",
            json!({"items": [{"type": "string"}]}),
        ),
        (
            "prefixItems is 2020-12 only",
            json!({"prefixItems": [{"type": "string"}]}),
        ),
        (
            "draft 4's boolean exclusiveMinimum",
            json!({"minimum": 1, "exclusiveMinimum": true}),
        ),
        (
            "unevaluatedProperties is 2020-12 only",
            json!({"unevaluatedProperties": false}),
        ),
        (
            "dependentRequired is 2020-12 only",
            json!({"dependentRequired": {"a": ["b"]}}),
        ),
        (
            "deep inside properties",
            json!({"properties": {"a": {"properties": {"b": {"$ref": "#"}}}}}),
        ),
        (
            "deep inside anyOf",
            json!({"anyOf": [{"type": "string"}, {"format": "uri"}]}),
        ),
    ] {
        assert!(!draft_neutral(&schema), "{why}: {schema}");
    }
}

#[test]
fn a_builtin_schema_validates_the_same_inputs_either_way() {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "offset": {"type": "integer", "minimum": 0},
            "mode": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
        },
        "required": ["path"],
        "additionalProperties": false
    });
    let fast = validator(&schema, true).unwrap();
    let full = jsonschema::validator_for(&schema).unwrap();
    for input in [
        json!({"path": "a"}),
        json!({"path": ""}),
        json!({}),
        json!({"path": "a", "offset": -1}),
        json!({"path": "a", "offset": 1.5}),
        json!({"path": "a", "mode": "c"}),
        json!({"path": "a", "tags": ["x", "y", "z"]}),
        json!({"path": "a", "tags": [1]}),
        json!({"path": "a", "extra": true}),
        json!("not an object"),
    ] {
        assert_eq!(fast.is_valid(&input), full.is_valid(&input), "{input}");
    }
}

#[test]
fn a_schema_that_is_not_neutral_keeps_the_2020_12_meaning() {
    // `$defs` + `$ref`: draft 7 would ignore the `type` beside the `$ref`; 2020-12 applies both.
    let schema = json!({
        "$defs": {"s": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/s", "minLength": 2}}
    });
    for builtin in [true, false] {
        let v = validator(&schema, builtin).unwrap();
        assert!(!v.is_valid(&json!({"a": "x"})), "builtin={builtin}");
        assert!(!v.is_valid(&json!({"a": 1})), "builtin={builtin}");
        assert!(v.is_valid(&json!({"a": "xy"})), "builtin={builtin}");
    }
}

#[test]
fn the_warm_up_sample_uses_every_shared_keyword_and_is_neutral() {
    let sample = sample();
    assert!(draft_neutral(&sample));
    let text = sample.to_string();
    for keyword in SHARED {
        assert!(
            text.contains(&format!("\"{keyword}\":")),
            "the sample lacks {keyword}"
        );
    }
}

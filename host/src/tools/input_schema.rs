//! Compiling a tool's input schema into a validator.
//!
//! The `jsonschema` crate checks every schema against its dialect's meta-schema before
//! compiling it, and builds that meta-schema's validator once per process. For JSON Schema
//! 2020-12 (MCP's dialect) that costs ~12 ms (its `$dynamicRef`s and patterns are compiled into
//! automata); for draft 7 ~4 ms. A one-shot `toolgate call` starts a process per call, so the
//! built-in tools, whose schemas are the host's own and use only keywords that mean the same in
//! both dialects, are compiled as draft 7. Any other schema (plugins, extra components, a
//! built-in that one day uses a 2020-12-only keyword) is compiled as 2020-12, the same as
//! before: the shortcut never changes what an input is checked against.

use serde_json::Value;

/// Keywords that mean the same in JSON Schema draft 7 and 2020-12 when they hold the values
/// [`draft_neutral`] allows (`items` a single schema, never an array of them).
const SHARED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    // Annotations: no effect on validation in either dialect.
    "title",
    "description",
    "default",
    "examples",
];

/// Whether `schema` validates exactly the same inputs as draft 7 and as 2020-12: a boolean, or
/// an object of [`SHARED`] keywords only (no `$schema`, `$ref`, `$defs`, `format`, ...), with
/// every subschema the same.
pub fn draft_neutral(schema: &Value) -> bool {
    let map = match schema {
        Value::Bool(_) => return true,
        Value::Object(map) => map,
        _ => return false,
    };
    map.iter().all(|(key, value)| {
        if !SHARED.contains(&key.as_str()) {
            return false;
        }
        match key.as_str() {
            "properties" => value
                .as_object()
                .is_some_and(|props| props.values().all(draft_neutral)),
            "additionalProperties" | "items" | "not" => draft_neutral(value),
            "anyOf" | "oneOf" | "allOf" => value
                .as_array()
                .is_some_and(|all| !all.is_empty() && all.iter().all(draft_neutral)),
            // `exclusiveMinimum: true` is draft 4's form: not the same in either dialect.
            "exclusiveMinimum" | "exclusiveMaximum" | "minimum" | "maximum" | "multipleOf" => {
                value.is_number()
            }
            _ => true,
        }
    })
}

/// The validator of a tool's input schema. `builtin`: the schema is the host's own (a
/// draft-neutral one is then compiled as draft 7, see the module's note).
/// The error says why the schema is not a valid JSON Schema.
pub fn validator(schema: &Value, builtin: bool) -> Result<jsonschema::Validator, String> {
    let built = if builtin && draft_neutral(schema) {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft7)
            // Draft 7 would check `format`s by default, 2020-12 does not: keep them equal
            // (a draft-neutral schema has none anyway).
            .should_validate_formats(false)
            .build(schema)
    } else {
        jsonschema::validator_for(schema)
    };
    built.map_err(|e| e.to_string())
}

/// Build the meta-schema validators tool loads will need, on a thread of their own, once per
/// process: the draft 7 one for the built-ins; the 2020-12 one too unless `one_shot` (a
/// one-shot call of a plugin builds it when it loads the plugin). The meta-schema's validator
/// compiles the parts a schema reaches on first use, so the sample uses every shared keyword
/// (a bare `{"type": "object"}` left ~4 ms of it to the first tool load).
pub fn warm(one_shot: bool) {
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("toolgate-warm".into())
            .spawn(move || {
                let sample = sample();
                let _ = validator(&sample, true);
                if !one_shot {
                    let _ = jsonschema::validator_for(&sample);
                }
            });
    });
}

/// A schema with every keyword of [`SHARED`], each where a tool's schema would have it.
fn sample() -> Value {
    serde_json::json!({
        "type": "object",
        "title": "t",
        "description": "d",
        "properties": {
            "s": {"type": "string", "minLength": 1, "maxLength": 9, "pattern": "^a",
                  "default": "a", "examples": ["a"], "description": "d"},
            "n": {"type": "integer", "minimum": 0, "maximum": 9, "exclusiveMinimum": -1,
                  "exclusiveMaximum": 10, "multipleOf": 1},
            "e": {"enum": ["a"], "const": "a"},
            "a": {"type": "array", "items": {"type": "string"}, "minItems": 0, "maxItems": 9,
                  "uniqueItems": true},
            "o": {"type": "object", "minProperties": 0, "maxProperties": 9,
                  "additionalProperties": {"type": "boolean"}},
            "x": {"anyOf": [{"type": "string"}], "oneOf": [{"type": "string"}],
                  "allOf": [{"type": "string"}], "not": {"type": "null"}}
        },
        "required": ["s"],
        "additionalProperties": false
    })
}

#[cfg(test)]
#[path = "input_schema_tests.rs"]
mod tests;

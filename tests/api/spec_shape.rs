//! The shape of `openapi.yaml` that client generators need, held without the generators (tests/clients/run.sh runs
//! them in CI): a union of object schemas is a component of its own whose members are named components, told apart
//! by a discriminator whose mapping names each member once and whose property each member declares as a typed
//! constant. Generators that cannot tell inline members apart drop them (openapi-python-client did, and with them
//! every decision answer); a problem answer narrows `Problem.status` in a way the generators can merge. And the
//! richest model inputs the suite has, the golden files, fit `ModelInput`.

use serde_json::{Value, json};

use crate::openapi::{resolve, schema_errors, spec};

/// Every `oneOf`/`anyOf` in the spec, with the JSON pointer of the schema that holds it.
fn unions<'a>(value: &'a Value, pointer: String, found: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Object(map) => {
            if map.contains_key("oneOf") || map.contains_key("anyOf") {
                found.push((pointer.clone(), value));
            }
            for (key, inner) in map {
                unions(inner, format!("{pointer}/{key}"), found);
            }
        }
        Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                unions(inner, format!("{pointer}/{index}"), found);
            }
        }
        _ => {}
    }
}

fn is_object_schema(schema: &Value) -> bool {
    let schema = resolve(schema);
    schema["type"] == "object"
        || schema.get("properties").is_some()
        || schema.get("oneOf").is_some()
}

/// The one union that may not be told apart by a discriminator: an item of a Responses model input is one the
/// service wrote (`ResponsesItem`, itself a union told apart by `type`) or one a native run registered, kept as it
/// came (`NativeEntry`: any object; a short-form message has no `type` to tell it by). Generators try the members in
/// order, so a written item is still read as its own type (docs/design.md §14).
const WRITTEN_OR_REGISTERED: &str = "/components/schemas/ResponsesInputItem";

/// What is wrong with one union of objects, if anything.
fn union_faults(pointer: &str, union: &Value) -> Vec<String> {
    let mut faults = Vec::new();
    if pointer == WRITTEN_OR_REGISTERED {
        let members = json!([
            {"$ref": "#/components/schemas/ResponsesItem"},
            {"$ref": "#/components/schemas/NativeEntry"},
        ]);
        if union.get("anyOf") != Some(&members) {
            faults.push(format!(
                "{pointer}: anyOf [ResponsesItem, NativeEntry], in that order"
            ));
        }
        return faults;
    }
    if !pointer.starts_with("/components/schemas/") || pointer.matches('/').count() != 3 {
        faults.push(format!(
            "{pointer}: a union of objects inline; make it a component of its own"
        ));
    }
    if union.get("anyOf").is_some() {
        faults.push(format!(
            "{pointer}: anyOf over objects; use oneOf with a discriminator"
        ));
    }
    let members = union["oneOf"].as_array().cloned().unwrap_or_default();
    let mut references = Vec::new();
    for member in &members {
        match member["$ref"].as_str() {
            Some(reference) => references.push(reference.to_owned()),
            None => faults.push(format!(
                "{pointer}: an inline member {member}; name it in components"
            )),
        }
    }
    let Some(property) = union
        .pointer("/discriminator/propertyName")
        .and_then(Value::as_str)
    else {
        faults.push(format!("{pointer}: no discriminator"));
        return faults;
    };
    let mapping = union
        .pointer("/discriminator/mapping")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut mapped: Vec<String> = mapping
        .values()
        .map(|target| target.as_str().unwrap_or_default().to_owned())
        .collect();
    mapped.sort();
    references.sort();
    if mapped != references {
        faults.push(format!(
            "{pointer}: the mapping names {mapped:?}, the members are {references:?}"
        ));
    }
    for (value, target) in &mapping {
        let reference = json!({ "$ref": target });
        let member = resolve(&reference);
        let declared = &member["properties"][property];
        let constant = declared["const"] == *value
            || declared["enum"]
                .as_array()
                .is_some_and(|values| values == std::slice::from_ref(value));
        if declared["type"] != "string" || !constant {
            faults.push(format!(
                "{pointer}: {target} does not declare `{property}` as a string that is always {value:?}: {declared}"
            ));
        }
        let required = member["required"].as_array();
        if !required.is_some_and(|required| required.contains(&json!(property))) {
            faults.push(format!("{pointer}: {target} does not require `{property}`"));
        }
    }
    faults
}

#[test]
fn every_union_of_objects_is_a_named_component_told_apart_by_a_discriminator() {
    let mut found = Vec::new();
    unions(spec(), String::new(), &mut found);
    let of_objects: Vec<_> = found
        .into_iter()
        .filter(|(_, union)| {
            let members = union.get("oneOf").or_else(|| union.get("anyOf"));
            members
                .and_then(Value::as_array)
                .is_some_and(|members| members.iter().any(is_object_schema))
        })
        .collect();
    assert!(
        of_objects
            .iter()
            .any(|(pointer, _)| pointer == "/components/schemas/ModelInput"),
        "the walk finds the unions"
    );
    let faults: Vec<String> = of_objects
        .iter()
        .flat_map(|(pointer, union)| union_faults(pointer, union))
        .collect();
    assert!(faults.is_empty(), "{faults:#?}");
}

/// Every `properties.status` that a member of an `allOf` sets beside the `Problem` it narrows, with its pointer.
fn problem_status_narrowings<'a>(
    value: &'a Value,
    pointer: String,
    found: &mut Vec<(String, &'a Value)>,
) {
    match value {
        Value::Object(map) => {
            let members = map.get("allOf").and_then(Value::as_array);
            let members = members.map(Vec::as_slice).unwrap_or_default();
            let problem = json!({"$ref": "#/components/schemas/Problem"});
            if members.contains(&problem) {
                for (index, member) in members.iter().enumerate() {
                    if let Some(status) = member.pointer("/properties/status") {
                        found.push((format!("{pointer}/allOf/{index}/properties/status"), status));
                    }
                }
            }
            for (key, inner) in map {
                problem_status_narrowings(inner, format!("{pointer}/{key}"), found);
            }
        }
        Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                problem_status_narrowings(inner, format!("{pointer}/{index}"), found);
            }
        }
        _ => {}
    }
}

#[test]
fn a_problem_answer_narrows_its_status_with_an_integer_enum() {
    // `Problem.status` is an integer; openapi-python-client merges an `allOf` property by property and cannot merge
    // that integer with an untyped `const`, so it dropped every error answer of every operation. A one-value
    // integer `enum` merges, and says the same.
    let mut found = Vec::new();
    problem_status_narrowings(spec(), String::new(), &mut found);
    assert!(found.len() > 10, "the walk finds the problem answers");
    let faults: Vec<String> = found
        .iter()
        .filter(|(_, status)| {
            let single = status["enum"]
                .as_array()
                .is_some_and(|values| values.len() == 1);
            status["type"] != "integer" || !single || status.get("const").is_some()
        })
        .map(|(pointer, status)| {
            format!("{pointer}: {status}; write `type: integer` and `enum: [NNN]`")
        })
        .collect();
    assert!(faults.is_empty(), "{faults:#?}");
}

#[test]
fn the_golden_model_inputs_fit_the_model_input_schema() {
    // tests/api/formats.rs holds the service's answers for a two-turn run to these files: system and assistant texts,
    // a turn answered inside the transcript and one answered by the service, in all three formats.
    let directory = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    for format in ["openai-chat", "anthropic", "openai-responses"] {
        let path = directory.join(format!("model_input.{format}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path:?}: {error}"));
        let golden: Value = serde_json::from_str(&text).expect("a golden file is JSON");
        let errors = schema_errors(&json!({"$ref": "#/components/schemas/ModelInput"}), &golden);
        assert!(errors.is_empty(), "{format}: {errors:#?}");
    }
}

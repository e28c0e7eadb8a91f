//! A request body's optional member that `openapi.yaml` does not type nullable is refused when it is `null`, not read
//! as absent (schemathesis ST201, issue 50): `remember_until: null` was a decision accepted against the spec. Every
//! such member of every request body the spec documents is sent as `null` here, and the list of them is taken from
//! the spec, so a member added later without a case here fails the test.

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::openapi::{resolve, schema_errors, spec};
use crate::support::{self, call, transcript};

/// The request bodies' schemas, and the schemas of the objects their arrays hold, with the optional members whose
/// schema refuses `null`: `(schema, member)`, the schema by its name (an inline one by its parent's and member's).
fn members_not_nullable() -> BTreeSet<(String, String)> {
    let mut found = BTreeSet::new();
    let paths = spec()["paths"].as_object().unwrap();
    let mut schemas: Vec<(String, &Value)> = Vec::new();
    for item in paths.values() {
        for operation in item.as_object().unwrap().values() {
            let body = operation.pointer("/requestBody/content/application~1json/schema");
            if let Some(body) = body {
                let reference = body["$ref"]
                    .as_str()
                    .expect("request bodies are named schemas");
                let name = reference.rsplit('/').next().unwrap().to_owned();
                schemas.push((name, resolve(body)));
            }
        }
    }
    while let Some((name, schema)) = schemas.pop() {
        let required = schema
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (member, member_schema) in schema["properties"].as_object().unwrap() {
            if let Some(items) = resolve(member_schema).get("items") {
                let items_name = match items.get("$ref").and_then(Value::as_str) {
                    Some(reference) => reference.rsplit('/').next().unwrap().to_owned(),
                    None => format!("{name}.{member}"),
                };
                let items = resolve(items);
                if items.get("properties").is_some()
                    && !schemas.iter().any(|(n, _)| *n == items_name)
                {
                    schemas.push((items_name, items));
                }
            }
            let optional = !required.iter().any(|r| r == member);
            if optional && !schema_errors(member_schema, &Value::Null).is_empty() {
                found.insert((name.clone(), member.clone()));
            }
        }
    }
    found
}

/// A registration body that is well typed in every member.
fn registration() -> Value {
    json!({"id": Uuid::new_v4(), "owner_uid": 7,
           "messages": transcript(vec![call("call_1", "read_page", "{}")])})
}

/// `(schema, member, method, path, body)`: a body of that route, well typed but for the member, `null`.
fn cases() -> Vec<(&'static str, &'static str, Method, String, Value)> {
    let run = Uuid::new_v4();
    let decision = format!("/v1/runs/{run}/decision");
    let digest = "0".repeat(64);
    let with = |mut body: Value, member: &str| {
        body[member] = Value::Null;
        body
    };
    let mut cases = Vec::new();
    for member in [
        "format",
        "messages",
        "system",
        "instructions",
        "input",
        "system_instruction",
        "contents",
        "tools",
        // A run's label (docs/design.md §2).
        "source",
        "privacy_level",
        "require_second_approver",
        "expires_at",
        "approval_ttl_secs",
        "notify",
    ] {
        let mut body = registration();
        if member == "messages" {
            body.as_object_mut().unwrap().remove("messages");
        }
        cases.push((
            "RegisterRun",
            member,
            Method::POST,
            "/v1/runs".to_owned(),
            with(body, member),
        ));
    }
    for member in ["executor", "editable"] {
        let mut body = registration();
        body["tools"] = json!([with(json!({"name": "read_page", "effect": "read"}), member)]);
        cases.push((
            "DeclaredTool",
            member,
            Method::POST,
            "/v1/runs".to_owned(),
            body,
        ));
    }
    let whole = json!({"approved": false, "decider_uid": 7, "turn_digest": digest});
    for member in ["approved", "calls", "remember", "remember_until"] {
        let mut body = with(whole.clone(), member);
        if member == "approved" {
            body["calls"] = json!([{"call_id": "call_1", "approved": false}]);
        }
        cases.push(("DecisionBody", member, Method::POST, decision.clone(), body));
    }
    let per_call = json!({"decider_uid": 7, "turn_digest": digest,
                          "calls": [{"call_id": "call_1", "approved": false, "remember": null}]});
    cases.push((
        "CallVerdictBody",
        "remember",
        Method::POST,
        decision.clone(),
        per_call,
    ));
    let turn = json!({"messages": [{"role": "user", "content": "again"}]});
    for member in [
        "messages",
        "input",
        "contents",
        "expires_at",
        "approval_ttl_secs",
        "notify",
    ] {
        let mut body = turn.clone();
        if member == "messages" {
            body = json!({});
        }
        cases.push((
            "AppendTurn",
            member,
            Method::POST,
            format!("/v1/runs/{run}/turns"),
            with(body, member),
        ));
    }
    let results = json!({"results": [{"call_id": "call_1", "content": "done", "is_error": false}]});
    cases.push((
        "PostResults",
        "claim_id",
        Method::POST,
        format!("/v1/runs/{run}/results"),
        with(results, "claim_id"),
    ));
    cases.push((
        "ClaimRun",
        "claim_id",
        Method::POST,
        format!("/v1/runs/{run}/claim"),
        json!({"claim_id": null}),
    ));
    let run_rule = json!({"created_by": 7, "tool": "edit_page", "verdict": "deny"});
    let owner_rule = json!({"owner_uid": 7, "created_by": 7, "tool": "edit_page", "verdict": "deny",
                            "expires_at": "2099-01-01T00:00:00Z"});
    for member in ["arguments", "reason"] {
        cases.push((
            "RunRuleBody",
            member,
            Method::POST,
            format!("/v1/runs/{run}/rules"),
            with(run_rule.clone(), member),
        ));
        cases.push((
            "OwnerRuleBody",
            member,
            Method::POST,
            "/v1/rules".to_owned(),
            with(owner_rule.clone(), member),
        ));
    }
    cases
}

#[tokio::test]
async fn every_optional_member_the_spec_does_not_type_nullable_is_refused_when_null() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let cases = cases();
    let covered: BTreeSet<(String, String)> = cases
        .iter()
        .map(|(schema, member, ..)| (schema.to_string(), member.to_string()))
        .collect();
    assert_eq!(
        covered,
        members_not_nullable(),
        "every optional member the spec does not type nullable has a case, and no other"
    );
    let mut accepted = Vec::new();
    for (schema, member, method, path, body) in cases {
        let answer = app
            .call(method, &path, Some(&app.admin_key), Some(body.clone()))
            .await;
        // Refused as a body that does not fit the spec: a member of the wrong type (422 `invalid_body`; `format`'s
        // enum is read before the body's other members, 400 `malformed_json`), or `arguments` that are no object.
        // Anything else is the route at work on a body it took: the null read as absent.
        let refused = matches!(
            (answer.status, answer.code()),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body" | "arguments_not_object"
            ) | (StatusCode::BAD_REQUEST, "malformed_json")
        );
        if !refused {
            accepted.push(format!(
                "{schema}.{member}: {} {}",
                answer.status, answer.body
            ));
        }
    }
    assert!(
        accepted.is_empty(),
        "null read as absent:\n{}",
        accepted.join("\n")
    );
}

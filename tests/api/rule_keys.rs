//! A remembered decision's arguments under encryption at rest (docs/design.md §18, §11): sealed when keys are set,
//! counted by `keys status`, re-sealed by `keys rotate`, and still matching calls once the old key is gone.

use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::encryption::{OLD_KEYS, command, with_keys};
use crate::remembered_rules::{OWNER, people, resumed_run, run_rule};
use crate::support::TestApp;

const NEW_KEY: &str = "new:HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=";
const CANARY: &str = "CANARYrule5e21b4";

/// A rule's stored argument columns: (arguments, arguments_sealed).
async fn stored(pool: &PgPool, id: &str) -> (Option<String>, Option<Vec<u8>>) {
    sqlx::query_as("select arguments, arguments_sealed from remembered_rules where id = $1::uuid")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The count `keys status` prints for `remembered_rules.arguments` under `key` ("(clear)" or a key id), if any.
fn counted(status: &str, key: &str) -> Option<String> {
    status
        .lines()
        .find(|line| line.starts_with("remembered_rules.arguments ") && line.contains(key))
        .map(|line| line.split_whitespace().last().unwrap().to_owned())
}

/// A deny rule on `run` for `edit_page` with the canary as its arguments; its id.
async fn canary_rule(app: &TestApp, run: Uuid) -> String {
    let made = run_rule(
        app,
        run,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny",
               "arguments": {"page": 13, "note": CANARY}}),
    )
    .await;
    made.body["id"].as_str().expect("a rule id").to_owned()
}

#[tokio::test]
async fn rule_arguments_are_sealed_counted_resealed_and_still_match_under_the_new_key_alone() {
    let (database, pool) = TestDatabase::create().await;
    let plain = people(pool.clone()).await;
    let keyed = with_keys(&plain, OLD_KEYS);
    let clear_run = resumed_run(&plain).await;
    let clear_rule = canary_rule(&plain, clear_run).await;
    let sealed_run = resumed_run(&keyed).await;
    let sealed_rule = canary_rule(&keyed, sealed_run).await;

    let (clear, sealed) = stored(&pool, &clear_rule).await;
    assert!(clear.as_deref().is_some_and(|text| text.contains(CANARY)));
    assert!(sealed.is_none());
    let (clear, sealed) = stored(&pool, &sealed_rule).await;
    assert!(clear.is_none(), "arguments stored in clear under keys");
    let sealed = sealed.expect("sealed arguments");
    assert!(!String::from_utf8_lossy(&sealed).contains(CANARY));

    let status = command(&database, OLD_KEYS, &["keys", "status"]).await;
    assert_eq!(
        counted(&status, "(clear)").as_deref(),
        Some("1"),
        "{status}"
    );
    assert_eq!(counted(&status, " old ").as_deref(), Some("1"), "{status}");

    let both = format!("{NEW_KEY},{OLD_KEYS}");
    command(&database, &both, &["keys", "rotate"]).await;
    let status = command(&database, &both, &["keys", "status"]).await;
    assert_eq!(counted(&status, " new ").as_deref(), Some("2"), "{status}");
    assert_eq!(counted(&status, "(clear)"), None, "{status}");
    assert_eq!(counted(&status, " old "), None, "{status}");
    for rule in [&clear_rule, &sealed_rule] {
        let (clear, sealed) = stored(&pool, rule).await;
        assert!(clear.is_none() && sealed.is_some());
    }

    // With the new key alone, both rules still decide the call whose arguments equal theirs.
    let new_only = with_keys(&plain, NEW_KEY);
    for run in [clear_run, sealed_run] {
        let next = json!({"messages": [
            {"role": "user", "content": "again"},
            {"role": "assistant", "content": null, "tool_calls": [crate::support::call(
                "next_0", "edit_page", &json!({"page": 13, "note": CANARY}).to_string())]},
        ]});
        let decided = new_only.post(&format!("/v1/runs/{run}/turns"), next).await;
        assert_eq!(decided.body["status"], "resumed", "{:?}", decided.body);
    }
}

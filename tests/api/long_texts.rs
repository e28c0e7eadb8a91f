//! Long texts are compressed with lz4 where the server offers it (migration 0018): the columns that hold a
//! transcript, a call's arguments and result, the worker's state and a tool event's payloads name lz4, and the
//! values a registration stores there are compressed with it; on a server without lz4 they stay pglz.

use serde_json::json;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support;

/// The columns migration 0018 gives lz4.
const LONG_TEXT_COLUMNS: [(&str, &str); 8] = [
    ("runs", "messages"),
    ("runs", "system"),
    ("runs", "worker_state"),
    ("turn_calls", "arguments"),
    ("turn_calls", "edited_arguments"),
    ("turn_calls", "content"),
    ("tool_events", "arguments"),
    ("tool_events", "result"),
];

/// A paragraph of prose `bytes` long: compressible, as a conversation is, and far over TOAST's 2 KB threshold.
fn prose(bytes: usize) -> String {
    let words = [
        "the", "order", "was", "refunded", "after", "the", "customer", "asked", "twice", "about",
        "it",
    ];
    let mut text = String::new();
    let mut i = 0;
    while text.len() < bytes {
        text.push_str(words[i % words.len()]);
        text.push_str(if i % 13 == 12 { ". " } else { " " });
        i += 1;
    }
    text
}

#[tokio::test]
async fn a_long_transcript_and_long_arguments_are_stored_with_lz4_where_the_server_offers_it() {
    let (_database, pool) = TestDatabase::create().await;
    let offers_lz4: bool = sqlx::query_scalar(
        "select exists (select from pg_settings
                        where name = 'default_toast_compression' and 'lz4' = any (enumvals))",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let expected = if offers_lz4 { "lz4" } else { "pglz" };

    for (table, column) in LONG_TEXT_COLUMNS {
        // attcompression: 'l' for lz4, '\0' (shown as the empty string) for the server's default, pglz.
        let method: String = sqlx::query_scalar(
            "select attcompression::text from pg_attribute
             where attrelid = $1::regclass and attname = $2 and not attisdropped",
        )
        .bind(table)
        .bind(column)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(
            method,
            if offers_lz4 { "l" } else { "" },
            "{table}.{column}"
        );
    }

    let app = support::app(pool.clone()).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let arguments = json!({"page": 12, "description": prose(12_000)}).to_string();
    let mut messages = support::transcript(vec![support::call(
        "call_1",
        "update_page_metadata",
        &arguments,
    )]);
    messages[1] = json!({"role": "user", "content": prose(30_000)});
    app.register(json!({
        "id": id,
        "owner_uid": 7,
        "messages": messages,
        "tools": [{"name": "update_page_metadata", "effect": "write"}],
    }))
    .await;

    let (transcript, call_arguments): (Option<String>, Option<String>) = sqlx::query_as(
        "select pg_column_compression(r.messages), pg_column_compression(c.arguments)
         from runs r join turn_calls c on c.run_id = r.id where r.id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(transcript.as_deref(), Some(expected), "the transcript");
    assert_eq!(
        call_arguments.as_deref(),
        Some(expected),
        "the call's arguments"
    );
}

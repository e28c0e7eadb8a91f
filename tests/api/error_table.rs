//! docs/errors.md's table of codes held to the contract: every code of `openapi.yaml`'s `Problem.code` (which
//! `openapi::every_problem_code_in_the_source_is_listed_in_the_spec_and_back` holds to what src/ answers) has one row,
//! with the status the spec documents it under, and the table names no other code. The failures say which code
//! is missing where, so that whoever adds a code knows the row to write.

use std::collections::{BTreeMap, BTreeSet};

use axum::http::Method;

use crate::openapi::{documented_answers, operation, spec, spec_operations, strings};

const TABLE: &str = include_str!("../../docs/errors.md");

/// The rows of the table under `## Every code`: code and status, in the order written.
fn rows(document: &str) -> Vec<(String, u16)> {
    let table = document
        .split("\n## Every code\n")
        .nth(1)
        .expect("docs/errors.md has a section `## Every code`");
    let table = table.split("\n## ").next().unwrap_or(table);
    table
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let code = cells[1].trim_matches('`').to_owned();
            let status = cells[2].parse().unwrap_or_else(|_| {
                panic!("docs/errors.md: the status of `{code}` is no number: {line}")
            });
            (code, status)
        })
        .collect()
}

/// Each code of the spec with the statuses its operations document it under (none for a code answered outside
/// any operation, such as `too_many_connections` before a request is read).
fn documented() -> BTreeMap<String, BTreeSet<u16>> {
    let listed = strings(&spec()["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]);
    let mut statuses: BTreeMap<String, BTreeSet<u16>> = listed
        .into_iter()
        .map(|code| (code, BTreeSet::new()))
        .collect();
    for (method, template) in spec_operations() {
        let method: Method = method.parse().expect("a method");
        for (status, code) in documented_answers(operation(&method, &template)) {
            if let Some(known) = statuses.get_mut(&code) {
                known.insert(status);
            }
        }
    }
    statuses
}

/// What differs between the table and the spec, as sentences naming the code and the fix.
fn differences(
    rows: &[(String, u16)],
    documented: &BTreeMap<String, BTreeSet<u16>>,
) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    for (code, status) in rows {
        if !seen.insert(code.as_str()) {
            found.push(format!("docs/errors.md lists `{code}` twice: keep one row"));
        }
        match documented.get(code) {
            None => found.push(format!(
                "docs/errors.md lists `{code}`, which is no Problem.code in openapi.yaml: remove the row, or add \
                 the code to openapi.yaml (and answer it from src/)"
            )),
            Some(statuses) if !statuses.is_empty() && !statuses.contains(status) => found.push(format!(
                "docs/errors.md gives `{code}` the status {status}; openapi.yaml documents it as {statuses:?}"
            )),
            Some(_) => {}
        }
    }
    for (code, statuses) in documented {
        if !seen.contains(code.as_str()) {
            let status = statuses
                .first()
                .map_or_else(|| "STATUS".to_owned(), u16::to_string);
            found.push(format!(
                "`{code}` is answered (openapi.yaml's Problem.code) but docs/errors.md has no row for it: add \
                 `| \\`{code}\\` | {status} | when | what to do |` to its table `## Every code`"
            ));
        }
    }
    found
}

#[test]
fn every_error_code_has_one_row_in_docs_errors_md_with_its_documented_status() {
    let found = differences(&rows(TABLE), &documented());
    assert!(found.is_empty(), "\n{}", found.join("\n"));
}

#[test]
fn a_code_missing_from_the_table_or_extra_in_it_is_named() {
    let documented = BTreeMap::from([
        ("claimed".to_owned(), BTreeSet::from([409])),
        ("stale_turn".to_owned(), BTreeSet::from([409])),
    ]);
    let rows = vec![("stale_turn".to_owned(), 422), ("gone".to_owned(), 410)];
    let found = differences(&rows, &documented);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0].contains("gives `stale_turn` the status 422"),
        "{}",
        found[0]
    );
    assert!(
        found[1].contains("lists `gone`, which is no Problem.code"),
        "{}",
        found[1]
    );
    assert!(
        found[2].contains("`claimed` is answered") && found[2].contains("| 409 |"),
        "{}",
        found[2]
    );
}

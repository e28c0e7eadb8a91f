"""A check of this service's own contract, which tests/fuzz/run.sh adds to Schemathesis' built-in ones.

Registering a run or appending a turn has rules no JSON Schema states (the last message is the turn that waits,
tool-call ids are unique, the owner exists), so the fuzz lets those two operations answer a schema-valid request
422 (see schemathesis.toml). What it must never do, there or anywhere, is refuse a request the spec takes for its
form: `invalid_body`, `invalid_query` and `malformed_json` are for requests the spec refuses too.
"""

import schemathesis

FORM_CODES = {"invalid_body", "invalid_query", "malformed_json", "bad_request"}


@schemathesis.check
def schema_valid_requests_are_not_refused_for_their_form(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    if not response.headers.get("content-type", [""])[0].startswith("application/problem+json"):
        return None
    try:
        problem = response.json()
    except ValueError:
        return None
    code = problem.get("code") if isinstance(problem, dict) else None
    if code in FORM_CODES:
        raise AssertionError(
            f"a request that fits the spec was refused as {code}: {problem.get('detail')}"
        )
    return None

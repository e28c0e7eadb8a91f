//! Optional members of request bodies that `openapi.yaml` does not type nullable: absent is `None`, and `null` is
//! refused (422 `invalid_body`, as any member of the wrong type) rather than read as absent, as a plain `Option`
//! reads it (schemathesis ST201: `remember_until: null` was a decision accepted against the spec). A member the spec
//! types nullable stays a plain `Option`, or `integer::json_or_null`.

use serde::{Deserialize, Deserializer};

/// `#[serde(default, deserialize_with = "…")]` for an `Option<T>` member that may be absent but, when present, must
/// be a `T`. No more work than the `Option` for a present value.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

//! A snapshot of the crate's public surface (docs/design.md §3): the token constants, the wire names of every public
//! enum, and the enums of `openapi.yaml` that repeat them. A renamed token or an added variant fails here, where
//! its clients (the model, the chat frontend, the auditors) would otherwise find out.
//!
//! Each list below is written out by hand and checked against an exhaustive `match`, so a new variant does not
//! compile until it is added to the snapshot.

use std::collections::BTreeSet;

use approval_resume::domain::model_input::ModelInputFormat;
use approval_resume::domain::scopes::Scope;
use approval_resume::http::ops::OPENAPI_YAML;
use approval_resume::vocabulary::{
    self, DecidedBy, DenialReason, Effect, Outcome, PrivacyLevel, RunStatus,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The values of an enum schema in `components.schemas` of openapi.yaml.
fn spec_enum(schema: &str) -> Vec<String> {
    let spec: Value = serde_yaml::from_str(OPENAPI_YAML).expect("openapi.yaml parses");
    let values = spec["components"]["schemas"][schema]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("openapi.yaml has no enum schema {schema}"));
    values
        .iter()
        .map(|value| value.as_str().expect("enum values are strings").to_owned())
        .collect()
}

/// Asserts that every variant serializes to its snapshot name, and that the spec lists exactly those names.
fn assert_wire_names<T: Serialize + std::fmt::Debug>(schema: &str, snapshot: &[(T, &str)]) {
    for (variant, name) in snapshot {
        let wire = serde_json::to_value(variant).unwrap();
        assert_eq!(wire, *name, "{variant:?} is sent as {wire}");
    }
    let names: BTreeSet<&str> = snapshot.iter().map(|(_, name)| *name).collect();
    assert_eq!(
        names.len(),
        snapshot.len(),
        "{schema}: two variants share a name"
    );
    let listed = spec_enum(schema);
    assert_eq!(
        listed,
        snapshot.iter().map(|(_, name)| *name).collect::<Vec<_>>(),
        "openapi.yaml {schema} lists other values, or in another order"
    );
}

/// Asserts that every snapshot name reads back as its variant.
fn assert_read_back<T: DeserializeOwned + PartialEq + std::fmt::Debug>(snapshot: &[(T, &str)]) {
    for (variant, name) in snapshot {
        let read: T = serde_json::from_value(Value::from(*name)).unwrap();
        assert_eq!(read, *variant);
    }
}

#[test]
fn the_token_constants_are_the_strings_the_model_reads() {
    assert_eq!(vocabulary::APPROVAL_DENIED, "approval_denied");
    assert_eq!(vocabulary::RUN_OWNER, "run_owner");
    assert_eq!(vocabulary::OTHER_USER, "other_user");
    assert_eq!(vocabulary::UNKNOWN, "unknown");
    assert_eq!(vocabulary::VARIANT, "variant");
    assert_eq!(vocabulary::SKIP, "skip");
    assert_eq!(vocabulary::APPROVAL_EDITED, "approval_edited");
    assert_eq!(vocabulary::APPROVAL_EXPIRED, "approval_expired");
}

#[test]
fn decided_by_is_sent_as_its_tokens_and_listed_so_in_the_spec() {
    let snapshot = [
        (DecidedBy::RunOwner, "run_owner"),
        (DecidedBy::OtherUser, "other_user"),
        (DecidedBy::Unknown, "unknown"),
    ];
    for (by, _) in &snapshot {
        // Exhaustive: a new variant fails to compile until the snapshot has it.
        let constant = match by {
            DecidedBy::RunOwner => vocabulary::RUN_OWNER,
            DecidedBy::OtherUser => vocabulary::OTHER_USER,
            DecidedBy::Unknown => vocabulary::UNKNOWN,
        };
        assert_eq!(by.as_str(), constant);
        assert_eq!(DecidedBy::parse(constant), Some(*by));
    }
    assert_wire_names("DecidedBy", &snapshot);
    assert_read_back(&snapshot);
}

#[test]
fn denial_reasons_are_sent_as_their_tokens_and_listed_so_in_the_spec() {
    let snapshot = [
        (DenialReason::Variant, "variant"),
        (DenialReason::Skip, "skip"),
    ];
    for (reason, _) in &snapshot {
        let constant = match reason {
            DenialReason::Variant => vocabulary::VARIANT,
            DenialReason::Skip => vocabulary::SKIP,
        };
        assert_eq!(reason.as_str(), constant);
        assert_eq!(DenialReason::parse(constant), Some(*reason));
    }
    assert_wire_names("DenialReason", &snapshot);
    assert_read_back(&snapshot);
}

#[test]
fn outcomes_keep_their_names_in_the_code_and_the_spec() {
    let snapshot = [
        (Outcome::Ok, "ok"),
        (Outcome::Failed, "failed"),
        (Outcome::Denied, "denied"),
        (Outcome::NotPermitted, "not_permitted"),
        (Outcome::Interrupted, "interrupted"),
        (Outcome::Expired, "expired"),
    ];
    for (outcome, name) in &snapshot {
        match outcome {
            Outcome::Ok
            | Outcome::Failed
            | Outcome::Denied
            | Outcome::NotPermitted
            | Outcome::Interrupted
            | Outcome::Expired => assert_eq!(outcome.as_str(), *name),
        }
        assert_eq!(Outcome::parse(name), Some(*outcome));
    }
    assert_wire_names("Outcome", &snapshot);
    assert_read_back(&snapshot);
}

#[test]
fn effects_keep_their_names_in_the_code_and_the_spec() {
    let snapshot = [(Effect::Read, "read"), (Effect::Write, "write")];
    for (effect, name) in &snapshot {
        match effect {
            Effect::Read | Effect::Write => assert_eq!(effect.as_str(), *name),
        }
        assert_eq!(Effect::parse(name), Some(*effect));
    }
    assert_wire_names("Effect", &snapshot);
    assert_read_back(&snapshot);
}

#[test]
fn run_statuses_keep_their_names_in_the_code_and_the_spec() {
    let snapshot = [
        (RunStatus::WaitingForApproval, "waiting_for_approval"),
        (RunStatus::Resuming, "resuming"),
        (RunStatus::Released, "released"),
        (RunStatus::Resumed, "resumed"),
        (RunStatus::Cancelled, "cancelled"),
        (RunStatus::Completed, "completed"),
    ];
    for (status, name) in &snapshot {
        match status {
            RunStatus::WaitingForApproval
            | RunStatus::Resuming
            | RunStatus::Released
            | RunStatus::Resumed
            | RunStatus::Cancelled
            | RunStatus::Completed => assert_eq!(status.as_str(), *name),
        }
        assert_eq!(RunStatus::parse(name), Some(*status));
    }
    assert_wire_names("RunStatus", &snapshot);
    assert_read_back(&snapshot);
}

#[test]
fn privacy_levels_keep_their_names_strictest_first_in_the_code_and_the_spec() {
    let snapshot = [
        (PrivacyLevel::None, "none"),
        (PrivacyLevel::Metadata, "metadata"),
        (PrivacyLevel::Redacted, "redacted"),
        (PrivacyLevel::Full, "full"),
    ];
    for (level, name) in &snapshot {
        match level {
            PrivacyLevel::None
            | PrivacyLevel::Metadata
            | PrivacyLevel::Redacted
            | PrivacyLevel::Full => assert_eq!(level.as_str(), *name),
        }
        assert_eq!(PrivacyLevel::parse(name), Some(*level));
    }
    let levels: Vec<PrivacyLevel> = snapshot.iter().map(|(level, _)| *level).collect();
    assert!(
        levels.is_sorted(),
        "strictest first, as the `stricter` rule relies on"
    );
    // The service's level when PRIVACY_LEVEL is unset; a run without a level of its own gets the service's level.
    let unset = <approval_resume::config::Cli as clap::Parser>::try_parse_from(["approval-resume"])
        .expect("no settings needed");
    assert_eq!(unset.serve.privacy_level, PrivacyLevel::Metadata);
    assert_wire_names("PrivacyLevel", &snapshot);
    assert_read_back(&snapshot);
}

#[test]
fn scopes_keep_their_names_in_the_code_and_the_spec() {
    let snapshot = [
        (Scope::RunsWrite, "runs:write"),
        (Scope::RunsRead, "runs:read"),
        (Scope::UsersWrite, "users:write"),
        (Scope::DecisionsWrite, "decisions:write"),
        (Scope::DecisionsAnonymous, "decisions:anonymous"),
        (Scope::ApprovalsRead, "approvals:read"),
        (Scope::MetricsRead, "metrics:read"),
        (Scope::EventsRead, "events:read"),
        (Scope::WebhooksWrite, "webhooks:write"),
    ];
    for (scope, name) in &snapshot {
        match scope {
            Scope::RunsWrite
            | Scope::RunsRead
            | Scope::UsersWrite
            | Scope::DecisionsWrite
            | Scope::DecisionsAnonymous
            | Scope::ApprovalsRead
            | Scope::MetricsRead
            | Scope::EventsRead
            | Scope::WebhooksWrite => assert_eq!(scope.as_str(), *name),
        }
        assert_eq!(Scope::parse(name), Some(*scope));
    }
    let all: Vec<Scope> = snapshot.iter().map(|(scope, _)| *scope).collect();
    assert_eq!(
        Scope::ALL.to_vec(),
        all,
        "Scope::ALL lists every scope, in this order"
    );
    assert_wire_names("Scope", &snapshot);
}

#[test]
fn model_input_formats_keep_their_names_in_the_code_and_the_spec() {
    let snapshot = [
        (ModelInputFormat::OpenAiChat, "openai-chat"),
        (ModelInputFormat::Anthropic, "anthropic"),
        (ModelInputFormat::OpenAiResponses, "openai-responses"),
        (ModelInputFormat::Gemini, "gemini"),
    ];
    for (format, name) in &snapshot {
        match format {
            ModelInputFormat::OpenAiChat
            | ModelInputFormat::Anthropic
            | ModelInputFormat::OpenAiResponses
            | ModelInputFormat::Gemini => assert_eq!(format.as_str(), *name),
        }
        assert_eq!(ModelInputFormat::parse(name), Some(*format));
    }
    assert_eq!(ModelInputFormat::default(), ModelInputFormat::OpenAiChat);
    assert_wire_names("ModelInputFormat", &snapshot);
    assert_read_back(&snapshot);

    // The model input is a oneOf discriminated by `format`: one schema per name, each holding its own name.
    let spec: Value = serde_yaml::from_str(OPENAPI_YAML).unwrap();
    let schemas = &spec["components"]["schemas"];
    assert_eq!(schemas["ModelInputFormat"]["default"], "openai-chat");
    let discriminator = &schemas["ModelInput"]["discriminator"];
    assert_eq!(discriminator["propertyName"], "format");
    let mapping = discriminator["mapping"].as_object().unwrap();
    let mapped: BTreeSet<&str> = mapping.keys().map(String::as_str).collect();
    let names: BTreeSet<&str> = snapshot.iter().map(|(_, name)| *name).collect();
    assert_eq!(mapped, names);
    for (name, reference) in mapping {
        let pointer = reference.as_str().unwrap().strip_prefix('#').unwrap();
        let schema = spec.pointer(pointer).unwrap();
        assert_eq!(schema["properties"]["format"]["const"], name.as_str());
        let listed = schemas["ModelInput"]["oneOf"].as_array().unwrap();
        assert!(
            listed.iter().any(|one| one["$ref"] == *reference),
            "{name} is in the oneOf"
        );
    }
}

"""clients/python held to openapi.yaml: every operation has a client method (and there is no other), each model has
exactly its schema's members with the same requiredness, and each enum is a Literal of exactly its values."""

import inspect
import types
import typing
from pathlib import Path
from typing import Any, Literal, NotRequired, Union, get_args, get_origin, is_typeddict

import yaml  # type: ignore[import-untyped]  # no stubs wanted for one safe_load
from conftest import REPO

from approval_resume import AsyncClient, Client, models
from approval_resume.operations import BROWSER_OPERATIONS, OPERATIONS

SPEC: dict[str, Any] = yaml.safe_load(Path(REPO / "openapi.yaml").read_text())
SCHEMAS: dict[str, Any] = SPEC["components"]["schemas"]
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
# The client's conveniences built on the operations above (each calls one of them), not operations themselves.
CONVENIENCES = {"approve", "deny", "decide_calls", "iter_approvals"}

# Schemas of the transcript's own parts: the package passes them through as JSON (`models.JsonObject`), since the
# service keeps a transcript whole in its own format (docs/design.md §14) and a loop hands it to its provider's SDK.
PASSED_THROUGH = {
    "ChatMessage",
    "ToolCall",
    "AnthropicMessage",
    "AnthropicBlock",
    "AnthropicTextBlock",
    "AnthropicImageBlock",
    "AnthropicImageSource",
    "AnthropicUrlImageSource",
    "AnthropicBase64ImageSource",
    "AnthropicToolUseBlock",
    "AnthropicToolResultBlock",
    "AnthropicMessageContent",
    "AnthropicThinkingBlock",
    "AnthropicRedactedThinkingBlock",
    "AnthropicServerToolUseBlock",
    "AnthropicWebSearchToolResultBlock",
    "ResponsesInputItem",
    "ResponsesItem",
    "ResponsesMessage",
    "ResponsesMessageContent",
    "ResponsesInputContent",
    "ResponsesInputText",
    "ResponsesInputImage",
    "ResponsesFunctionCall",
    "ResponsesFunctionCallOutput",
}


def spec_operations() -> dict[str, tuple[str, str]]:
    return {
        operation["operationId"]: (method.upper(), path)
        for path, item in SPEC["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS and operation["operationId"] not in BROWSER_OPERATIONS
    }


def test_every_operation_of_openapi_has_a_client_method_and_the_client_has_no_other() -> None:
    table = {operation.operation_id: (operation.method, operation.path) for operation in OPERATIONS.values()}
    assert table == spec_operations()
    for client in (Client, AsyncClient):
        public = {name for name, _ in inspect.getmembers(client, inspect.isfunction) if not name.startswith("_")}
        lifecycle = {"close"} if client is Client else {"aclose"}
        assert public - lifecycle - CONVENIENCES == set(OPERATIONS), client.__name__


def test_the_async_client_takes_and_answers_what_the_sync_client_does() -> None:
    for name in set(OPERATIONS) | CONVENIENCES:
        sync, asynchronous = getattr(Client, name), getattr(AsyncClient, name)
        assert inspect.signature(sync).parameters.keys() == inspect.signature(asynchronous).parameters.keys(), name
        assert inspect.iscoroutinefunction(asynchronous) or inspect.isasyncgenfunction(asynchronous), name


def unwrap(annotation: Any) -> Any:
    """The TypedDict or Literal inside NotRequired[...], X | None, list[...] (or None when there is none)."""
    if is_typeddict(annotation) or get_origin(annotation) is Literal:
        return annotation
    if get_origin(annotation) in (NotRequired, Union, types.UnionType, list):
        for argument in get_args(annotation):
            found = unwrap(argument)
            if found is not None:
                return found
    return None


def inline_object(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The inline object of a property (itself, or its array's items), when it declares its own members."""
    if "properties" in schema and "$ref" not in schema:
        return schema
    items = schema.get("items")
    if isinstance(items, dict) and "properties" in items and "$ref" not in items:
        return items
    return None


def check_members(name: str, schema: dict[str, Any], model: Any, problems: list[str]) -> None:
    if not is_typeddict(model):
        problems.append(f"{name}: {model!r} is no TypedDict")
        return
    members = set(schema.get("properties", {}))
    required = set(schema.get("required", []))
    if set(model.__annotations__) != members:
        problems.append(f"{name}: members {sorted(model.__annotations__)} but the spec has {sorted(members)}")
    if set(model.__required_keys__) != required:
        problems.append(f"{name}: required {sorted(model.__required_keys__)} but the spec has {sorted(required)}")
    hints = typing.get_type_hints(model, include_extras=True)
    for member, member_schema in schema.get("properties", {}).items():
        nested = inline_object(member_schema)
        if nested is not None and member in hints:
            check_members(f"{name}.{member}", nested, unwrap(hints[member]), problems)


def test_every_closed_schema_of_openapi_is_a_model_with_exactly_its_members() -> None:
    problems: list[str] = []
    checked = 0
    for name, schema in SCHEMAS.items():
        if name in PASSED_THROUGH or schema.get("additionalProperties") is not False:
            continue
        model = getattr(models, name, None)
        if model is None:
            problems.append(f"{name}: no model")
            continue
        check_members(name, schema, model, problems)
        checked += 1
    assert not problems, "\n".join(problems)
    assert checked >= 30, checked


def test_every_schema_is_modelled_or_passed_through_and_open_ones_are_json_objects() -> None:
    modelled = {name for name in SCHEMAS if hasattr(models, name)}
    assert set(SCHEMAS) - modelled - PASSED_THROUGH == set(), "schemas neither modelled nor passed through"
    assert models.ChatMessage == models.ToolCall == models.NativeEntry == dict[str, Any]
    for name in ("ChatMessage", "ToolCall", "NativeEntry"):
        assert SCHEMAS[name].get("additionalProperties") is not False, f"{name} is closed now: model it"
    # The model input is the union of one model per format the spec maps.
    mapped = {target.rsplit("/", 1)[1] for target in SCHEMAS["ModelInput"]["discriminator"]["mapping"].values()}
    assert {model.__name__ for model in get_args(models.ModelInput)} == mapped
    assert set(mapped) == {"OpenAiChatInput", "AnthropicInput", "OpenAiResponsesInput", "GeminiInput"}


def test_every_enum_of_openapi_is_a_literal_of_exactly_its_values() -> None:
    enums = {name: schema["enum"] for name, schema in SCHEMAS.items() if "enum" in schema and "type" in schema}
    assert len(enums) >= 9
    for name, values in enums.items():
        literal = getattr(models, name)
        assert get_origin(literal) is Literal, name
        assert set(get_args(literal)) == set(values), name

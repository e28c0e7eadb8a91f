"""Walks the service's main path with the client openapi-python-client generated from openapi.yaml.

tests/clients/run.sh generates the package `approval_resume_client`, starts the release binary with the example
echo executor behind the tool `update_page_metadata`, and runs this with the package on PYTHONPATH:

    python walk.py BASE_URL KEY

It registers two runs, reads them, denies one and approves the other, reads the model input in all three formats
and the events, and provokes one problem answer. Then it registers one run in each native format (docs/design.md §14)
from tests/fixtures/native/ through `RegisterRun`, denies it, and reads its model input in the run's own format. Every answer must be parsed by the generated code into the named
model its status documents, and every variant of the model-input unions must come back as its own class: a
variant the generator had to drop, or an answer it cannot parse, fails here.
"""

import json
import sys
import uuid
from pathlib import Path

from approval_resume_client import AuthenticatedClient
from approval_resume_client.api.decisions import decide, get_model_input, list_approvals
from approval_resume_client.api.runs import get_run, list_events, register_run
from approval_resume_client.api.users import put_user
from approval_resume_client.models import (
    AnthropicBase64ImageSource,
    AnthropicImageBlock,
    AnthropicInput,
    AnthropicRedactedThinkingBlock,
    AnthropicServerToolUseBlock,
    AnthropicThinkingBlock,
    AnthropicWebSearchToolResultBlock,
    AnthropicTextBlock,
    AnthropicToolResultBlock,
    AnthropicToolUseBlock,
    AnthropicUrlImageSource,
    CallVerdictBody,
    ChatMessage,
    DecideResponse409,
    DecideResponse409Code,
    DecidedBy,
    DecisionAnswer,
    DecisionBody,
    DeclaredTool,
    DenialReason,
    Effect,
    EventsView,
    GeminiInput,
    InboxPage,
    ModelInputFormat,
    OpenAiChatInput,
    OpenAiResponsesInput,
    Outcome,
    PutUser,
    RegisterRun,
    ResponsesFunctionCall,
    ResponsesFunctionCallOutput,
    ResponsesInputImage,
    ResponsesInputText,
    ResponsesMessage,
    RunStatus,
    RunView,
    UserView,
)
from approval_resume_client.types import Unset

NATIVE = Path(__file__).resolve().parent.parent / "fixtures" / "native"

OWNER = 7
TOOL = "update_page_metadata"
ARGUMENTS = '{"page": 12, "description": "Fresh bread daily."}'
IMAGE_URL = "https://images.invalid/storefront.png"
IMAGE_DATA = "iVBORw0KGgo="


def transcript(call_id: str) -> list[ChatMessage]:
    """A system text, a user message with a text and two images (one a URL, one inline), and the assistant turn
    that waits: some text and one call. Together they bring out every variant of the three formats."""
    messages = [
        {"role": "system", "content": "You edit the bakery's website."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Write a meta description for page 12, like these photos."},
                {"type": "image_url", "image_url": {"url": IMAGE_URL}},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE_DATA}"}},
            ],
        },
        {
            "role": "assistant",
            "content": "I will set its description.",
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": TOOL, "arguments": ARGUMENTS}}
            ],
        },
    ]
    return [ChatMessage.from_dict(message) for message in messages]


def parsed(answer, status: int, model: type):
    """The parsed body of an answer that must have `status` and parse into `model`."""
    assert answer.status_code == status, f"expected {status}, got {answer.status_code}: {answer.content!r}"
    assert isinstance(answer.parsed, model), f"expected {model.__name__}, got {type(answer.parsed).__name__}"
    return answer.parsed


def register(client: AuthenticatedClient, call_id: str) -> RunView:
    body = RegisterRun(
        id=uuid.uuid4(),
        owner_uid=OWNER,
        messages=transcript(call_id),
        tools=[DeclaredTool(name=TOOL, effect=Effect.WRITE)],
    )
    run = parsed(register_run.sync_detailed(client=client, body=body), 201, RunView)
    assert run.id == body.id and run.status == RunStatus.WAITING_FOR_APPROVAL
    [call] = run.turn.pending_calls
    assert (call.id, call.name, call.arguments, call.effect) == (call_id, TOOL, ARGUMENTS, Effect.WRITE)
    again = parsed(get_run.sync_detailed(run.id, client=client), 200, RunView)
    assert again.turn.digest == run.turn.digest
    return run


def check_chat(model_input, call_id: str, content: str) -> None:
    assert isinstance(model_input, OpenAiChatInput), type(model_input).__name__
    roles = [message.role.value for message in model_input.messages]
    assert roles == ["system", "user", "assistant", "tool"], roles
    tool = model_input.messages[-1].additional_properties
    assert tool == {"tool_call_id": call_id, "content": content}, tool


def check_anthropic(model_input, call_id: str, content: str, is_error: bool) -> None:
    assert isinstance(model_input, AnthropicInput), type(model_input).__name__
    assert model_input.system == "You edit the bakery's website."
    blocks = [(message.role.value, block) for message in model_input.messages for block in message.content]
    kinds = [(role, type(block)) for role, block in blocks]
    assert kinds == [
        ("user", AnthropicTextBlock),
        ("user", AnthropicImageBlock),
        ("user", AnthropicImageBlock),
        ("assistant", AnthropicTextBlock),
        ("assistant", AnthropicToolUseBlock),
        ("user", AnthropicToolResultBlock),
    ], kinds
    by_url, inline = blocks[1][1].source, blocks[2][1].source
    assert isinstance(by_url, AnthropicUrlImageSource) and by_url.url == IMAGE_URL, by_url
    assert isinstance(inline, AnthropicBase64ImageSource), inline
    assert (inline.media_type, inline.data) == ("image/png", IMAGE_DATA), inline
    use, result = blocks[4][1], blocks[5][1]
    assert (use.id, use.name, use.input_.to_dict()) == (call_id, TOOL, {"page": 12, "description": "Fresh bread daily."})
    assert (result.tool_use_id, result.content, result.is_error) == (call_id, content, is_error), result


def check_responses(model_input, call_id: str, content: str) -> None:
    assert isinstance(model_input, OpenAiResponsesInput), type(model_input).__name__
    assert model_input.instructions == "You edit the bakery's website."
    kinds = [type(item) for item in model_input.input_]
    assert kinds == [ResponsesMessage, ResponsesMessage, ResponsesFunctionCall, ResponsesFunctionCallOutput], kinds
    user, assistant, call, output = model_input.input_
    assert user.role.value == "user" and [type(part) for part in user.content] == [
        ResponsesInputText,
        ResponsesInputImage,
        ResponsesInputImage,
    ], user
    assert (assistant.role.value, assistant.content) == ("assistant", "I will set its description."), assistant
    assert (call.call_id, call.name, call.arguments) == (call_id, TOOL, ARGUMENTS), call
    assert (output.call_id, output.output) == (call_id, content), output


def check_formats(client: AuthenticatedClient, run: RunView, content: str, is_error: bool) -> None:
    """The last model input in every format, through GET /v1/runs/{id}/model-input."""
    call_id = run.turn.pending_calls[0].id
    for format_, check in [
        (ModelInputFormat.OPENAI_CHAT, lambda m: check_chat(m, call_id, content)),
        (ModelInputFormat.ANTHROPIC, lambda m: check_anthropic(m, call_id, content, is_error)),
        (ModelInputFormat.OPENAI_RESPONSES, lambda m: check_responses(m, call_id, content)),
    ]:
        answer = get_model_input.sync_detailed(run.id, client=client, format_=format_)
        assert answer.status_code == 200, answer.content
        check(answer.parsed)


def check_events(client: AuthenticatedClient, run: RunView, approved: bool, outcome: Outcome) -> None:
    events = parsed(list_events.sync_detailed(run.id, client=client), 200, EventsView)
    [approval] = events.approval_events
    assert (approval.approved, approval.decider_uid, approval.decided_by) == (approved, OWNER, DecidedBy.RUN_OWNER)
    assert approval.turn_digest == run.turn.digest
    [tool] = events.tool_events
    assert (tool.call_id, tool.tool, tool.outcome) == (run.turn.pending_calls[0].id, TOOL, outcome), tool


def native_run(client: AuthenticatedClient, format_: ModelInputFormat, check) -> None:
    """A run registered in a native format with the generated `RegisterRun` (its fixture's members through the
    generated models), its pending calls read, denied, and its model input parsed in the run's own format."""
    fixture = json.loads((NATIVE / f"{format_.value}.json").read_text())
    body = RegisterRun.from_dict({**fixture, "id": str(uuid.uuid4()), "owner_uid": OWNER})
    assert body.format_ == format_, body.format_
    run = parsed(register_run.sync_detailed(client=client, body=body), 201, RunView)
    assert run.format_ == format_, run.format_
    assert [call.name for call in run.turn.pending_calls] == ["update_page_metadata", "read_page"], run.turn
    deny = DecisionBody(approved=False, decider_uid=OWNER, turn_digest=run.turn.digest, reason=None)
    answer = parsed(decide.sync_detailed(run.id, client=client, body=deny), 200, DecisionAnswer)
    assert answer.format_ == format_ and [r.outcome for r in answer.results] == [Outcome.DENIED] * 2, answer
    check(answer.model_input, [r.call_id for r in answer.results])
    again = get_model_input.sync_detailed(run.id, client=client)
    assert again.status_code == 200, again.content
    check(again.parsed, [r.call_id for r in answer.results])


def check_native_anthropic(model_input, call_ids: list[str]) -> None:
    assert isinstance(model_input, AnthropicInput), type(model_input).__name__
    assert not isinstance(model_input.system, Unset), "the registered system is kept"
    blocks = [block for message in model_input.messages if isinstance(message.content, list)
              for block in message.content]
    kinds = {type(block) for block in blocks}
    for kind in (AnthropicThinkingBlock, AnthropicRedactedThinkingBlock, AnthropicServerToolUseBlock,
                 AnthropicWebSearchToolResultBlock, AnthropicToolUseBlock, AnthropicToolResultBlock):
        assert kind in kinds, f"no {kind.__name__} parsed: {sorted(k.__name__ for k in kinds)}"
    thinking = [block for block in blocks if isinstance(block, AnthropicThinkingBlock)]
    assert all(block.signature for block in thinking), thinking
    results = [block for block in model_input.messages[-1].content]
    assert [block.tool_use_id for block in results] == call_ids, results
    assert all(block.is_error is True for block in results), results


def check_native_responses(model_input, call_ids: list[str]) -> None:
    assert isinstance(model_input, OpenAiResponsesInput), type(model_input).__name__
    outputs = [item for item in model_input.input_ if isinstance(item, ResponsesFunctionCallOutput)]
    assert [item.call_id for item in outputs] == call_ids, outputs


def check_native_gemini(model_input, call_ids: list[str]) -> None:
    assert isinstance(model_input, GeminiInput), type(model_input).__name__
    last = model_input.contents[-1].to_dict()
    assert last["role"] == "user", last
    responses = [part["functionResponse"] for part in last["parts"]]
    assert [r["name"] for r in responses] == ["update_page_metadata", "read_page"], responses
    assert all("error" in r["response"] for r in responses), responses


NATIVE_CHECKS = {
    ModelInputFormat.ANTHROPIC: check_native_anthropic,
    ModelInputFormat.OPENAI_RESPONSES: check_native_responses,
    ModelInputFormat.GEMINI: check_native_gemini,
}


def main(base_url: str, key: str) -> None:
    client = AuthenticatedClient(base_url=base_url, token=key, raise_on_unexpected_status=True)
    owner = PutUser(username="ada", is_admin=False, can_approve_others=False, disabled=False)
    user = parsed(put_user.sync_detailed(OWNER, client=client, body=owner), 200, UserView)
    assert user.uid == OWNER

    denied_run = register(client, "call_deny")
    approved_run = register(client, "call_approve")
    inbox = parsed(list_approvals.sync_detailed(client=client, acting_uid=OWNER), 200, InboxPage)
    assert {item.run_id for item in inbox.items} == {denied_run.id, approved_run.id}, inbox

    # Deny, answered in the default format (OpenAI chat).
    deny = DecisionBody(
        approved=False, decider_uid=OWNER, turn_digest=denied_run.turn.digest, reason=DenialReason.VARIANT
    )
    answer = parsed(decide.sync_detailed(denied_run.id, client=client, body=deny), 200, DecisionAnswer)
    [result] = answer.results
    assert (answer.status, result.outcome, result.is_error) == (RunStatus.RESUMED, Outcome.DENIED, True), answer
    assert result.content.startswith("Error: approval_denied (decided_by: run_owner, reason: variant)."), result
    check_chat(answer.model_input, "call_deny", result.content)
    check_formats(client, denied_run, result.content, is_error=True)
    check_events(client, denied_run, approved=False, outcome=Outcome.DENIED)

    # Another decision on the decided turn: a problem, parsed into the model of the 409 it documents.
    approve_denied = DecisionBody(approved=True, decider_uid=OWNER, turn_digest=denied_run.turn.digest, reason=None)
    problem = parsed(decide.sync_detailed(denied_run.id, client=client, body=approve_denied), 409, DecideResponse409)
    assert problem.code == DecideResponse409Code.ALREADY_DECIDED, problem

    # Approve: the echo executor runs the call; answered in the Anthropic format.
    approve = DecisionBody(approved=True, decider_uid=OWNER, turn_digest=approved_run.turn.digest, reason=None)
    answer = parsed(
        decide.sync_detailed(approved_run.id, client=client, body=approve, format_=ModelInputFormat.ANTHROPIC),
        200,
        DecisionAnswer,
    )
    [result] = answer.results
    assert (answer.status, result.outcome, result.is_error) == (RunStatus.RESUMED, Outcome.OK, False), answer
    assert result.content == f"{TOOL} done for user {OWNER} with 2 argument(s).", result
    check_anthropic(answer.model_input, "call_approve", result.content, is_error=False)
    check_formats(client, approved_run, result.content, is_error=False)
    check_events(client, approved_run, approved=True, outcome=Outcome.OK)

    # A verdict per call with edited arguments: the executor runs the edited ones, and the model is told so first.
    edited_run = register(client, "call_edit")
    edit = DecisionBody(
        decider_uid=OWNER,
        turn_digest=edited_run.turn.digest,
        calls=[CallVerdictBody(call_id="call_edit", approved=True, arguments='{"only": 1}')],
    )
    answer = parsed(decide.sync_detailed(edited_run.id, client=client, body=edit), 200, DecisionAnswer)
    [result] = answer.results
    [verdict] = answer.decision.calls
    assert (verdict.call_id, verdict.approved, verdict.edited) == ("call_edit", True, True), verdict
    assert (result.outcome, result.edited) == (Outcome.OK, True), result
    note = "Note: approval_edited (decided_by: run_owner). The arguments of this call were changed before it was approved"
    assert result.content.startswith(note), result
    assert result.content.endswith(f"\n\n{TOOL} done for user {OWNER} with 1 argument(s)."), result

    for format_, check in NATIVE_CHECKS.items():
        native_run(client, format_, check)

    print(
        "walk: register, read, inbox, deny, approve, an edited per-call approval, three formats, events and a 409,"
        " and a run registered in each native format through the generated client"
    )


if __name__ == "__main__":
    main(*sys.argv[1:])

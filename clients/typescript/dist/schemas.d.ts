/**
 * Names for the shapes of openapi.yaml, all taken from the types openapi-typescript generated from it
 * (src/generated/openapi.ts), so a change of the spec reaches every method's signature after `npm run generate`.
 * Members keep their wire names (`owner_uid`, `turn_digest`): what you read here is what the service sends.
 * @module
 */
import type { components, operations, paths } from "./generated/openapi.js";
export type { components, operations, paths };
type Schemas = components["schemas"];
/**
 * An OpenAI chat message. openapi.yaml leaves `ChatMessage` open (the service keeps every member of a message as it
 * came: `content`, `tool_calls`, `name`, `refusal`…), but openapi-typescript types an object schema without
 * `additionalProperties` as closed, which would refuse a message literal with `content`; so the open form is here.
 */
export type ChatMessage = Schemas["ChatMessage"] & {
    [member: string]: unknown;
};
/**
 * `T` with its `messages` (where it has them) open as {@link ChatMessage}, required or optional as in `T`; other
 * members unchanged. A registration or a turn in a native format (docs/design.md §14) sends `input` or `contents`
 * instead.
 */
export type WithOpenMessages<T> = T extends {
    messages: unknown;
} ? Omit<T, "messages"> & {
    messages: ChatMessage[];
} : "messages" extends keyof T ? Omit<T, "messages"> & {
    messages?: ChatMessage[];
} : T;
export type PutUser = Schemas["PutUser"];
export type UserView = Schemas["UserView"];
export type RegisterRun = WithOpenMessages<Schemas["RegisterRun"]>;
export type AppendTurn = WithOpenMessages<Schemas["AppendTurn"]>;
export type DeclaredTool = Schemas["DeclaredTool"];
export type RunView = Schemas["RunView"];
export type RunStatus = Schemas["RunStatus"];
export type PendingCall = Schemas["PendingCall"];
/**
 * An approved call of a tool the worker runs (`executor: "worker"`, docs/design.md §15), as `GET /v1/runs/{id}`
 * shows it in `released_calls`: the arguments to run (edited where a decider edited them) and, once posted, its
 * `result`.
 */
export type ReleasedCall = NonNullable<RunView["released_calls"]>[number];
/** The body of `POST /v1/runs/{id}/results`. */
export type PostResults = NonNullable<paths["/v1/runs/{id}/results"]["post"]["requestBody"]>["content"]["application/json"];
/** One released call's result as the worker posts it. */
export type PostedResult = PostResults["results"][number];
export type DecisionBody = Schemas["DecisionBody"];
export type CallVerdictBody = Schemas["CallVerdictBody"];
export type DecisionAnswer = Schemas["DecisionAnswer"];
export type DecisionView = Schemas["DecisionView"];
export type ToolResult = Schemas["ToolResult"];
export type DenialReason = Schemas["DenialReason"];
export type DecidedBy = Schemas["DecidedBy"];
export type Outcome = Schemas["Outcome"];
export type Effect = Schemas["Effect"];
export type PrivacyLevel = Schemas["PrivacyLevel"];
export type ModelInput = Schemas["ModelInput"];
export type ModelInputFormat = Schemas["ModelInputFormat"];
export type InboxPage = Schemas["InboxPage"];
export type InboxItem = Schemas["InboxItem"];
/** The audit record of one run (`GET /v1/runs/{id}/events`), not the feed. */
export type RunAudit = Schemas["EventsView"];
export type EventType = Schemas["EventType"];
/** The types of a remembered decision's events (docs/design.md §18), whose data is {@link RuleEventData}. */
export type RuleEventType = Extract<EventType, "rule.created" | "rule.revoked">;
/** The data of a run's event. */
export type RunEventData = Schemas["EventData"];
/** The data of `rule.created` and `rule.revoked`: no turn, and no `run_id` for an owner-scope rule. */
export type RuleEventData = Schemas["RuleEventData"];
/** A run's event: `run.waiting`, `run.released`, `run.resumed`… */
export type RunEvent = Omit<Schemas["Event"], "type" | "data"> & {
    type: Exclude<EventType, RuleEventType>;
    data: RunEventData;
};
/** A remembered decision made or revoked. */
export type RuleEvent = Omit<Schemas["Event"], "type" | "data"> & {
    type: RuleEventType;
    data: RuleEventData;
};
/**
 * One event of the feed and the body of a webhook request; `type` tells a run's event from a rule's. openapi.yaml
 * ties `data` to `type` with an if/then/else, which openapi-typescript does not read (it types `data` as an empty
 * object), so the union is written here from the two data schemas it generates.
 */
export type Event = RunEvent | RuleEvent;
export type EventsPage = Omit<Schemas["EventsPage"], "events"> & {
    events: Event[];
};
export type CreateWebhook = Schemas["CreateWebhook"];
export type WebhookSubscription = Schemas["WebhookSubscription"];
export type WebhookCreated = Schemas["WebhookCreated"];
export type RotateWebhookSecret = Schemas["RotateWebhookSecret"];
/** An entry of a native transcript (Responses `input`, Gemini `contents`), kept by the service as it came. */
export type NativeEntry = Schemas["NativeEntry"];
export type Problem = Schemas["Problem"];
export type ProblemCode = Problem["code"];
/** What a remembered decision covers (docs/design.md §18): `run`, the later turns of one run; `owner`, the owner's runs. */
export type RuleScope = Schemas["RuleScope"];
export type RuleVerdict = Schemas["RuleVerdict"];
/** A remembered decision; `live`: neither revoked nor expired, so it decides the turns registered now. */
export type Rule = Schemas["Rule"];
/**
 * `T` with its `arguments` as any JSON object: openapi.yaml leaves a rule's arguments an open object (the arguments a
 * call must equal), which openapi-typescript types as an object without members (`Record<string, never>`).
 */
type WithOpenArguments<T> = Omit<T, "arguments"> & {
    arguments?: Record<string, unknown>;
};
/** The body of `POST /v1/runs/{id}/rules`: a `run` scope rule. */
export type RunRule = WithOpenArguments<Schemas["RunRuleBody"]>;
/** The body of `POST /v1/rules`: an `owner` scope rule, which must end (`expires_at`). */
export type OwnerRule = WithOpenArguments<Schemas["OwnerRuleBody"]>;
/**
 * An approval link (docs/design.md §20): with its `url` the person it was made for decides the run's waiting turn
 * from the service's own page, once, until `expires_at`. The URL is shown only in the answer that made the link and
 * decides as that person: hand it to them only, never where a model can read it. `id` is what `revokeLink` names.
 */
export type ApprovalLink = Schemas["ApprovalLink"];
/** Who a registration's or new turn's `notify` mails: the uids whose mail is queued, and why the others get none. */
export type NotifyOutcome = Schemas["NotifyOutcome"];
export type NotifySkipReason = NotifyOutcome["skipped"][number]["reason"];
/** The query of `GET /v1/approvals`. */
export type ApprovalsQuery = operations["listApprovals"]["parameters"]["query"];
/** The query of `GET /v1/events`. */
export type EventsQuery = NonNullable<operations["followEvents"]["parameters"]["query"]>;
/** Where a run came from (docs/design.md §2), e.g. `mcp:github`: `^[A-Za-z0-9_.:-]{1,64}$`, absent when it named none. */
export type RunSource = Schemas["RunSource"];
//# sourceMappingURL=schemas.d.ts.map
<?php

declare(strict_types=1);

namespace ApprovalResume;

use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Enum\Effect;
use ApprovalResume\Enum\EventType;
use ApprovalResume\Enum\ModelInputFormat;
use ApprovalResume\Enum\PrivacyLevel;
use ApprovalResume\Http\CurlTransport;
use ApprovalResume\Http\Response;
use ApprovalResume\Http\Transport;
use ApprovalResume\Internal\Json;
use ApprovalResume\Internal\Secret;
use ApprovalResume\Model\ApprovalLink;
use ApprovalResume\Model\DecisionAnswer;
use ApprovalResume\Model\DeclaredTool;
use ApprovalResume\Model\InboxItem;
use ApprovalResume\Model\InboxPage;
use ApprovalResume\Model\ModelInput;
use ApprovalResume\Model\Run;
use ApprovalResume\Model\User;
use ApprovalResume\Model\WebhookSubscription;

/**
 * The HTTP API of approval-resume (docs/design.md §8; openapi.yaml). The credential is an API key (`ar_…`, scopes as
 * `clients add` gave them) or a decision token (`DecisionTokenSigner`), which may only read and decide its user's
 * runs. Every non-2xx answer throws ApiException; no answer at all throws TransportException. The credential shows in
 * no dump, export or serialization of the client (`Internal\Secret`), nor in exception traces (parameters that
 * carry it are `#[\SensitiveParameter]`); `serialize()` is refused.
 */
final class Client
{
    use RuleCalls;

    private readonly string $baseUrl;
    private readonly Transport $transport;
    private readonly Secret $credential;

    public function __construct(
        string $baseUrl,
        #[\SensitiveParameter] string $credential,
        ?Transport $transport = null,
    ) {
        $this->baseUrl = rtrim($baseUrl, '/');
        $this->credential = new Secret($credential);
        $this->transport = $transport ?? new CurlTransport();
    }

    /**
     * Creates or replaces a backend user (scope `users:write`).
     *
     * @param ?list<string> $approvableTools the tools whose write calls the user may approve; null: no limit (§4)
     * @param ?string $email a bare address (`local@domain`) for the mail of `notify` (docs/design.md §20); null: none
     */
    public function putUser(
        int $uid,
        string $username,
        bool $isAdmin = false,
        bool $canApproveOthers = false,
        bool $disabled = false,
        ?array $approvableTools = null,
        ?string $email = null,
    ): User {
        $body = [
            'username' => $username,
            'is_admin' => $isAdmin,
            'can_approve_others' => $canApproveOthers,
            'disabled' => $disabled,
            'approvable_tools' => $approvableTools === null ? null : array_values($approvableTools),
            'email' => $email,
        ];
        return User::fromArray($this->call('PUT', '/v1/users/' . $uid, $body));
    }

    /**
     * Registers a run suspended on its last assistant turn (scope `runs:write`). The same arguments again answer
     * the same run; other ones under a taken id throw 409 `run_exists`. A run registered in a provider's own
     * `$format` (docs/design.md §14) is kept as sent and resumed in that format, byte for byte.
     *
     * @param list<mixed> $transcript the run's transcript in `$format`: OpenAI chat or Anthropic `messages` (the last
     *                                the assistant's, with tool calls), Responses `input` items, or Gemini `contents`
     * @param array<string, Effect|DeclaredTool> $tools each tool's effect (and, as a DeclaredTool, its executor and
     *                                                  editability) by name; a tool the run declares no effect for is
     *                                                  a read unless the service's TOOLS_CONFIG makes it a write
     * @param mixed $system the format's system member, if any: Anthropic `system` (a string or blocks), Responses
     *                      `instructions` (a string), Gemini `system_instruction` (a content); none in openai-chat
     * @param ?list<int> $notify the people to mail a link when the turn waits (at most 10; docs/design.md §20): the
     *                           answer's `notify` says whose mail is queued and why the others get none
     */
    public function registerRun(
        string $id,
        int $ownerUid,
        array $transcript,
        array $tools = [],
        ?PrivacyLevel $privacyLevel = null,
        bool $requireSecondApprover = false,
        ?int $approvalTtlSecs = null,
        ?\DateTimeInterface $expiresAt = null,
        ModelInputFormat $format = ModelInputFormat::OpenAiChat,
        mixed $system = null,
        ?array $notify = null,
    ): Run {
        $body = ['id' => $id, 'owner_uid' => $ownerUid];
        if ($format !== ModelInputFormat::OpenAiChat) {
            $body['format'] = $format->value;
        }
        if ($system !== null) {
            $body[self::systemMember($format)] = $system;
        }
        $body[self::transcriptMember($format)] = $transcript;
        $body['tools'] = [];
        foreach ($tools as $name => $tool) {
            $declared = $tool instanceof DeclaredTool ? $tool->toArray() : ['effect' => $tool->value];
            $body['tools'][] = ['name' => (string) $name, ...$declared];
        }
        if ($privacyLevel !== null) {
            $body['privacy_level'] = $privacyLevel->value;
        }
        $body['require_second_approver'] = $requireSecondApprover;
        $body = self::withNotify($body, $notify);
        return Run::fromArray($this->call('POST', '/v1/runs', self::withExpiry($body, $approvalTtlSecs, $expiresAt)));
    }

    /** The run, its current turn (with the digest a decision names) and its decision (scope `runs:read`). */
    public function getRun(string $runId): Run
    {
        return Run::fromArray($this->call('GET', self::runPath($runId)));
    }

    /**
     * One page of the approvals inbox (scope `approvals:read`): the runs waiting for approval that `$actingUid`
     * may decide, newest first.
     */
    public function inbox(
        int $actingUid,
        ?int $ownerUid = null,
        ?string $tool = null,
        ?int $limit = null,
        ?string $cursor = null,
    ): InboxPage {
        $query = array_filter(
            [
                'acting_uid' => $actingUid,
                'owner_uid' => $ownerUid,
                'tool' => $tool,
                'limit' => $limit,
                'cursor' => $cursor,
            ],
            static fn (mixed $value): bool => $value !== null,
        );
        return InboxPage::fromArray($this->call('GET', '/v1/approvals?' . http_build_query($query)));
    }

    /**
     * Every item of the inbox, page after page, following `next_cursor` until it is null.
     *
     * @return \Generator<int, InboxItem>
     */
    public function inboxAll(
        int $actingUid,
        ?int $ownerUid = null,
        ?string $tool = null,
        int $pageSize = 50,
    ): \Generator {
        $cursor = null;
        do {
            $page = $this->inbox($actingUid, $ownerUid, $tool, $pageSize, $cursor);
            yield from $page->items;
            $cursor = $page->nextCursor;
        } while ($cursor !== null);
    }

    /**
     * Approves the whole turn named by its digest (scope `decisions:write`). The answer's model input is in
     * `$format`, here and in the other decisions; null: the run's own. `$remember` also makes the approval a rule for
     * the tools of the turn (docs/design.md §18: "allow for this conversation").
     */
    public function approveTurn(
        string $runId,
        string $turnDigest,
        Decider $decider,
        ?ModelInputFormat $format = null,
        ?Remember $remember = null,
    ): DecisionAnswer {
        $body = $decider->addTo(['approved' => true, 'turn_digest' => $turnDigest]);
        return $this->decide($runId, $remember?->addTo($body) ?? $body, $format);
    }

    /**
     * Denies the whole turn; `$reason` `variant` asks the model for another version, `skip` not to propose it
     * again (rendered on write calls only). `$remember` also makes the denial a rule ("never in this conversation").
     */
    public function denyTurn(
        string $runId,
        string $turnDigest,
        Decider $decider,
        ?DenialReason $reason = null,
        ?ModelInputFormat $format = null,
        ?Remember $remember = null,
    ): DecisionAnswer {
        $body = $decider->addTo(['approved' => false, 'turn_digest' => $turnDigest]);
        if ($reason !== null) {
            $body['reason'] = $reason->value;
        }
        return $this->decide($runId, $remember?->addTo($body) ?? $body, $format);
    }

    /**
     * A verdict per call: every pending call exactly once, each approved (as proposed or edited) or denied.
     *
     * @param list<Verdict> $verdicts
     */
    public function decideCalls(
        string $runId,
        string $turnDigest,
        Decider $decider,
        array $verdicts,
        ?ModelInputFormat $format = null,
    ): DecisionAnswer {
        $calls = array_map(static fn (Verdict $verdict): array => $verdict->toArray(), $verdicts);
        $body = $decider->addTo(['turn_digest' => $turnDigest, 'calls' => $calls]);
        // The service takes one end for every owner-scope rule of a decision: the verdicts must agree on it.
        $ends = [];
        foreach ($verdicts as $verdict) {
            if ($verdict->remember?->until !== null) {
                $ends[$verdict->remember->until->format(\DateTimeInterface::RFC3339_EXTENDED)] = true;
            }
        }
        if (count($ends) > 1) {
            throw new \InvalidArgumentException('the verdicts remember owner-scope rules with different ends');
        }
        if ($ends !== []) {
            $body['remember_until'] = array_key_first($ends);
        }
        return $this->decide($runId, $body, $format);
    }

    /**
     * The last resumed model input of the run, in `$format` (null: the run's own), scope `runs:read`; 409
     * `not_resumed` before one, 422 `format_not_representable` for a format the transcript cannot be put in.
     */
    public function modelInput(string $runId, ?ModelInputFormat $format = null): ModelInput
    {
        $path = self::runPath($runId) . '/model-input' . self::formatQuery($format);
        return ModelInput::fromArray($this->call('GET', $path));
    }

    /**
     * Suspends a resumed run again on its next assistant turn (scope `runs:write`).
     *
     * @param list<mixed> $transcript what followed the model input, ending with the next assistant turn, in the
     *                                run's format (`$format`: `messages`, Responses `input` or Gemini `contents`)
     * @param ?list<int> $notify the people to mail a link when the new turn waits, as at registration
     */
    public function appendTurn(
        string $runId,
        array $transcript,
        ?int $approvalTtlSecs = null,
        ?\DateTimeInterface $expiresAt = null,
        ModelInputFormat $format = ModelInputFormat::OpenAiChat,
        ?array $notify = null,
    ): Run {
        $body = self::withExpiry([self::transcriptMember($format) => $transcript], $approvalTtlSecs, $expiresAt);
        $body = self::withNotify($body, $notify);
        return Run::fromArray($this->call('POST', self::runPath($runId) . '/turns', $body));
    }

    /**
     * Makes an approval link (docs/design.md §20) for `$uid`, who must be allowed to decide the run (§4), to decide
     * its waiting turn from the service's page (scope `decisions:write`; the service needs PUBLIC_URL). Whoever holds
     * the URL decides as `$uid`, once: hand it to that person only, never where a model can read it.
     */
    public function createLink(string $runId, int $uid): ApprovalLink
    {
        return ApprovalLink::fromArray($this->call('POST', self::runPath($runId) . '/links', ['uid' => $uid]));
    }

    /** Revokes an approval link (scope `decisions:write`): it decides nothing from now on. Again: the same. */
    public function revokeLink(string $runId, string $linkId): void
    {
        $this->call('DELETE', self::runPath($runId) . '/links/' . rawurlencode($linkId));
    }

    /** Abandons a run (scope `runs:write`). */
    public function cancelRun(string $runId): Run
    {
        return Run::fromArray($this->call('POST', self::runPath($runId) . '/cancel'));
    }

    /** Ends a resumed run (scope `runs:write`). */
    public function completeRun(string $runId): Run
    {
        return Run::fromArray($this->call('POST', self::runPath($runId) . '/complete'));
    }

    /**
     * Subscribes a URL to the tenant's events (scope `webhooks:write`); the answer's `secret` is shown this once.
     *
     * @param ?list<EventType> $eventTypes null: every type
     */
    public function createWebhook(string $url, ?array $eventTypes = null): WebhookSubscription
    {
        $body = ['url' => $url];
        if ($eventTypes !== null) {
            $body['event_types'] = array_map(static fn (EventType $type): string => $type->value, $eventTypes);
        }
        return WebhookSubscription::fromArray($this->call('POST', '/v1/webhooks', $body));
    }

    /**
     * Gives a subscription a new signing secret (scope `webhooks:write`), in the answer's `secret` this once. The
     * old one keeps signing beside it for `$overlapSecs` (null: the service's WEBHOOK_SECRET_OVERLAP_SECS; 0: it
     * retires at once), so receivers can switch meanwhile.
     */
    public function rotateWebhookSecret(string $id, ?int $overlapSecs = null): WebhookSubscription
    {
        $path = '/v1/webhooks/' . rawurlencode($id) . '/rotate-secret';
        return WebhookSubscription::fromArray($this->call('POST', $path, ['overlap_secs' => $overlapSecs]));
    }

    /** Removes a webhook subscription (scope `webhooks:write`). */
    public function removeWebhook(string $id): void
    {
        $this->call('DELETE', '/v1/webhooks/' . rawurlencode($id));
    }

    /** @return array<string, mixed> */
    public function __debugInfo(): array
    {
        return ['baseUrl' => $this->baseUrl];
    }

    /** @param array<string, mixed> $body */
    private function decide(string $runId, array $body, ?ModelInputFormat $format): DecisionAnswer
    {
        $path = self::runPath($runId) . '/decision' . self::formatQuery($format);
        return DecisionAnswer::fromArray($this->call('POST', $path, $body));
    }

    /**
     * @param ?array<string, mixed> $body
     * @return array<mixed> the decoded answer; [] for 204
     */
    private function call(string $method, string $path, ?array $body = null): array
    {
        $headers = ['Authorization: Bearer ' . $this->credential->reveal(), 'Accept: application/json'];
        if ($body !== null) {
            $headers[] = 'Content-Type: application/json';
        }
        $response = $this->transport->send(
            $method,
            $this->baseUrl . $path,
            $headers,
            $body === null ? null : Json::encode($body),
        );
        return self::decoded($response);
    }

    /**
     * The answer may carry a secret (a webhook's, in the answer to its creation or rotation): no trace shows it.
     *
     * @return array<mixed>
     */
    private static function decoded(#[\SensitiveParameter] Response $response): array
    {
        if ($response->status < 200 || $response->status > 299) {
            throw ApiException::fromResponse($response);
        }
        if ($response->status === 204) {
            return [];
        }
        return Json::decodeObject($response->body);
    }

    /**
     * @param array<string, mixed> $body
     * @return array<string, mixed>
     */
    private static function withExpiry(array $body, ?int $approvalTtlSecs, ?\DateTimeInterface $expiresAt): array
    {
        if ($approvalTtlSecs !== null) {
            $body['approval_ttl_secs'] = $approvalTtlSecs;
        }
        if ($expiresAt !== null) {
            $body['expires_at'] = $expiresAt->format(\DateTimeInterface::RFC3339_EXTENDED);
        }
        return $body;
    }

    /**
     * @param array<string, mixed> $body
     * @param ?list<int> $notify
     * @return array<string, mixed>
     */
    private static function withNotify(array $body, ?array $notify): array
    {
        if ($notify !== null) {
            $body['notify'] = array_values($notify);
        }
        return $body;
    }

    /** `?format=…` when one is asked for; none: the service answers in the run's own format (docs/design.md §14). */
    private static function formatQuery(?ModelInputFormat $format): string
    {
        return $format === null ? '' : '?' . http_build_query(['format' => $format->value]);
    }

    /** The member a format's transcript goes in (docs/design.md §14). */
    private static function transcriptMember(ModelInputFormat $format): string
    {
        return match ($format) {
            ModelInputFormat::OpenAiChat, ModelInputFormat::Anthropic => 'messages',
            ModelInputFormat::OpenAiResponses => 'input',
            ModelInputFormat::Gemini => 'contents',
        };
    }

    /** The member a format's system prompt goes in; openai-chat keeps it among the messages. */
    private static function systemMember(ModelInputFormat $format): string
    {
        return match ($format) {
            ModelInputFormat::OpenAiChat => throw new \InvalidArgumentException(
                'an openai-chat run keeps its system prompt among its messages',
            ),
            ModelInputFormat::Anthropic => 'system',
            ModelInputFormat::OpenAiResponses => 'instructions',
            ModelInputFormat::Gemini => 'system_instruction',
        };
    }

    private static function runPath(string $runId): string
    {
        return '/v1/runs/' . rawurlencode($runId);
    }
}

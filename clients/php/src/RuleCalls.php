<?php

declare(strict_types=1);

namespace ApprovalResume;

use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Enum\RuleVerdict;
use ApprovalResume\Internal\Json;
use ApprovalResume\Model\Rule;

/**
 * The remembered decisions of `Client` (docs/design.md §18): rules made on their own, listed and revoked. A decision
 * remembered as it is made takes `Remember` instead (`approveTurn()`, `denyTurn()`, `Verdict`).
 */
trait RuleCalls
{
    /**
     * Remembers a decision for the later turns of a run (docs/design.md §18; scope `decisions:write`): `$verdict` on
     * the calls of `$tool` (only those whose arguments equal `$arguments` as JSON, when given), as the decision of
     * `$createdBy`, who must be allowed to make it (§4, checked now and again at each use). With a decision token as
     * the credential, `$createdBy` is null or the token's user.
     *
     * @param string|array<string, mixed>|null $arguments a JSON object, as text or an array
     */
    public function createRunRule(
        string $runId,
        string $tool,
        RuleVerdict $verdict,
        ?int $createdBy = null,
        string|array|null $arguments = null,
        ?DenialReason $reason = null,
    ): Rule {
        $body = $createdBy === null ? [] : ['created_by' => $createdBy];
        $body += self::ruleBody($tool, $verdict, $arguments, $reason);
        return Rule::fromArray($this->call('POST', self::runPath($runId) . '/rules', $body));
    }

    /**
     * Remembers a decision for every run of `$ownerUid`, for `$tool`, until `$expiresAt` (at most MAX_RULE_TTL_DAYS
     * ahead); made by the owner or an admin (`$createdBy`), with an API key (scope `decisions:write`).
     *
     * @param string|array<string, mixed>|null $arguments a JSON object, as text or an array
     */
    public function createOwnerRule(
        int $ownerUid,
        int $createdBy,
        string $tool,
        RuleVerdict $verdict,
        \DateTimeInterface $expiresAt,
        string|array|null $arguments = null,
        ?DenialReason $reason = null,
    ): Rule {
        $body = [
            'owner_uid' => $ownerUid,
            'created_by' => $createdBy,
            'expires_at' => $expiresAt->format(\DateTimeInterface::RFC3339_EXTENDED),
        ];
        $body += self::ruleBody($tool, $verdict, $arguments, $reason);
        return Rule::fromArray($this->call('POST', '/v1/rules', $body));
    }

    /**
     * The rules of a run, live, revoked and expired (scope `runs:read` or `decisions:write`; a decision token its
     * runs').
     *
     * @return list<Rule>
     */
    public function runRules(string $runId): array
    {
        return Rule::listFromArray($this->call('GET', self::runPath($runId) . '/rules'));
    }

    /**
     * The owner-scope rules of a backend user (scope `runs:read` or `decisions:write`).
     *
     * @return list<Rule>
     */
    public function ownerRules(int $ownerUid): array
    {
        return Rule::listFromArray($this->call('GET', '/v1/rules?' . http_build_query(['owner_uid' => $ownerUid])));
    }

    /**
     * Revokes a rule (scope `decisions:write`), by `$revokedBy`: its author, the run's owner (scope run) or an admin;
     * with a decision token, null or the token's user. A turn registered after the answer no longer uses it; no
     * decision already made changes. Answers the rule as it now is.
     */
    public function revokeRule(string $ruleId, ?int $revokedBy = null): Rule
    {
        $query = $revokedBy === null ? '' : '?' . http_build_query(['revoked_by' => $revokedBy]);
        return Rule::fromArray($this->call('DELETE', '/v1/rules/' . rawurlencode($ruleId) . $query));
    }

    /**
     * What every rule says, as a body gives it.
     *
     * @param string|array<string, mixed>|null $arguments
     * @return array<string, mixed>
     */
    private static function ruleBody(
        string $tool,
        RuleVerdict $verdict,
        string|array|null $arguments,
        ?DenialReason $reason,
    ): array {
        $body = ['tool' => $tool, 'verdict' => $verdict->value];
        if ($arguments !== null) {
            $body['arguments'] = Json::objectValue($arguments, 'a rule\'s arguments');
        }
        if ($reason !== null) {
            $body['reason'] = $reason->value;
        }
        return $body;
    }

    /**
     * @param ?array<string, mixed> $body
     * @return array<mixed>
     */
    abstract private function call(string $method, string $path, ?array $body = null): array;

    abstract private static function runPath(string $runId): string;
}

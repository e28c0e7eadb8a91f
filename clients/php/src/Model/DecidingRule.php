<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Enum\RuleScope;
use ApprovalResume\Enum\RuleVerdict;
use ApprovalResume\Internal\Read;

/**
 * The remembered decision (docs/design.md §18) that would decide a pending call now, as the run view and the inbox
 * show it while the turn waits: chosen as a registration chooses (a deny before any approve, the earliest made,
 * its author still allowed to decide the run). It never carries the rule's arguments; `Client::runRules()` lists
 * the rule whole. An inbox can say "a remembered decision would deny this" and offer to revoke it.
 */
final readonly class DecidingRule
{
    public function __construct(
        public string $id,
        public RuleScope $scope,
        public RuleVerdict $verdict,
        public ?DenialReason $reason,
        public int $createdBy,
        public \DateTimeImmutable $createdAt,
        public ?\DateTimeImmutable $expiresAt,
    ) {
    }

    /**
     * The `rule` member of a pending call, or null where it has none.
     *
     * @param array<mixed> $call
     */
    public static function ofCall(array $call): ?self
    {
        $data = Read::optionalObject($call, 'rule');
        if ($data === null) {
            return null;
        }
        return new self(
            Read::string($data, 'id'),
            Read::enum($data, 'scope', RuleScope::class),
            Read::enum($data, 'verdict', RuleVerdict::class),
            Read::optionalEnum($data, 'reason', DenialReason::class),
            Read::int($data, 'created_by'),
            Read::time($data, 'created_at'),
            Read::optionalTime($data, 'expires_at'),
        );
    }
}

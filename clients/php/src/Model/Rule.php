<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Enum\RuleScope;
use ApprovalResume\Enum\RuleVerdict;
use ApprovalResume\Internal\Read;

/**
 * A remembered decision (docs/design.md §18): a decision made in advance by `$createdBy`, deciding the calls of
 * `$tool` it matches (`$arguments` null: every call of the tool; else the calls whose arguments equal that JSON
 * object) in the run `$runId` (scope run) or in every run of `$ownerUid` until `$expiresAt` (scope owner). It is
 * checked again against §4 at each use. `$live`: neither revoked nor expired. A decision token sees `$arguments`
 * only where the run's privacy level shows arguments.
 */
final readonly class Rule
{
    public function __construct(
        public string $id,
        public RuleScope $scope,
        public ?string $runId,
        public int $ownerUid,
        public string $tool,
        public ?string $arguments,
        public RuleVerdict $verdict,
        public ?DenialReason $reason,
        public int $createdBy,
        public \DateTimeImmutable $createdAt,
        public ?\DateTimeImmutable $expiresAt,
        public ?\DateTimeImmutable $revokedAt,
        public ?int $revokedBy,
        public bool $live,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        return new self(
            Read::string($data, 'id'),
            Read::enum($data, 'scope', RuleScope::class),
            Read::optionalString($data, 'run_id'),
            Read::int($data, 'owner_uid'),
            Read::string($data, 'tool'),
            Read::optionalString($data, 'arguments'),
            Read::enum($data, 'verdict', RuleVerdict::class),
            Read::optionalEnum($data, 'reason', DenialReason::class),
            Read::int($data, 'created_by'),
            Read::time($data, 'created_at'),
            Read::optionalTime($data, 'expires_at'),
            Read::optionalTime($data, 'revoked_at'),
            Read::optionalInt($data, 'revoked_by'),
            Read::bool($data, 'live'),
        );
    }

    /**
     * The rules of a list answer (`{"rules": […]}`).
     *
     * @param array<mixed> $data
     * @return list<self>
     */
    public static function listFromArray(array $data): array
    {
        return array_map(self::fromArray(...), Read::listOfObjects($data, 'rules'));
    }
}

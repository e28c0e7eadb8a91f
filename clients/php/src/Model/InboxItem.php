<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\ModelInputFormat;
use ApprovalResume\Enum\PrivacyLevel;
use ApprovalResume\Internal\Read;

/** A run waiting for a decision the acting user may make, as the inbox lists it; `$format`: the run's own. */
final readonly class InboxItem
{
    /** @param list<InboxCall> $pendingCalls */
    public function __construct(
        public string $runId,
        public int $ownerUid,
        public PrivacyLevel $privacyLevel,
        public bool $requireSecondApprover,
        public ?\DateTimeImmutable $expiresAt,
        public \DateTimeImmutable $createdAt,
        public int $turnIndex,
        public string $turnDigest,
        public array $pendingCalls,
        public ModelInputFormat $format,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        $turn = Read::object($data, 'turn');
        return new self(
            Read::string($data, 'run_id'),
            Read::int($data, 'owner_uid'),
            Read::enum($data, 'privacy_level', PrivacyLevel::class),
            Read::bool($data, 'require_second_approver'),
            Read::optionalTime($data, 'expires_at'),
            Read::time($data, 'created_at'),
            Read::int($turn, 'index'),
            Read::string($turn, 'digest'),
            array_map(InboxCall::fromArray(...), Read::listOfObjects($turn, 'pending_calls')),
            Read::enum($data, 'format', ModelInputFormat::class),
        );
    }

    /** Whether the acting user may approve the whole turn; show Approve only then (Deny always). */
    public function approvable(): bool
    {
        foreach ($this->pendingCalls as $call) {
            if (!$call->approvable) {
                return false;
            }
        }
        return true;
    }
}

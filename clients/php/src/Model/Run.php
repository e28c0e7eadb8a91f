<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\ModelInputFormat;
use ApprovalResume\Enum\PrivacyLevel;
use ApprovalResume\Enum\RunStatus;
use ApprovalResume\Internal\Read;

/**
 * A run as `GET /v1/runs/{id}` (and registration, new turns, cancel, complete) answers it; `$format` is the one it
 * was registered in (docs/design.md §14). `$releasedCalls`: the calls of the decided turn released to the worker
 * (docs/design.md §15), with their results once posted; a registration or new turn that remembered decisions
 * decided at once (§18) shows them, as `$decision` shows the decision.
 */
final readonly class Run
{
    public function __construct(
        public string $id,
        public int $ownerUid,
        public RunStatus $status,
        public PrivacyLevel $privacyLevel,
        public bool $requireSecondApprover,
        public ?\DateTimeImmutable $expiresAt,
        public Turn $turn,
        public ?Decision $decision,
        public \DateTimeImmutable $createdAt,
        public \DateTimeImmutable $updatedAt,
        public ModelInputFormat $format,
        /** @var list<ReleasedCall> */
        public array $releasedCalls = [],
        /** Only in the answer of a registration or new turn that named `notify`, when its turn waits (§20). */
        public ?NotifyOutcome $notify = null,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        $decision = Read::optionalObject($data, 'decision');
        return new self(
            Read::string($data, 'id'),
            Read::int($data, 'owner_uid'),
            Read::enum($data, 'status', RunStatus::class),
            Read::enum($data, 'privacy_level', PrivacyLevel::class),
            Read::bool($data, 'require_second_approver'),
            Read::optionalTime($data, 'expires_at'),
            Turn::fromArray(Read::object($data, 'turn')),
            $decision === null ? null : Decision::fromArray($decision),
            Read::time($data, 'created_at'),
            Read::time($data, 'updated_at'),
            Read::enum($data, 'format', ModelInputFormat::class),
            isset($data['released_calls'])
                ? array_map(ReleasedCall::fromArray(...), Read::listOfObjects($data, 'released_calls'))
                : [],
            isset($data['notify']) ? NotifyOutcome::fromArray(Read::object($data, 'notify')) : null,
        );
    }
}

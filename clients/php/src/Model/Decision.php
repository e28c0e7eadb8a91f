<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\DecidedBy;
use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Internal\Read;

/** A turn's recorded decision. */
final readonly class Decision
{
    /**
     * @param ?bool $approved true: every call approved; false: every call denied; null: mixed
     * @param list<RecordedVerdict> $calls
     */
    public function __construct(
        public ?bool $approved,
        public DecidedBy $decidedBy,
        public ?int $deciderUid,
        public ?DenialReason $reason,
        public string $turnDigest,
        public \DateTimeImmutable $decidedAt,
        public array $calls,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        return new self(
            Read::optionalBool($data, 'approved'),
            Read::enum($data, 'decided_by', DecidedBy::class),
            Read::optionalInt($data, 'decider_uid'),
            Read::optionalEnum($data, 'reason', DenialReason::class),
            Read::string($data, 'turn_digest'),
            Read::time($data, 'decided_at'),
            array_map(RecordedVerdict::fromArray(...), Read::listOfObjects($data, 'calls')),
        );
    }
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Internal\Read;

/** What a recorded decision says of one call (edited arguments are not repeated, only that there were some). */
final readonly class RecordedVerdict
{
    public function __construct(
        public string $callId,
        public bool $approved,
        public ?DenialReason $reason,
        public bool $edited,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        return new self(
            Read::string($data, 'call_id'),
            Read::bool($data, 'approved'),
            Read::optionalEnum($data, 'reason', DenialReason::class),
            Read::bool($data, 'edited'),
        );
    }
}

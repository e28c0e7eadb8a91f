<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\Outcome;
use ApprovalResume\Internal\Read;

/** One pending call's result: for a denial, the ADR-200 text the model reads, naming who declined. */
final readonly class ToolResult
{
    public function __construct(
        public string $callId,
        public string $tool,
        public Outcome $outcome,
        public bool $isError,
        public string $content,
        public bool $edited,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        return new self(
            Read::string($data, 'call_id'),
            Read::string($data, 'tool'),
            Read::enum($data, 'outcome', Outcome::class),
            Read::bool($data, 'is_error'),
            Read::string($data, 'content'),
            Read::bool($data, 'edited'),
        );
    }
}

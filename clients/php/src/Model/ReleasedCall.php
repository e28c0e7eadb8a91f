<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Internal\Read;

/**
 * A call a decision released to the worker (docs/design.md §15): the worker runs it with `$arguments` (the edited
 * ones where the decider edited them; null where the reader's view hides arguments) and posts its result, which
 * `$resultContent` and `$resultIsError` show once it is recorded (null until then).
 */
final readonly class ReleasedCall
{
    public function __construct(
        public string $callId,
        public string $tool,
        public ?string $arguments,
        public bool $edited,
        public ?string $resultContent,
        public ?bool $resultIsError,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        $result = Read::optionalObject($data, 'result');
        return new self(
            Read::string($data, 'call_id'),
            Read::string($data, 'tool'),
            Read::optionalString($data, 'arguments'),
            Read::bool($data, 'edited'),
            $result === null ? null : Read::string($result, 'content'),
            $result === null ? null : Read::bool($result, 'is_error'),
        );
    }
}

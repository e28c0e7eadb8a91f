<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\Effect;
use ApprovalResume\Internal\Read;

/**
 * A call of the current turn, as the run view shows it: its arguments are the JSON text the model produced, always
 * there for an API key; null for a decision token where the run's privacy level hides payloads.
 */
final readonly class PendingCall
{
    public function __construct(
        public string $id,
        public string $name,
        public ?string $arguments,
        public Effect $effect,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        return new self(
            Read::string($data, 'id'),
            Read::string($data, 'name'),
            Read::optionalString($data, 'arguments'),
            Read::enum($data, 'effect', Effect::class),
        );
    }
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\Effect;
use ApprovalResume\Enum\Executor;
use ApprovalResume\Internal\Read;

/**
 * A call of the current turn, as the run view shows it: its arguments are the JSON text the model produced, always
 * there for an API key; null for a decision token where the run's privacy level hides payloads. `executor` says who
 * runs it once approved (the service's executor, or the worker after a release, docs/design.md §15); `editable`
 * whether an approval may change its arguments.
 */
final readonly class PendingCall
{
    public function __construct(
        public string $id,
        public string $name,
        public ?string $arguments,
        public Effect $effect,
        public Executor $executor,
        public bool $editable,
        /** While the turn waits, the remembered decision that would decide this call (docs/design.md §18). */
        public ?DecidingRule $rule = null,
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
            Read::enum($data, 'executor', Executor::class),
            Read::bool($data, 'editable'),
            DecidingRule::ofCall($data),
        );
    }
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\Effect;
use ApprovalResume\Enum\Executor;
use ApprovalResume\Internal\Read;

/**
 * A pending call as the inbox lists it. `$arguments` is present only where the run's privacy level allows
 * (verbatim at full, redacted at redacted); `$argumentsOmitted` says the page's byte budget ran out before it
 * (`Client::getRun()` shows them). `$approvable` is false for a write call the acting user may not approve: such
 * a turn may still be denied. `$executor` says who runs the call once approved (the service, or the worker after a
 * release, docs/design.md §15) and `$editable` whether an approval may change its arguments: an inbox offers no
 * edit where it is false, since the service refuses one (422 `not_editable`).
 */
final readonly class InboxCall
{
    public function __construct(
        public string $id,
        public string $name,
        public Effect $effect,
        public Executor $executor,
        public bool $editable,
        public ?string $arguments,
        public bool $argumentsOmitted,
        public bool $approvable,
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
            Read::enum($data, 'effect', Effect::class),
            Read::enum($data, 'executor', Executor::class),
            Read::bool($data, 'editable'),
            Read::optionalString($data, 'arguments'),
            Read::optionalBool($data, 'arguments_omitted') ?? false,
            Read::bool($data, 'approvable'),
            DecidingRule::ofCall($data),
        );
    }
}

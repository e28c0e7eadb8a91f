<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\Effect;
use ApprovalResume\Enum\Executor;

/**
 * A tool a run declares beyond its effect (docs/design.md §15): who runs its approved calls and whether a decider
 * may edit their arguments. Null leaves each to the service's tool configuration (else `service`, editable).
 */
final readonly class DeclaredTool
{
    public function __construct(
        public Effect $effect,
        public ?Executor $executor = null,
        public ?bool $editable = null,
    ) {
    }

    /** @return array<string, string|bool> the tool's members of `RegisterRun.tools[]` without its name */
    public function toArray(): array
    {
        $tool = ['effect' => $this->effect->value];
        if ($this->executor !== null) {
            $tool['executor'] = $this->executor->value;
        }
        if ($this->editable !== null) {
            $tool['editable'] = $this->editable;
        }
        return $tool;
    }
}

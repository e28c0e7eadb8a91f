<?php

declare(strict_types=1);

namespace ApprovalResume;

use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Internal\Json;

/**
 * A verdict on one pending call, for `Client::decideCalls()`: approve (as proposed, or edited) or deny, as proposed
 * or denied optionally remembered as a rule for later calls of the tool (`Remember`, docs/design.md §18).
 */
final readonly class Verdict
{
    private function __construct(
        public string $callId,
        public bool $approved,
        public ?DenialReason $reason,
        public ?string $arguments,
        public ?Remember $remember,
    ) {
    }

    public static function approve(string $callId, ?Remember $remember = null): self
    {
        return new self($callId, true, null, null, $remember);
    }

    /**
     * Approve with edited arguments: the text of a JSON object, or an array encoded as one. The model is told
     * that a person changed them, who, and to what (docs/design.md §3).
     *
     * @param string|array<string, mixed> $arguments
     */
    public static function approveEdited(string $callId, string|array $arguments): self
    {
        if (is_array($arguments)) {
            if ($arguments !== [] && array_is_list($arguments)) {
                throw new \InvalidArgumentException('edited arguments are a JSON object, not a list');
            }
            // An empty array would encode as `[]`; the object it stands for is `{}`.
            $arguments = $arguments === [] ? '{}' : Json::encode($arguments);
        }
        return new self($callId, true, null, $arguments, null);
    }

    /** Deny, optionally saying why: `variant` (propose another version) or `skip` (do not propose it again). */
    public static function deny(string $callId, ?DenialReason $reason = null, ?Remember $remember = null): self
    {
        return new self($callId, false, $reason, null, $remember);
    }

    /** @return array<string, mixed> the member of the decision body's `calls` */
    public function toArray(): array
    {
        $call = ['call_id' => $this->callId, 'approved' => $this->approved];
        if ($this->reason !== null) {
            $call['reason'] = $this->reason->value;
        }
        if ($this->arguments !== null) {
            $call['arguments'] = $this->arguments;
        }
        return $this->remember?->addToCall($call) ?? $call;
    }
}

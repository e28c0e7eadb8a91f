<?php

declare(strict_types=1);

namespace ApprovalResume;

use ApprovalResume\Enum\RuleScope;

/**
 * A decision remembered as a rule (docs/design.md §18), for `approveTurn()`, `denyTurn()`, `Verdict::approve()` and
 * `Verdict::deny()`: "allow for this conversation" is `Remember::run()` on an approval, "never in this conversation"
 * `Remember::run()` on a denial; `Remember::owner($until)` covers the owner's runs of the tool until then (at most
 * MAX_RULE_TTL_DAYS ahead). The service makes one rule per distinct tool and verdict, without arguments, as part of
 * the decision: a decision whose rule is refused is refused whole, and its replay makes no second rule. An edited
 * approval cannot be remembered.
 */
final readonly class Remember
{
    private function __construct(
        public RuleScope $scope,
        public ?\DateTimeImmutable $until,
    ) {
    }

    /** The later turns of this run. */
    public static function run(): self
    {
        return new self(RuleScope::Run, null);
    }

    /** The owner's runs, for the tool, until `$until` (a rule of the owner or an admin only). */
    public static function owner(\DateTimeInterface $until): self
    {
        return new self(RuleScope::Owner, \DateTimeImmutable::createFromInterface($until));
    }

    /**
     * @param array<string, mixed> $body a decision body, or one call of its `calls`
     * @return array<string, mixed>
     */
    public function addTo(array $body): array
    {
        $body['remember'] = $this->scope->value;
        if ($this->until !== null) {
            $body['remember_until'] = $this->until->format(\DateTimeInterface::RFC3339_EXTENDED);
        }
        return $body;
    }

    /**
     * One call of a decision's `calls`, marked to be remembered: only its scope, since the service takes one
     * `remember_until` for the whole decision (`Client::decideCalls()` puts it there).
     *
     * @param array<string, mixed> $call
     * @return array<string, mixed>
     */
    public function addToCall(array $call): array
    {
        $call['remember'] = $this->scope->value;
        return $call;
    }
}

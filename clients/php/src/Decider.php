<?php

declare(strict_types=1);

namespace ApprovalResume;

/**
 * Who a decision is made by (docs/design.md §4, §13): a named backend user, nobody (`decider_uid: null`, which needs
 * the scope `decisions:anonymous` and may never release a write), or the person a decision token was minted for (the
 * body then names no decider; the service takes the token's `sub`).
 */
final readonly class Decider
{
    private function __construct(
        public ?int $uid,
        private bool $named,
    ) {
    }

    /** A backend user of the client's tenant: the owner, an admin, or a user allowed to approve others' runs. */
    public static function user(int $uid): self
    {
        if ($uid < 1) {
            throw new \InvalidArgumentException('a decider uid is at least 1');
        }
        return new self($uid, true);
    }

    /** Nobody: the model is told "a human reviewer" (`decided_by: unknown`). */
    public static function nobody(): self
    {
        return new self(null, true);
    }

    /** With a decision token as the credential: the token's `sub` decides. */
    public static function tokenHolder(): self
    {
        return new self(null, false);
    }

    /**
     * @param array<string, mixed> $body
     * @return array<string, mixed>
     */
    public function addTo(array $body): array
    {
        if ($this->named) {
            $body['decider_uid'] = $this->uid;
        }
        return $body;
    }
}

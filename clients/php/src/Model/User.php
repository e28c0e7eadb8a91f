<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Internal\Read;

/** A backend user as the service holds it (`PUT /v1/users/{uid}`'s answer). */
final readonly class User
{
    /** @param ?list<string> $approvableTools the tools whose write calls this user may approve; null: no limit */
    public function __construct(
        public int $uid,
        public string $username,
        public bool $isAdmin,
        public bool $canApproveOthers,
        public bool $disabled,
        public ?array $approvableTools,
        public \DateTimeImmutable $createdAt,
        public \DateTimeImmutable $updatedAt,
        /** Where the mail of docs/design.md §20 goes; null: the user gets none. */
        public ?string $email = null,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        return new self(
            Read::int($data, 'uid'),
            Read::string($data, 'username'),
            Read::bool($data, 'is_admin'),
            Read::bool($data, 'can_approve_others'),
            Read::bool($data, 'disabled'),
            Read::optionalStrings($data, 'approvable_tools'),
            Read::time($data, 'created_at'),
            Read::time($data, 'updated_at'),
            Read::optionalString($data, 'email'),
        );
    }
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Internal\Read;

/**
 * An approval link (docs/design.md §20), as `createLink` answers it: whoever holds `$url` decides the run's waiting
 * turn as the person it was made for, once, until `$expiresAt`; it is shown only in this answer, so never put it
 * where a model can read it. `$id` is what `revokeLink` names.
 */
final readonly class ApprovalLink
{
    public function __construct(
        public string $id,
        public string $url,
        public \DateTimeImmutable $expiresAt,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        return new self(Read::string($data, 'id'), Read::string($data, 'url'), Read::time($data, 'expires_at'));
    }
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Internal\Read;

/** One page of the approvals inbox, newest first; pass `$nextCursor` back as the cursor until it is null. */
final readonly class InboxPage
{
    /** @param list<InboxItem> $items */
    public function __construct(
        public array $items,
        public ?string $nextCursor,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        return new self(
            array_map(InboxItem::fromArray(...), Read::listOfObjects($data, 'items')),
            Read::optionalString($data, 'next_cursor'),
        );
    }
}

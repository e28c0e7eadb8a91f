<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\NotifySkipReason;
use ApprovalResume\Internal\Read;

/**
 * Who a registration's or new turn's `notify` mails (docs/design.md §20): a mail is queued for each uid of `$queued`
 * (sent after the commit), and `$skipped` says why each other one gets none. Only in the answer of the request that
 * named `notify`, when its turn waits.
 */
final readonly class NotifyOutcome
{
    /**
     * @param list<int> $queued
     * @param array<int, NotifySkipReason> $skipped the reason by uid, in the answer's order
     */
    public function __construct(
        public array $queued,
        public array $skipped,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        $skipped = [];
        foreach (Read::listOfObjects($data, 'skipped') as $entry) {
            $skipped[Read::int($entry, 'uid')] = Read::enum($entry, 'reason', NotifySkipReason::class);
        }
        return new self(Read::ints($data, 'queued'), $skipped);
    }
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Internal\Read;

/** A run's current turn: its index, its digest (which a decision must name) and its pending calls in order. */
final readonly class Turn
{
    /** @param list<PendingCall> $pendingCalls */
    public function __construct(
        public int $index,
        public string $digest,
        public array $pendingCalls,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        return new self(
            Read::int($data, 'index'),
            Read::string($data, 'digest'),
            array_map(PendingCall::fromArray(...), Read::listOfObjects($data, 'pending_calls')),
        );
    }
}

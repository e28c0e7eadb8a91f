<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/** What a remembered decision decides of each call it matches (docs/design.md §18). The values are the wire tokens. */
enum RuleVerdict: string
{
    case Approve = 'approve';
    case Deny = 'deny';
}

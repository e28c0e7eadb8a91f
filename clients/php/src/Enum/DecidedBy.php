<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/**
 * Who decided a turn, as the model and the audit name it (docs/design.md §2). The values are the wire tokens of
 * openapi.yaml.
 */
enum DecidedBy: string
{
    case RunOwner = 'run_owner';
    case OtherUser = 'other_user';
    case Unknown = 'unknown';
}

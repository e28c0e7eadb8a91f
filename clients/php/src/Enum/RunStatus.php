<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/** The life of a run (docs/design.md §5). The values are the wire tokens of openapi.yaml. */
enum RunStatus: string
{
    case WaitingForApproval = 'waiting_for_approval';
    case Resuming = 'resuming';
    case Released = 'released';
    case Resumed = 'resumed';
    case Cancelled = 'cancelled';
    case Completed = 'completed';
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/** How one pending call ended (docs/design.md §2). The values are the wire tokens of openapi.yaml. */
enum Outcome: string
{
    case Ok = 'ok';
    case Failed = 'failed';
    case Denied = 'denied';
    case NotPermitted = 'not_permitted';
    case Interrupted = 'interrupted';
    case Expired = 'expired';
}

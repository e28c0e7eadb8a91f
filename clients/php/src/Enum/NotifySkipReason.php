<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/**
 * Why a person named in `notify` gets no mail for the turn (docs/design.md §20): no such user, disabled, not allowed
 * to decide the run (§4), or without an `email`. The values are the wire tokens of openapi.yaml.
 */
enum NotifySkipReason: string
{
    case UnknownUser = 'unknown_user';
    case Disabled = 'disabled';
    case MayNotDecide = 'may_not_decide';
    case NoEmail = 'no_email';
}

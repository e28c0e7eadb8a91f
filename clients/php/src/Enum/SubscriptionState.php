<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/**
 * A webhook subscription's state: `failing` once deliveries have failed for longer than the service's retry window
 * (still retried), `active` again at the next success. The values are the wire tokens of openapi.yaml.
 */
enum SubscriptionState: string
{
    case Active = 'active';
    case Failing = 'failing';
}

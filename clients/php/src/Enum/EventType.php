<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/**
 * The events a webhook subscription or the feed carries (docs/design.md §10). The values are the wire tokens of
 * openapi.yaml.
 */
enum EventType: string
{
    case RunWaiting = 'run.waiting';
    case RunReleased = 'run.released';
    case RunResumed = 'run.resumed';
    case RunExpired = 'run.expired';
    case RunCancelled = 'run.cancelled';
    case RunCompleted = 'run.completed';
    case RuleCreated = 'rule.created';
    case RuleRevoked = 'rule.revoked';
}

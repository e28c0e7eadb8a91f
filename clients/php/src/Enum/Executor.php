<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/**
 * Who runs an approved call (docs/design.md §15): the service through its configured executor, or the worker, to
 * which the approval releases the call and which posts its result. The values are the wire tokens of openapi.yaml.
 */
enum Executor: string
{
    case Service = 'service';
    case Worker = 'worker';
}

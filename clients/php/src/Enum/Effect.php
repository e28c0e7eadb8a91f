<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/**
 * What a tool does to the world; only write calls are gated by approvable_tools (docs/design.md §4). The values are the
 * wire tokens of openapi.yaml.
 */
enum Effect: string
{
    case Read = 'read';
    case Write = 'write';
}

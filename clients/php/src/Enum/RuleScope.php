<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/**
 * What a remembered decision covers (docs/design.md §18): the later turns of one run ("for the rest of this
 * conversation"), or the owner's runs, for one tool, until the rule expires. The values are the wire tokens.
 */
enum RuleScope: string
{
    case Run = 'run';
    case Owner = 'owner';
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/**
 * Privacy levels of stored tool events, strictest first (docs/design.md §6). The values are the wire tokens of
 * openapi.yaml.
 */
enum PrivacyLevel: string
{
    case None = 'none';
    case Metadata = 'metadata';
    case Redacted = 'redacted';
    case Full = 'full';
}

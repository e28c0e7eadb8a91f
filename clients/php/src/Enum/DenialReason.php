<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/**
 * Why a person denied a call, when they said: `variant` (propose another version) or `skip` (do not propose it
 * again). The values are the wire tokens of openapi.yaml.
 */
enum DenialReason: string
{
    case Variant = 'variant';
    case Skip = 'skip';
}

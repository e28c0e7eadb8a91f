<?php

declare(strict_types=1);

namespace ApprovalResume\Enum;

/**
 * The provider format a resumed model input is rendered in (docs/design.md §7), and the one a run may be registered
 * in (§14). The values are the wire tokens of
 * openapi.yaml.
 */
enum ModelInputFormat: string
{
    case OpenAiChat = 'openai-chat';
    case Anthropic = 'anthropic';
    case OpenAiResponses = 'openai-responses';
    case Gemini = 'gemini';
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\ModelInputFormat;
use ApprovalResume\Internal\Read;

/**
 * A resumed model input, ready for the provider its format names. `$body` is the whole object as the service
 * answered it (`messages`, or `system` + `messages` for anthropic, `instructions` + `input` for openai-responses),
 * to be sent on as it is.
 */
final readonly class ModelInput
{
    /** @param array<mixed> $body */
    public function __construct(
        public ModelInputFormat $format,
        public array $body,
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        return new self(Read::enum($data, 'format', ModelInputFormat::class), $data);
    }
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Internal;

/** JSON in and out, failing loudly: a body the client cannot read is an error, never a silent null. */
final class Json
{
    public static function encode(mixed $value): string
    {
        return json_encode($value, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
    }

    /**
     * `$text` is kept out of exception traces: an answer may carry a secret (a webhook's) or a run's payloads.
     *
     * @return array<mixed>
     */
    public static function decodeObject(#[\SensitiveParameter] string $text): array
    {
        // Big integers stay exact as strings rather than turning into floats.
        $value = json_decode($text, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
        if (!is_array($value)) {
            throw new \UnexpectedValueException('the answer is not a JSON object');
        }
        return $value;
    }
}

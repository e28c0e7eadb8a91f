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
     * A JSON object given as its text or as an array, as the value to put in a body: `[]` stands for `{}` (PHP's
     * empty array would encode as a list), and text keeps `{}` and `[]` apart by decoding to objects.
     *
     * @param string|array<string, mixed> $value
     * @return array<string, mixed>|\stdClass
     */
    public static function objectValue(string|array $value, string $what): array|\stdClass
    {
        if (is_string($value)) {
            $value = json_decode($value, false, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
            if (!$value instanceof \stdClass) {
                throw new \InvalidArgumentException("{$what} is a JSON object");
            }
            return $value;
        }
        if ($value !== [] && array_is_list($value)) {
            throw new \InvalidArgumentException("{$what} is a JSON object, not a list");
        }
        return $value === [] ? new \stdClass() : $value;
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

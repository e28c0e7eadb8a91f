<?php

declare(strict_types=1);

namespace ApprovalResume\Internal;

/**
 * Typed reads of a decoded answer's members. An answer that does not have the shape openapi.yaml gives it throws
 * UnexpectedValueException naming the member (never its value), instead of carrying a wrong type further.
 */
final class Read
{
    /** @param array<mixed> $data */
    public static function string(array $data, string $key): string
    {
        $value = $data[$key] ?? null;
        return is_string($value) ? $value : throw self::wrong($key, 'a string');
    }

    /** @param array<mixed> $data */
    public static function optionalString(array $data, string $key): ?string
    {
        $value = $data[$key] ?? null;
        return $value === null || is_string($value) ? $value : throw self::wrong($key, 'a string or null');
    }

    /** @param array<mixed> $data */
    public static function int(array $data, string $key): int
    {
        $value = $data[$key] ?? null;
        return is_int($value) ? $value : throw self::wrong($key, 'an integer');
    }

    /** @param array<mixed> $data */
    public static function optionalInt(array $data, string $key): ?int
    {
        $value = $data[$key] ?? null;
        return $value === null || is_int($value) ? $value : throw self::wrong($key, 'an integer or null');
    }

    /** @param array<mixed> $data */
    public static function bool(array $data, string $key): bool
    {
        $value = $data[$key] ?? null;
        return is_bool($value) ? $value : throw self::wrong($key, 'a boolean');
    }

    /** @param array<mixed> $data */
    public static function optionalBool(array $data, string $key): ?bool
    {
        $value = $data[$key] ?? null;
        return $value === null || is_bool($value) ? $value : throw self::wrong($key, 'a boolean or null');
    }

    /**
     * @param array<mixed> $data
     * @return array<mixed>
     */
    public static function object(array $data, string $key): array
    {
        $value = $data[$key] ?? null;
        return is_array($value) ? $value : throw self::wrong($key, 'an object');
    }

    /**
     * @param array<mixed> $data
     * @return ?array<mixed>
     */
    public static function optionalObject(array $data, string $key): ?array
    {
        $value = $data[$key] ?? null;
        return $value === null || is_array($value) ? $value : throw self::wrong($key, 'an object or null');
    }

    /**
     * @param array<mixed> $data
     * @return list<array<mixed>>
     */
    public static function listOfObjects(array $data, string $key): array
    {
        $value = $data[$key] ?? null;
        if (!is_array($value) || !array_is_list($value)) {
            throw self::wrong($key, 'a list');
        }
        foreach ($value as $item) {
            if (!is_array($item)) {
                throw self::wrong($key, 'a list of objects');
            }
        }
        return $value;
    }

    /**
     * @param array<mixed> $data
     * @return ?list<string>
     */
    public static function optionalStrings(array $data, string $key): ?array
    {
        $value = $data[$key] ?? null;
        if ($value === null) {
            return null;
        }
        if (!is_array($value) || !array_is_list($value) || array_filter($value, 'is_string') !== $value) {
            throw self::wrong($key, 'a list of strings or null');
        }
        return $value;
    }

    /**
     * @param array<mixed> $data
     * @return list<int>
     */
    public static function ints(array $data, string $key): array
    {
        $value = $data[$key] ?? null;
        if (!is_array($value) || !array_is_list($value) || array_filter($value, 'is_int') !== $value) {
            throw self::wrong($key, 'a list of integers');
        }
        return $value;
    }

    /** @param array<mixed> $data */
    public static function time(array $data, string $key): \DateTimeImmutable
    {
        return self::parseTime(self::string($data, $key), $key);
    }

    /** @param array<mixed> $data */
    public static function optionalTime(array $data, string $key): ?\DateTimeImmutable
    {
        $text = self::optionalString($data, $key);
        return $text === null ? null : self::parseTime($text, $key);
    }

    /**
     * @template T of \BackedEnum
     * @param array<mixed> $data
     * @param class-string<T> $enum
     * @return T
     */
    public static function enum(array $data, string $key, string $enum): \BackedEnum
    {
        return $enum::tryFrom(self::string($data, $key)) ?? throw self::wrong($key, "one of {$enum}'s values");
    }

    /**
     * @template T of \BackedEnum
     * @param array<mixed> $data
     * @param class-string<T> $enum
     * @return ?T
     */
    public static function optionalEnum(array $data, string $key, string $enum): ?\BackedEnum
    {
        $text = self::optionalString($data, $key);
        return $text === null ? null : ($enum::tryFrom($text) ?? throw self::wrong($key, "one of {$enum}'s values"));
    }

    private static function parseTime(string $text, string $key): \DateTimeImmutable
    {
        try {
            return new \DateTimeImmutable($text);
        } catch (\Exception) {
            throw self::wrong($key, 'an RFC 3339 date-time');
        }
    }

    private static function wrong(string $key, string $expected): \UnexpectedValueException
    {
        return new \UnexpectedValueException(sprintf('answer member "%s" is not %s', $key, $expected));
    }
}

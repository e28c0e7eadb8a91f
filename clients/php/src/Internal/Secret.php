<?php

declare(strict_types=1);

namespace ApprovalResume\Internal;

/**
 * A secret (an API key or decision token, a signing key, a webhook secret) held so that no dump, export or
 * serialization of the object holding it shows it. `var_dump()` and `print_r()` go through `__debugInfo`, but
 * `var_export()`, `(array)` casts and `debug_zval_dump()` read an object's properties directly and honour no hook:
 * so the value is no property at all. It lives in a static WeakMap keyed by this object (static properties are never
 * exported, and the entry goes with the object); `serialize()` is refused, since the value could not come back
 * with it; `json_encode()` finds no public member. Only `reveal()` gives it out.
 */
final class Secret
{
    /** @var ?\WeakMap<self, string> */
    private static ?\WeakMap $values = null;

    public function __construct(#[\SensitiveParameter] string $value)
    {
        self::$values ??= new \WeakMap();
        self::$values[$this] = $value;
    }

    public function reveal(): string
    {
        $values = self::$values ?? throw new \LogicException('no secret was ever held');
        return $values[$this] ?? throw new \LogicException('this secret holds no value');
    }

    /** @return array<string, string> */
    public function __debugInfo(): array
    {
        return ['value' => '(secret)'];
    }

    /** Refused, always. */
    public function __serialize(): array
    {
        throw new \LogicException('a secret is not serialized: keep it in a secret store, and build the object anew');
    }

    /** @param array<mixed> $data */
    public function __unserialize(array $data): void
    {
        throw new \LogicException('a secret is not unserialized');
    }

    /** A clone would be a new key of the map, without the value: holders share the one Secret instead. */
    private function __clone()
    {
    }
}

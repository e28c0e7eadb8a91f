<?php

declare(strict_types=1);

namespace ApprovalResume\Http;

/** One HTTP answer as a transport received it: status, headers (names in lowercase) and the body's bytes. */
final readonly class Response
{
    /** @param array<string, string> $headers the last value of each header, keyed by its lowercase name */
    public function __construct(
        public int $status,
        public array $headers,
        public string $body,
    ) {
    }

    public function header(string $name): ?string
    {
        return $this->headers[strtolower($name)] ?? null;
    }
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Tests\Support;

use ApprovalResume\Http\Response;
use ApprovalResume\Http\Transport;

/**
 * Answers each request with the next of the answers it was given, and keeps the requests: for what a test must see
 * the client do with an answer the binary would not give (a malformed one), or before the binary has the route.
 */
final class ScriptedTransport implements Transport
{
    /** @var list<array{method: string, url: string, headers: list<string>, body: ?string}> */
    public array $requests = [];

    /** @param list<Response> $answers */
    public function __construct(private array $answers)
    {
    }

    /** An answer of `$status` with `$body` as JSON (a problem document when the status is no success). */
    public static function json(int $status, mixed $body): Response
    {
        $type = $status >= 200 && $status < 300 ? 'application/json' : 'application/problem+json';
        return new Response($status, ['content-type' => $type], $status === 204 ? '' : json_encode($body));
    }

    public function send(
        string $method,
        string $url,
        #[\SensitiveParameter] array $headers,
        ?string $body,
    ): Response {
        $this->requests[] = ['method' => $method, 'url' => $url, 'headers' => $headers, 'body' => $body];
        return array_shift($this->answers) ?? throw new \LogicException("no answer left for {$method} {$url}");
    }
}

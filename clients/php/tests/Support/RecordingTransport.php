<?php

declare(strict_types=1);

namespace ApprovalResume\Tests\Support;

use ApprovalResume\Http\Response;
use ApprovalResume\Http\Transport;
use ApprovalResume\TransportException;

/** Keeps the request the client would send, and answers none: for checking requests against openapi.yaml. */
final class RecordingTransport implements Transport
{
    /** @var list<array{method: string, url: string, headers: list<string>, body: ?string}> */
    public array $requests = [];

    public function send(
        string $method,
        string $url,
        #[\SensitiveParameter] array $headers,
        ?string $body,
    ): Response {
        $this->requests[] = ['method' => $method, 'url' => $url, 'headers' => $headers, 'body' => $body];
        throw new TransportException('recorded, not sent');
    }
}

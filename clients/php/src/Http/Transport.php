<?php

declare(strict_types=1);

namespace ApprovalResume\Http;

use ApprovalResume\TransportException;

/** Sends one HTTP request. The client's only way out, so a host can route it through its own HTTP stack. */
interface Transport
{
    /**
     * An implementation marks `$headers` `#[\SensitiveParameter]` as well (PHP does not inherit the attribute): they
     * hold the API key or decision token, which must not reach the trace of an exception thrown while sending.
     *
     * @param list<string> $headers lines such as "Authorization: Bearer …"
     * @throws TransportException when no answer arrived (connection refused, timeout, TLS failure)
     */
    public function send(
        string $method,
        string $url,
        #[\SensitiveParameter] array $headers,
        ?string $body,
    ): Response;
}

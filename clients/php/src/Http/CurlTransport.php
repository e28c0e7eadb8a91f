<?php

declare(strict_types=1);

namespace ApprovalResume\Http;

use ApprovalResume\TransportException;

/**
 * The transport over ext-curl. One handle is kept and reused, so requests to the same service share a keep-alive
 * connection. Redirects are not followed: the service never answers one, and following it would send the bearer
 * credential elsewhere.
 */
final class CurlTransport implements Transport
{
    private ?\CurlHandle $handle = null;

    public function __construct(
        private readonly int $timeoutMs = 30_000,
        private readonly int $connectTimeoutMs = 5_000,
    ) {
    }

    public function send(
        string $method,
        string $url,
        #[\SensitiveParameter] array $headers,
        ?string $body,
    ): Response {
        $handle = $this->handle ??= curl_init();
        curl_reset($handle);
        /** @var array<string, string> $received */
        $received = [];
        curl_setopt_array($handle, [
            CURLOPT_URL => $url,
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_HTTPHEADER => $headers,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_FOLLOWLOCATION => false,
            CURLOPT_PROTOCOLS => CURLPROTO_HTTP | CURLPROTO_HTTPS,
            CURLOPT_TIMEOUT_MS => $this->timeoutMs,
            CURLOPT_CONNECTTIMEOUT_MS => $this->connectTimeoutMs,
            CURLOPT_HEADERFUNCTION => static function ($handle, string $line) use (&$received): int {
                if (str_starts_with($line, 'HTTP/')) {
                    // A status line: an interim answer's headers (100 Continue) are not the final answer's.
                    $received = [];
                } elseif (str_contains($line, ':')) {
                    [$name, $value] = explode(':', $line, 2);
                    $received[strtolower(trim($name))] = trim($value);
                }
                return strlen($line);
            },
        ]);
        if ($body !== null) {
            curl_setopt($handle, CURLOPT_POSTFIELDS, $body);
        }
        $text = curl_exec($handle);
        if (!is_string($text)) {
            // curl's message names the host and the failure, never the request's headers or body.
            throw new TransportException(sprintf('%s request failed: %s', $method, curl_error($handle)));
        }
        return new Response((int) curl_getinfo($handle, CURLINFO_RESPONSE_CODE), $received, $text);
    }
}

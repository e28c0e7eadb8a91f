<?php

declare(strict_types=1);

namespace ApprovalResume;

use ApprovalResume\Http\Response;

/**
 * Every answer that is not a success, read from its application/problem+json body (RFC 9457; docs/design.md §8).
 * Switch on `$problemCode` (`already_decided`, `stale_turn`, `tool_not_approvable`, `token_expired`, …): it is
 * stable, unlike `detail`. (PHP's own `Exception::$code` is an int, so the problem's `code` member is held as
 * `$problemCode`; `getCode()` returns the HTTP status.)
 */
final class ApiException extends \RuntimeException
{
    /**
     * @param ?int $retryAfterSecs the Retry-After header of a 503 (and any other answer carrying one), in seconds
     */
    public function __construct(
        public readonly int $status,
        public readonly string $problemCode,
        public readonly string $detail,
        public readonly ?string $requestId,
        public readonly ?int $retryAfterSecs,
        public readonly ?string $type = null,
    ) {
        $message = sprintf('HTTP %d %s: %s', $status, $problemCode, $detail);
        if ($requestId !== null) {
            $message .= sprintf(' (request %s)', $requestId);
        }
        parent::__construct($message, $status);
    }

    /**
     * The exception for a non-2xx answer. A body that is no problem document (a proxy's HTML page, say) is
     * `unexpected_response`, described by its status and content type only, never by its bytes.
     */
    public static function fromResponse(Response $response): self
    {
        $requestId = $response->header('x-request-id');
        $retryAfter = self::retryAfterSecs($response->header('retry-after'));
        $contentType = strtolower(trim(explode(';', $response->header('content-type') ?? '')[0]));
        $problem = null;
        if ($contentType === 'application/problem+json') {
            try {
                $problem = json_decode($response->body, true, 64, JSON_THROW_ON_ERROR);
            } catch (\JsonException) {
                $problem = null;
            }
        }
        if (!is_array($problem) || !is_string($problem['code'] ?? null)) {
            return new self(
                $response->status,
                'unexpected_response',
                sprintf('HTTP %d with content type "%s", not a problem document', $response->status, $contentType),
                $requestId,
                $retryAfter,
            );
        }
        return new self(
            $response->status,
            $problem['code'],
            is_string($problem['detail'] ?? null) ? $problem['detail'] : '',
            is_string($problem['request_id'] ?? null) ? $problem['request_id'] : $requestId,
            $retryAfter,
            is_string($problem['type'] ?? null) ? $problem['type'] : null,
        );
    }

    /** Retry-After as seconds: delay-seconds, or an HTTP date (RFC 9110 §10.2.3) counted from now. */
    private static function retryAfterSecs(?string $value): ?int
    {
        if ($value === null || $value === '') {
            return null;
        }
        if (ctype_digit($value)) {
            return (int) $value;
        }
        $at = \DateTimeImmutable::createFromFormat(\DateTimeInterface::RFC7231, $value);
        return $at === false ? null : max(0, $at->getTimestamp() - time());
    }
}

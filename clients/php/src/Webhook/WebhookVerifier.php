<?php

declare(strict_types=1);

namespace ApprovalResume\Webhook;

use ApprovalResume\Internal\Secret;

/**
 * Verifies a webhook request as the Standard Webhooks specification says
 * (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md, "Signature scheme"
 * and "Verifying signatures"): the signed content is `{webhook-id}.{webhook-timestamp}.{body}`, the signature
 * HMAC-SHA256 keyed by the secret's bytes (`whsec_` + base64), sent as `v1,<base64>`; `webhook-signature` may hold
 * several, space-separated (a sender rotating its secret signs with both), and one that matches suffices;
 * `webhook-timestamp` must lie within a tolerance of now, against replays.
 *
 * Hand-written with hash_hmac and hash_equals (a constant-time comparison, as the specification asks): the
 * specification's own PHP library comes from Composer, and no PHP extension verifies these signatures. The secret
 * shows in no dump, export or serialization of the verifier (`Internal\Secret`); `serialize()` is refused.
 */
final class WebhookVerifier
{
    /** The tolerance the specification's libraries use: five minutes either way. */
    public const DEFAULT_TOLERANCE_SECS = 300;
    private const PREFIX = 'whsec_';

    private readonly Secret $key;

    public function __construct(
        #[\SensitiveParameter] string $secret,
        private readonly int $toleranceSecs = self::DEFAULT_TOLERANCE_SECS,
    ) {
        $encoded = str_starts_with($secret, self::PREFIX) ? substr($secret, strlen(self::PREFIX)) : $secret;
        $key = base64_decode($encoded, true);
        if ($key === false || $key === '') {
            throw new \InvalidArgumentException('a webhook secret is whsec_ and base64');
        }
        $this->key = new Secret($key);
    }

    /**
     * Checks the request and answers its event, decoded. `$headers`: the request's headers by name (any letter
     * case; a value may be a list, as some frameworks give them); `$body`: the raw bytes as received, never a
     * re-encoding of parsed JSON, which would not be the bytes that were signed.
     *
     * @param array<string, string|list<string>> $headers
     * @return array<mixed> the event: id, type, timestamp, data
     * @throws WebhookVerificationException
     */
    public function verify(string $body, array $headers, ?int $now = null): array
    {
        $id = self::header($headers, 'webhook-id');
        $timestamp = self::header($headers, 'webhook-timestamp');
        $signatures = self::header($headers, 'webhook-signature');
        if ($id === null || $timestamp === null || $signatures === null) {
            throw new WebhookVerificationException('missing webhook-id, webhook-timestamp or webhook-signature');
        }
        if (preg_match('/^[0-9]{1,19}$/', $timestamp) !== 1) {
            throw new WebhookVerificationException('webhook-timestamp is not Unix seconds');
        }
        $now ??= time();
        if ((int) $timestamp < $now - $this->toleranceSecs) {
            throw new WebhookVerificationException('webhook-timestamp is too old');
        }
        if ((int) $timestamp > $now + $this->toleranceSecs) {
            throw new WebhookVerificationException('webhook-timestamp is too far in the future');
        }
        $expected = base64_encode(hash_hmac('sha256', "{$id}.{$timestamp}.{$body}", $this->key->reveal(), true));
        $matched = false;
        foreach (explode(' ', $signatures) as $entry) {
            [$version, $signature] = array_pad(explode(',', $entry, 2), 2, '');
            // Other versions (`v1a`, asymmetric) are not this scheme's; they neither match nor refuse.
            if ($version === 'v1' && hash_equals($expected, $signature)) {
                $matched = true;
            }
        }
        if (!$matched) {
            throw new WebhookVerificationException('no signature matches');
        }
        try {
            $event = json_decode($body, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
        } catch (\JsonException) {
            throw new WebhookVerificationException('the signed body is not JSON');
        }
        if (!is_array($event)) {
            throw new WebhookVerificationException('the signed body is not a JSON object');
        }
        return $event;
    }

    /** @param array<string, string|list<string>> $headers */
    private static function header(array $headers, string $name): ?string
    {
        foreach ($headers as $key => $value) {
            if (strtolower((string) $key) === $name) {
                $value = is_array($value) ? implode(' ', $value) : $value;
                return trim($value);
            }
        }
        return null;
    }

    /** @return array<string, string> */
    public function __debugInfo(): array
    {
        return ['toleranceSecs' => (string) $this->toleranceSecs];
    }
}

<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\Client;
use ApprovalResume\Model\WebhookSubscription;
use ApprovalResume\Token\SigningKey;
use ApprovalResume\Webhook\WebhookVerifier;
use PHPUnit\Framework\TestCase;

/** Keys and secrets stay out of what a host logs by dumping the objects that hold them. */
final class SecretsTest extends TestCase
{
    public function test_objects_holding_a_key_or_secret_dump_without_it(): void
    {
        $key = SigningKey::generate();
        $secret = 'whsec_' . base64_encode(random_bytes(32));
        $subscription = WebhookSubscription::fromArray([
            'id' => '6f1c0e2a-0000-4000-8000-000000000000', 'url' => 'https://tasks.example.com/hook',
            'event_types' => ['run.waiting'], 'state' => 'active', 'backlog' => 0,
            'backlog_capped' => false, 'previous_secret_expires_at' => null,
            'created_at' => '2026-12-06T02:00:00Z', 'secret' => $secret,
        ]);
        $dumps = [
            print_r(new Client('http://127.0.0.1:8080', 'ar_the_api_key'), true),
            print_r($key, true),
            print_r(new WebhookVerifier($secret), true),
            print_r($subscription, true),
        ];
        foreach ($dumps as $dump) {
            self::assertStringNotContainsString('ar_the_api_key', $dump);
            self::assertStringNotContainsString($key->secretKey(), $dump);
            self::assertStringNotContainsString(base64_encode($key->secretKey()), $dump);
            self::assertStringNotContainsString(substr($secret, 6), $dump);
        }
        self::assertStringContainsString($key->publicKeyBase64(), $dumps[1], 'the public half may show');
    }
}

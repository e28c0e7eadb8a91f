<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\Enum\EventType;
use ApprovalResume\Enum\SubscriptionState;
use ApprovalResume\Tests\Support\Process;
use ApprovalResume\Tests\Support\Runs;
use ApprovalResume\Tests\Support\Service;
use ApprovalResume\Webhook\WebhookVerificationException;
use ApprovalResume\Webhook\WebhookVerifier;
use PHPUnit\Framework\TestCase;

/** Standard Webhooks verification: the specification's example, and requests the real service signed and sent. */
final class WebhookTest extends TestCase
{
    // The example of the specification (spec/standard-webhooks.md), as src/delivery/webhooks/sign.rs checks it too.
    private const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    private const ID = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
    private const TIMESTAMP = 1614265330;
    private const BODY = '{"test": 2432232314}';
    private const SIGNATURE = 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';

    public function test_the_specification_s_example_verifies_in_any_header_case_and_among_other_signatures(): void
    {
        $verifier = new WebhookVerifier(self::SECRET);
        $headers = [
            'Webhook-Id' => self::ID,
            'WEBHOOK-TIMESTAMP' => (string) self::TIMESTAMP,
            'webhook-signature' => self::SIGNATURE,
        ];
        self::assertSame(['test' => 2432232314], $verifier->verify(self::BODY, $headers, self::TIMESTAMP));

        // Rotation: an old secret's signature and an asymmetric one beside the valid one.
        $old = 'v1,' . base64_encode(str_repeat('x', 32));
        $headers['webhook-signature'] = "{$old} v1a,c2lnbmF0dXJl " . self::SIGNATURE;
        self::assertSame(['test' => 2432232314], $verifier->verify(self::BODY, $headers, self::TIMESTAMP + 299));
    }

    public function test_a_request_that_is_not_the_signed_one_or_not_from_now_is_refused(): void
    {
        $verifier = new WebhookVerifier(self::SECRET);
        $headers = [
            'webhook-id' => self::ID,
            'webhook-timestamp' => (string) self::TIMESTAMP,
            'webhook-signature' => self::SIGNATURE,
        ];
        $cases = [
            'another body' => [str_replace('4', '5', self::BODY), $headers, self::TIMESTAMP],
            'another id' => [self::BODY, ['webhook-id' => 'msg_other'] + $headers, self::TIMESTAMP],
            'too old' => [self::BODY, $headers, self::TIMESTAMP + 301],
            'from the future' => [self::BODY, $headers, self::TIMESTAMP - 301],
            'only other versions' => [
                self::BODY,
                ['webhook-signature' => 'v1a,' . substr(self::SIGNATURE, 3)] + $headers,
                self::TIMESTAMP,
            ],
            'no signature' => [self::BODY, array_diff_key($headers, ['webhook-signature' => true]), self::TIMESTAMP],
            'a timestamp that is no number' => [
                self::BODY,
                ['webhook-timestamp' => '1614265330.0'] + $headers,
                self::TIMESTAMP,
            ],
        ];
        foreach ($cases as $case => [$body, $caseHeaders, $now]) {
            try {
                $verifier->verify($body, $caseHeaders, $now);
                self::fail("{$case}: verified");
            } catch (WebhookVerificationException) {
                $this->addToAssertionCount(1);
            }
        }
        $this->expectException(WebhookVerificationException::class);
        $another = new WebhookVerifier('whsec_' . base64_encode(random_bytes(32)));
        $another->verify(self::BODY, $headers, self::TIMESTAMP);
    }

    public function test_a_request_the_service_signed_and_delivered_verifies_and_a_tampered_copy_does_not(): void
    {
        $service = Service::shared();
        $port = Process::freePort();
        $received = tempnam(sys_get_temp_dir(), 'webhooks-');
        $receiver = Process::start(
            [PHP_BINARY, '-S', "127.0.0.1:{$port}", __DIR__ . '/Support/receiver.php'],
            ['RECEIVED_FILE' => $received],
            $received . '.log',
        );
        try {
            Process::waitForPort($port, 10, static fn (): bool => proc_get_status($receiver)['running']);
            $url = "http://127.0.0.1:{$port}/approval-events";
            $subscription = $service->tasks()->createWebhook($url, [EventType::RunWaiting]);
            self::assertStringStartsWith('whsec_', (string) $subscription->secret);
            self::assertSame([EventType::RunWaiting], $subscription->eventTypes);
            self::assertSame(SubscriptionState::Active, $subscription->state);

            $owner = Runs::newUid();
            $service->worker()->putUser($owner, 'ada');
            $run = Runs::register($service->worker(), $owner);
            $request = self::awaitRequestFor($received, $run->id);

            $verifier = new WebhookVerifier((string) $subscription->secret);
            $event = $verifier->verify($request['body'], $request['headers']);
            self::assertSame('run.waiting', $event['type']);
            self::assertSame($run->id, $event['data']['run_id']);
            self::assertSame($request['headers']['webhook-id'], $event['id'], 'webhook-id is the event id');

            $tampered = str_replace('"run.waiting"', '"run.resumed"', $request['body']);
            self::assertNotSame($request['body'], $tampered);
            $this->assertRefused($verifier, $tampered, $request['headers']);
            $forged = ['webhook-signature' => 'v1,' . base64_encode(random_bytes(32))] + $request['headers'];
            $this->assertRefused($verifier, $request['body'], $forged);
            $replayed = (int) $request['headers']['webhook-timestamp'] + WebhookVerifier::DEFAULT_TOLERANCE_SECS + 1;
            try {
                $verifier->verify($request['body'], $request['headers'], $replayed);
                self::fail('a replay after the tolerance verified');
            } catch (WebhookVerificationException $error) {
                self::assertStringContainsString('too old', $error->getMessage());
            }

            // A rotation: the new secret is shown once, and while the old one overlaps both sign each request, the
            // very next one included (the service reads the secrets again before it sends).
            $rotated = $service->tasks()->rotateWebhookSecret($subscription->id, 600);
            self::assertSame($subscription->id, $rotated->id);
            self::assertStringStartsWith('whsec_', (string) $rotated->secret);
            self::assertNotSame($subscription->secret, $rotated->secret);
            self::assertNotNull($rotated->previousSecretExpiresAt);
            self::assertFalse($rotated->backlogCapped);
            $next = Runs::register($service->worker(), $owner);
            $signedTwice = self::awaitRequestFor($received, $next->id);
            self::assertSame($next->id, (new WebhookVerifier((string) $rotated->secret))
                ->verify($signedTwice['body'], $signedTwice['headers'])['data']['run_id']);
            $byOld = $verifier->verify($signedTwice['body'], $signedTwice['headers']);
            self::assertSame($next->id, $byOld['data']['run_id'], 'the old secret still signs during the overlap');
            $service->tasks()->removeWebhook($subscription->id);
        } finally {
            Process::stop($receiver);
            @unlink($received);
            @unlink($received . '.log');
        }
    }

    /** @param array<string, string> $headers */
    private function assertRefused(WebhookVerifier $verifier, string $body, array $headers): void
    {
        try {
            $verifier->verify($body, $headers);
            self::fail('a tampered request verified');
        } catch (WebhookVerificationException $error) {
            self::assertSame('no signature matches', $error->getMessage());
        }
    }

    /** @return array{headers: array<string, string>, body: string} the first request the receiver kept for the run */
    private static function awaitRequestFor(string $file, string $runId): array
    {
        $deadline = microtime(true) + 20;
        while (microtime(true) < $deadline) {
            foreach (file($file, FILE_IGNORE_NEW_LINES) ?: [] as $line) {
                $request = json_decode($line, true, 512, JSON_THROW_ON_ERROR);
                if (str_contains($request['body'], $runId)) {
                    return $request;
                }
            }
            usleep(100_000);
        }
        self::fail("no webhook request for run {$runId} within 20 s");
    }
}

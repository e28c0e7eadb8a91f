<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\Client;
use ApprovalResume\Internal\Secret;
use ApprovalResume\Model\WebhookSubscription;
use ApprovalResume\Tests\Support\Process;
use ApprovalResume\Tests\Support\ScriptedTransport;
use ApprovalResume\Token\DecisionTokenSigner;
use ApprovalResume\Token\SigningKey;
use ApprovalResume\TransportException;
use ApprovalResume\Webhook\WebhookVerifier;
use PHPUnit\Framework\TestCase;

/**
 * Keys and secrets stay out of whatever a host logs, caches or sends to an error tracker: dumps, exports,
 * serializations and JSON of the objects that hold them, and the arguments in exception traces. Each check plants a
 * canary secret and looks for it in the output.
 */
final class SecretsTest extends TestCase
{
    private const API_KEY = 'ar_canary_api_key_0123456789';
    private string $ignoreArgs;

    protected function setUp(): void
    {
        // Debian's php.ini (production) drops arguments from traces; error trackers run with them, as here.
        $this->ignoreArgs = (string) ini_get('zend.exception_ignore_args');
        ini_set('zend.exception_ignore_args', '0');
    }

    protected function tearDown(): void
    {
        ini_set('zend.exception_ignore_args', $this->ignoreArgs);
    }

    /** @return iterable<string, array{\Closure(): array{object, list<string>}}> each holder and its canaries */
    public static function holders(): iterable
    {
        yield 'Client' => [static fn () => [new Client('http://127.0.0.1:8080', self::API_KEY), [self::API_KEY]]];
        yield 'SigningKey' => [static function () {
            $key = SigningKey::generate();
            return [$key, self::forms($key->secretKey())];
        }];
        yield 'DecisionTokenSigner' => [static function () {
            $key = SigningKey::generate();
            $signer = new DecisionTokenSigner('chat', '2026-12', $key);
            return [$signer, self::forms($key->secretKey())];
        }];
        yield 'WebhookVerifier' => [static function () {
            $bytes = random_bytes(32);
            $verifier = new WebhookVerifier('whsec_' . base64_encode($bytes));
            return [$verifier, self::forms($bytes)];
        }];
    }

    /**
     * The forms raw secret bytes take in what is looked at: themselves, base64, hex, and var_export's escaping (which
     * splits bytes such as NUL out of the quoted string, so the raw bytes need not appear whole).
     *
     * @return list<string>
     */
    private static function forms(string $bytes): array
    {
        return [$bytes, base64_encode($bytes), bin2hex($bytes), var_export($bytes, true)];
    }

    /**
     * @dataProvider holders
     * @param \Closure(): array{object, list<string>} $make
     */
    public function test_an_object_holding_a_secret_dumps_exports_and_encodes_without_it(\Closure $make): void
    {
        [$holder, $canaries] = $make();
        ob_start();
        var_dump($holder);
        debug_zval_dump($holder);
        $shown = [
            'var_dump' => (string) ob_get_clean(),
            'print_r' => print_r($holder, true),
            'var_export' => var_export($holder, true),
            'json_encode' => (string) json_encode($holder),
            '(array)' => var_export((array) $holder, true),
        ];
        foreach ($shown as $how => $text) {
            foreach ($canaries as $canary) {
                self::assertStringNotContainsString($canary, $text, "{$how} shows the secret");
            }
        }
    }

    /**
     * @dataProvider holders
     * @param \Closure(): array{object, list<string>} $make
     */
    public function test_an_object_holding_a_secret_refuses_to_be_serialized(\Closure $make): void
    {
        [$holder, $canaries] = $make();
        try {
            $serialized = serialize($holder);
            self::fail('serialized: ' . $serialized);
        } catch (\LogicException $refusal) {
            self::assertStringContainsString('not serialized', $refusal->getMessage());
            foreach ($canaries as $canary) {
                self::assertStringNotContainsString($canary, print_r($refusal->getTrace(), true));
            }
        }
    }

    public function test_a_secret_brought_back_by_unserialize_is_refused(): void
    {
        $this->expectException(\LogicException::class);
        unserialize('O:' . strlen(Secret::class) . ':"' . Secret::class . '":0:{}');
    }

    public function test_the_api_key_reaches_no_trace_of_a_request_that_failed(): void
    {
        $client = new Client('http://127.0.0.1:' . Process::freePort(), self::API_KEY);
        try {
            $client->getRun('0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01');
            self::fail('nothing listens on that port');
        } catch (TransportException $error) {
            $send = $error->getTrace()[0];
            self::assertSame('send', $send['function']);
            self::assertInstanceOf(\SensitiveParameterValue::class, $send['args'][2], 'the headers are hidden');
            self::assertStringContainsString('127.0.0.1', $send['args'][1], 'the other arguments still show');
            self::assertStringNotContainsString(self::API_KEY, print_r($error->getTrace(), true));
            self::assertStringNotContainsString(self::API_KEY, var_export($error->getTrace(), true));
            self::assertStringNotContainsString(self::API_KEY, (string) $error);
        }
    }

    public function test_a_webhook_secret_in_an_answer_the_client_cannot_read_reaches_no_trace(): void
    {
        $secret = 'whsec_' . base64_encode(random_bytes(32));
        // The creation's answer, its secret shown once, but without its `url`: reading it fails.
        $answer = ScriptedTransport::json(201, [
            'id' => '6f1c0e2a-0000-4000-8000-000000000000', 'event_types' => null, 'state' => 'active',
            'backlog' => 0, 'backlog_capped' => false, 'previous_secret_expires_at' => null,
            'created_at' => '2026-12-06T02:00:00Z', 'secret' => $secret,
        ]);
        $client = new Client('http://service.invalid', self::API_KEY, new ScriptedTransport([$answer]));
        try {
            $client->createWebhook('https://tasks.example.com/hook');
            self::fail('an answer without its url was read');
        } catch (\UnexpectedValueException $error) {
            self::assertStringContainsString('"url"', $error->getMessage());
            $trace = print_r($error->getTrace(), true);
            self::assertStringContainsString('SensitiveParameterValue', $trace);
            self::assertStringNotContainsString(substr($secret, 6), $trace);
            self::assertStringNotContainsString(self::API_KEY, $trace);
        }
    }

    public function test_a_subscription_dumps_without_its_secret(): void
    {
        $secret = 'whsec_' . base64_encode(random_bytes(32));
        $subscription = WebhookSubscription::fromArray([
            'id' => '6f1c0e2a-0000-4000-8000-000000000000', 'url' => 'https://tasks.example.com/hook',
            'event_types' => ['run.waiting'], 'state' => 'active', 'backlog' => 0,
            'backlog_capped' => false, 'previous_secret_expires_at' => null,
            'created_at' => '2026-12-06T02:00:00Z', 'secret' => $secret,
        ]);
        self::assertSame($secret, $subscription->secret, 'handed to the host, to store');
        self::assertStringNotContainsString(substr($secret, 6), print_r($subscription, true));
    }

    public function test_the_public_half_of_a_signing_key_still_shows(): void
    {
        $key = SigningKey::generate();
        self::assertStringContainsString($key->publicKeyBase64(), print_r($key, true));
    }
}

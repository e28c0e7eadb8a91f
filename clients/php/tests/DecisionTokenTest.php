<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\ApiException;
use ApprovalResume\Client;
use ApprovalResume\Decider;
use ApprovalResume\Enum\DecidedBy;
use ApprovalResume\Enum\RunStatus;
use ApprovalResume\Tests\Support\Runs;
use ApprovalResume\Tests\Support\Service;
use ApprovalResume\Token\DecisionTokenSigner;
use ApprovalResume\Token\SigningKey;
use PHPUnit\Framework\TestCase;

/**
 * Decision tokens minted with ext-sodium (docs/design.md §13): what they hold, and what the real service makes of
 * them.
 */
final class DecisionTokenTest extends TestCase
{
    public function test_a_token_holds_exactly_the_design_s_header_and_claims_and_verifies_with_its_key(): void
    {
        $key = SigningKey::generate();
        $signer = new DecisionTokenSigner('chat', '2026-12', $key);
        $token = $signer->mint(7, runId: '0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01', lifetimeSecs: 300, now: 1_800_000_000);

        $segments = explode('.', $token);
        self::assertCount(3, $segments);
        foreach ($segments as $segment) {
            self::assertMatchesRegularExpression('/^[A-Za-z0-9_-]+$/', $segment, 'base64url without padding');
        }
        $decode = static fn (string $part) => sodium_base642bin($part, SODIUM_BASE64_VARIANT_URLSAFE_NO_PADDING);
        $header = json_decode($decode($segments[0]), true);
        self::assertSame(['alg' => 'EdDSA', 'kid' => '2026-12', 'typ' => 'JWT'], $header);
        self::assertSame([
            'iss' => 'chat',
            'aud' => 'approval-resume',
            'sub' => '7',
            'iat' => 1_800_000_000,
            'exp' => 1_800_000_300,
            'run' => '0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01',
        ], json_decode($decode($segments[1]), true));
        $signature = $decode($segments[2]);
        $signed = "{$segments[0]}.{$segments[1]}";
        self::assertTrue(sodium_crypto_sign_verify_detached($signature, $signed, $key->publicKey));
        self::assertFalse(sodium_crypto_sign_verify_detached($signature, "{$signed}x", $key->publicKey));
        self::assertSame($key->publicKey, SigningKey::fromSecretKey($key->secretKey())->publicKey);
    }

    public function test_a_token_longer_than_fifteen_minutes_is_not_minted(): void
    {
        $signer = new DecisionTokenSigner('chat', 'k', SigningKey::generate());
        self::assertNotSame('', $signer->mint(7, lifetimeSecs: 900));
        $this->expectException(\InvalidArgumentException::class);
        $signer->mint(7, lifetimeSecs: 901);
    }

    public function test_the_service_takes_a_token_minted_for_the_owner_and_records_the_owner_s_denial(): void
    {
        $service = Service::shared();
        $owner = Runs::newUid();
        $service->worker()->putUser($owner, 'ada');
        $run = Runs::register($service->worker(), $owner);
        $signer = new DecisionTokenSigner(Service::TOKEN_ISSUER, Service::TOKEN_KID, $service->tokenKey);
        $browser = new Client($service->baseUrl, $signer->mint($owner, runId: $run->id));

        self::assertSame($run->turn->digest, $browser->getRun($run->id)->turn->digest);
        $answer = $browser->denyTurn($run->id, $run->turn->digest, Decider::tokenHolder());

        self::assertSame(RunStatus::Resumed, $answer->status);
        self::assertSame(DecidedBy::RunOwner, $answer->decision->decidedBy);
        self::assertSame($owner, $answer->decision->deciderUid, 'the decider is the token\'s sub');
        $denial = $answer->result('call_2')?->content ?? '';
        self::assertStringStartsWith('Error: approval_denied (decided_by: run_owner).', $denial);
    }

    public function test_the_service_refuses_an_expired_token_with_401_token_expired_and_records_nothing(): void
    {
        $service = Service::shared();
        $owner = Runs::newUid();
        $service->worker()->putUser($owner, 'ada');
        $run = Runs::register($service->worker(), $owner);
        $signer = new DecisionTokenSigner(Service::TOKEN_ISSUER, Service::TOKEN_KID, $service->tokenKey);
        // Issued 20 minutes ago for 15: expired 5 minutes ago, well past the service's 30 seconds of leeway.
        $expired = $signer->mint($owner, runId: $run->id, lifetimeSecs: 900, now: time() - 1200);

        $browser = new Client($service->baseUrl, $expired);
        $error = $this->refusal(fn () => $browser->denyTurn($run->id, $run->turn->digest, Decider::tokenHolder()));
        self::assertSame([401, 'token_expired'], [$error->status, $error->problemCode]);
        self::assertSame(RunStatus::WaitingForApproval, $service->worker()->getRun($run->id)->status);

        // Signed by a key the client never registered, under the registered kid: a bad signature, not an expiry.
        $forger = new DecisionTokenSigner(Service::TOKEN_ISSUER, Service::TOKEN_KID, SigningKey::generate());
        $error = $this->refusal(fn () => (new Client($service->baseUrl, $forger->mint($owner)))->getRun($run->id));
        self::assertSame([401, 'token_bad_signature'], [$error->status, $error->problemCode]);
    }

    /** @param callable(): mixed $request */
    private function refusal(callable $request): ApiException
    {
        try {
            $request();
        } catch (ApiException $error) {
            return $error;
        }
        self::fail('the service accepted the token');
    }
}

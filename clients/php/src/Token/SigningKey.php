<?php

declare(strict_types=1);

namespace ApprovalResume\Token;

use ApprovalResume\Internal\Secret;

/**
 * An Ed25519 key pair (libsodium, ext-sodium) for decision tokens. The host's backend keeps the secret half; the
 * public half is registered on its API client:
 * `file_put_contents('public.b64', $key->publicKeyBase64())`, then
 * `approval-resume clients token-key add CLIENT --kid KID --public-key public.b64` (it reads PEM or base64). The
 * secret half shows in no dump, export or serialization of the key (`Internal\Secret`); `serialize()` is refused.
 */
final readonly class SigningKey
{
    private Secret $secretKey;

    private function __construct(
        #[\SensitiveParameter] string $secretKey,
        public string $publicKey,
    ) {
        $this->secretKey = new Secret($secretKey);
    }

    public static function generate(): self
    {
        $pair = sodium_crypto_sign_keypair();
        return new self(sodium_crypto_sign_secretkey($pair), sodium_crypto_sign_publickey($pair));
    }

    /** From libsodium's 64-byte secret key (`sodium_crypto_sign_secretkey()`), as the host stores it. */
    public static function fromSecretKey(#[\SensitiveParameter] string $secretKey): self
    {
        if (strlen($secretKey) !== SODIUM_CRYPTO_SIGN_SECRETKEYBYTES) {
            throw new \InvalidArgumentException('an Ed25519 secret key of libsodium is 64 bytes');
        }
        return new self($secretKey, sodium_crypto_sign_publickey_from_secretkey($secretKey));
    }

    /** The secret key's 64 bytes, to store in the host's secret store. */
    public function secretKey(): string
    {
        return $this->secretKey->reveal();
    }

    /** The public key's 32 bytes in base64, the form `clients token-key add --public-key FILE` reads. */
    public function publicKeyBase64(): string
    {
        return base64_encode($this->publicKey);
    }

    /** Signs `$message` (Ed25519, detached: the 64-byte signature alone). */
    public function sign(string $message): string
    {
        return sodium_crypto_sign_detached($message, $this->secretKey->reveal());
    }

    /** @return array<string, string> */
    public function __debugInfo(): array
    {
        return ['publicKey' => $this->publicKeyBase64()];
    }
}

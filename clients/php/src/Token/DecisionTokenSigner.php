<?php

declare(strict_types=1);

namespace ApprovalResume\Token;

/**
 * Mints decision tokens (docs/design.md §13): a JWT (RFC 7519) in the JWS compact serialization (RFC 7515 §7.1), header
 * `{"alg":"EdDSA","kid":…,"typ":"JWT"}` (RFC 8037 §3.1 for EdDSA with Ed25519), claims `iss` (the API client's
 * name), `aud` `approval-resume`, `sub` (the user's uid as a decimal string), `iat`, `exp` (at most 15 minutes after
 * `iat`) and, optionally, `run` (the token then works for that run only).
 *
 * Hand-written on purpose: PHP's own extensions hold no JWT library (firebase/php-jwt and the like come from
 * Composer), and this package needs nothing beyond them. What is written here is only the encoding, three
 * base64url segments joined by dots; the signature is ext-sodium's Ed25519, and the service verifies tokens with
 * a maintained library (`jsonwebtoken`), so any slip in this encoding fails there, loudly.
 */
final readonly class DecisionTokenSigner
{
    /** The `aud` every token carries. */
    public const AUDIENCE = 'approval-resume';
    /** The longest a token may live; the service refuses longer ones (401 `token_lifetime_too_long`). */
    public const MAX_LIFETIME_SECS = 900;

    /**
     * @param string $issuer the API client's name, as `clients add` made it
     * @param string $kid the key id the public key was registered under (`clients token-key add --kid`)
     */
    public function __construct(
        private string $issuer,
        private string $kid,
        private SigningKey $key,
    ) {
        if ($issuer === '' || $kid === '') {
            throw new \InvalidArgumentException('a decision token names its issuer and its kid');
        }
    }

    /**
     * A token for backend user `$uid`, valid `$lifetimeSecs` from `$now` (default: the clock), for `$runId` only
     * when given.
     */
    public function mint(int $uid, ?string $runId = null, int $lifetimeSecs = 300, ?int $now = null): string
    {
        if ($uid < 1) {
            throw new \InvalidArgumentException('a decision token is for a backend user, uid 1 or more');
        }
        if ($lifetimeSecs < 1 || $lifetimeSecs > self::MAX_LIFETIME_SECS) {
            throw new \InvalidArgumentException('a decision token lives 1 to 900 seconds');
        }
        $issuedAt = $now ?? time();
        $header = ['alg' => 'EdDSA', 'kid' => $this->kid, 'typ' => 'JWT'];
        $claims = [
            'iss' => $this->issuer,
            'aud' => self::AUDIENCE,
            'sub' => (string) $uid,
            'iat' => $issuedAt,
            'exp' => $issuedAt + $lifetimeSecs,
        ];
        if ($runId !== null) {
            $claims['run'] = $runId;
        }
        $signingInput = self::segment(self::json($header)) . '.' . self::segment(self::json($claims));
        return $signingInput . '.' . self::segment($this->key->sign($signingInput));
    }

    private static function json(array $value): string
    {
        return json_encode($value, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
    }

    /** base64url without padding (RFC 7515 §2, "Base64url Encoding"). */
    private static function segment(string $bytes): string
    {
        return sodium_bin2base64($bytes, SODIUM_BASE64_VARIANT_URLSAFE_NO_PADDING);
    }
}

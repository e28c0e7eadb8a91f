<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\EventType;
use ApprovalResume\Enum\SubscriptionState;
use ApprovalResume\Internal\Read;

/**
 * A webhook subscription. `$secret` (`whsec_…`) is set only in the answer to its creation or to a rotation of its
 * secret, the one time the service shows it: store it then, for `WebhookVerifier`. `$backlogCapped`: the count
 * stopped at 1,000 events, the backlog is at least `$backlog`; `$previousSecretExpiresAt`: until when the secret
 * before the last rotation still signs beside the new one.
 */
final readonly class WebhookSubscription
{
    /** @param list<EventType> $eventTypes */
    public function __construct(
        public string $id,
        public string $url,
        public array $eventTypes,
        public SubscriptionState $state,
        public int $backlog,
        public bool $backlogCapped,
        public ?\DateTimeImmutable $previousSecretExpiresAt,
        public \DateTimeImmutable $createdAt,
        #[\SensitiveParameter] public ?string $secret,
    ) {
    }

    /**
     * `$data` holds the secret when the service shows it: no trace shows `$data`, and the secret is taken out before
     * the members are read, so the trace of a read that fails does not hold it either.
     *
     * @param array<mixed> $data
     */
    public static function fromArray(#[\SensitiveParameter] array $data): self
    {
        $secret = $data['secret'] ?? null;
        unset($data['secret']);
        if ($secret !== null && !is_string($secret)) {
            throw new \UnexpectedValueException('answer member "secret" is not a string or null');
        }
        return new self(
            Read::string($data, 'id'),
            Read::string($data, 'url'),
            array_map(
                static fn (string $type): EventType => EventType::tryFrom($type)
                    ?? throw new \UnexpectedValueException('answer member "event_types" holds an unknown type'),
                Read::optionalStrings($data, 'event_types') ?? [],
            ),
            Read::enum($data, 'state', SubscriptionState::class),
            Read::int($data, 'backlog'),
            Read::bool($data, 'backlog_capped'),
            Read::optionalTime($data, 'previous_secret_expires_at'),
            Read::time($data, 'created_at'),
            $secret,
        );
    }

    /** @return array<string, mixed> */
    public function __debugInfo(): array
    {
        $shown = get_object_vars($this);
        $shown['secret'] = $this->secret === null ? null : 'whsec_…';
        return $shown;
    }
}

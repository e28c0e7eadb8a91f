<?php

declare(strict_types=1);

namespace ApprovalResume\Webhook;

/** A webhook request that must not be trusted: answer it 400 and do nothing with its body. */
final class WebhookVerificationException extends \RuntimeException
{
}

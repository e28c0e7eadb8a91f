<?php

declare(strict_types=1);

namespace ApprovalResume;

/**
 * No answer arrived (connection refused, timeout). Unlike an ApiException, the request may or may not have reached
 * the service: a decision is safe to send again with the same body, which answers the same bytes once it won.
 */
final class TransportException extends \RuntimeException
{
}

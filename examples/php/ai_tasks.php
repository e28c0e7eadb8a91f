<?php

// The AI Tasks side with the PHP client (clients/php): list the runs an approver may decide, then deny one with
// `variant` ("propose a different version"). Run it against a service:
//
//   APPROVAL_RESUME_URL=http://127.0.0.1:8080 APPROVAL_RESUME_KEY=ar_… ACTING_UID=9 php examples/php/ai_tasks.php
//
// The key needs the scopes approvals:read and decisions:write (docs/integration.md, "The AI Tasks module"). RUN_ID
// picks the run to deny; without it, the newest listed. DRY_RUN=1 only lists.

declare(strict_types=1);

require __DIR__ . '/../../clients/php/autoload.php';

use ApprovalResume\ApiException;
use ApprovalResume\Client;
use ApprovalResume\Decider;
use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Model\InboxItem;

function setting(string $name, ?string $default = null): string
{
    $value = getenv($name);
    if ($value !== false && $value !== '') {
        return $value;
    }
    if ($default === null) {
        fwrite(STDERR, "set {$name}\n");
        exit(2);
    }
    return $default;
}

$client = new Client(setting('APPROVAL_RESUME_URL', 'http://127.0.0.1:8080'), setting('APPROVAL_RESUME_KEY'));
$approver = (int) setting('ACTING_UID');
$wanted = getenv('RUN_ID') ?: null;

try {
    /** @var list<InboxItem> $inbox */
    $inbox = iterator_to_array($client->inboxAll($approver), false);
    printf("%d run(s) wait for uid %d:\n", count($inbox), $approver);
    foreach ($inbox as $item) {
        $calls = array_map(
            static fn ($call) => sprintf(
                '%s (%s%s)',
                $call->name,
                $call->effect->value,
                $call->approvable ? '' : ', not approvable',
            ),
            $item->pendingCalls,
        );
        printf("  %s  owner %d  turn %d: %s\n", $item->runId, $item->ownerUid, $item->turnIndex, implode(', ', $calls));
    }

    $target = null;
    foreach ($inbox as $item) {
        if ($wanted === null || $item->runId === $wanted) {
            $target = $item;
            break;
        }
    }
    if ($target === null || getenv('DRY_RUN')) {
        echo $target === null ? "nothing to deny\n" : '';
        exit(0);
    }

    // The digest says which turn was shown: if the run moved on meanwhile, the service answers 409 stale_turn.
    $answer = $client->denyTurn($target->runId, $target->turnDigest, Decider::user($approver), DenialReason::Variant);
    printf("denied %s (decided_by: %s); the model reads:\n", $answer->runId, $answer->decision->decidedBy->value);
    foreach ($answer->results as $result) {
        printf("  %s: %s\n", $result->callId, $result->content);
    }
} catch (ApiException $error) {
    // `problemCode` is stable (already_decided, stale_turn, decider_not_permitted, …); the request id finds the
    // service's log line.
    $request = $error->requestId ?? '-';
    $line = sprintf('refused: %d %s: %s (request %s)', $error->status, $error->problemCode, $error->detail, $request);
    fwrite(STDERR, $line . "\n");
    exit(1);
}

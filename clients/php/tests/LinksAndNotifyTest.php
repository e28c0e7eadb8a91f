<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\ApiException;
use ApprovalResume\Decider;
use ApprovalResume\Enum\NotifySkipReason;
use ApprovalResume\Enum\RunStatus;
use ApprovalResume\Tests\Support\Runs;
use ApprovalResume\Tests\Support\Service;
use PHPUnit\Framework\TestCase;

/**
 * Approval links, users' addresses and `notify` (docs/design.md §20), against the real binary (PUBLIC_URL set to
 * its own address, no SMTP_URL: mails are queued, none is sent; tests/links/run.sh sends them).
 */
final class LinksAndNotifyTest extends TestCase
{
    public function test_a_users_email_comes_back_as_stored_and_a_put_without_one_takes_it_away(): void
    {
        $worker = Service::shared()->worker();
        $uid = Runs::newUid();

        self::assertSame('olivia@example.com', $worker->putUser($uid, 'olivia', email: 'olivia@example.com')->email);
        self::assertNull($worker->putUser($uid, 'olivia')->email, 'a PUT replaces the user, its address too');
    }

    public function test_an_email_that_is_no_bare_address_throws_invalid_email(): void
    {
        try {
            Service::shared()->worker()->putUser(Runs::newUid(), 'ada', email: 'Ada <ada@example.com>');
            self::fail('an address with a display name was accepted');
        } catch (ApiException $error) {
            self::assertSame(422, $error->status);
            self::assertSame('invalid_email', $error->problemCode);
        }
    }

    public function test_a_registration_naming_notify_says_whose_mail_is_queued_and_why_the_others_get_none(): void
    {
        $worker = Service::shared()->worker();
        [$owner, $approver, $outsider, $disabled, $unknown] = [
            Runs::newUid(), Runs::newUid(), Runs::newUid(), Runs::newUid(), Runs::newUid(),
        ];
        $worker->putUser($owner, 'olivia', email: 'olivia@example.com');
        $worker->putUser($approver, 'arne', canApproveOthers: true);
        $worker->putUser($outsider, 'otto', email: 'otto@example.com');
        $worker->putUser($disabled, 'dora', canApproveOthers: true, disabled: true, email: 'dora@example.com');

        $run = Runs::register($worker, $owner, notify: [$owner, $approver, $outsider, $disabled, $unknown]);

        self::assertSame(RunStatus::WaitingForApproval, $run->status);
        self::assertNotNull($run->notify);
        self::assertSame([$owner], $run->notify->queued);
        $skipped = $run->notify->skipped;
        ksort($skipped);
        self::assertSame([
            $approver => NotifySkipReason::NoEmail,
            $outsider => NotifySkipReason::MayNotDecide,
            $disabled => NotifySkipReason::Disabled,
            $unknown => NotifySkipReason::UnknownUser,
        ], $skipped);
        self::assertNull(Runs::register($worker, $owner)->notify, 'a registration without notify answers none');
    }

    public function test_a_new_turn_naming_notify_queues_a_mail_for_that_turn(): void
    {
        $service = Service::shared();
        $owner = Runs::newUid();
        $service->worker()->putUser($owner, 'olivia', email: 'olivia@example.com');
        $run = Runs::register($service->worker(), $owner);
        $service->tasks()->denyTurn($run->id, $run->turn->digest, Decider::user($owner));

        $next = $service->worker()->appendTurn($run->id, [
            ['role' => 'assistant', 'content' => null, 'tool_calls' => [
                ['id' => 'call_b', 'type' => 'function', 'function' => [
                    'name' => Runs::WRITE_TOOL,
                    'arguments' => '{"page": 12}',
                ]],
            ]],
        ], notify: [$owner]);

        self::assertSame(RunStatus::WaitingForApproval, $next->status);
        self::assertSame([$owner], $next->notify?->queued);
        self::assertSame([], $next->notify->skipped);
    }

    public function test_a_link_made_for_an_approver_opens_the_page_until_it_is_revoked(): void
    {
        $service = Service::shared();
        $owner = Runs::newUid();
        $approver = Runs::newUid();
        $service->worker()->putUser($owner, 'olivia');
        $service->worker()->putUser($approver, 'arne', canApproveOthers: true);
        $run = Runs::register($service->worker(), $owner);

        $link = $service->tasks()->createLink($run->id, $approver);

        self::assertMatchesRegularExpression('/^[0-9a-f-]{36}$/', $link->id);
        self::assertMatchesRegularExpression(
            '#^' . preg_quote("{$service->baseUrl}/approve/{$run->id}/", '#') . '[A-Za-z0-9_-]{43}$#',
            $link->url,
        );
        self::assertGreaterThan(new \DateTimeImmutable(), $link->expiresAt);
        [$status, $page] = self::fetch($link->url);
        self::assertSame(200, $status);
        self::assertStringContainsString('You decide as <strong>arne</strong>', $page);
        $runStatus = $service->worker()->getRun($run->id)->status;
        self::assertSame(RunStatus::WaitingForApproval, $runStatus, 'opening the page decides nothing');

        $service->tasks()->revokeLink($run->id, $link->id);
        [$status, $page] = self::fetch($link->url);
        self::assertSame(410, $status);
        self::assertStringContainsString('Link revoked', $page);
        $service->tasks()->revokeLink($run->id, $link->id);
        $this->addToAssertionCount(1); // revoked again: answered the same, no exception
    }

    public function test_a_link_for_someone_who_may_not_decide_the_run_throws_decider_not_permitted(): void
    {
        $service = Service::shared();
        $owner = Runs::newUid();
        $outsider = Runs::newUid();
        $service->worker()->putUser($owner, 'olivia');
        $service->worker()->putUser($outsider, 'otto');
        $run = Runs::register($service->worker(), $owner);

        try {
            $service->tasks()->createLink($run->id, $outsider);
            self::fail('a link was made for someone who may not decide the run');
        } catch (ApiException $error) {
            self::assertSame(403, $error->status);
            self::assertSame('decider_not_permitted', $error->problemCode);
        }
    }

    /** @return array{int, string} the status and the body of a GET, as a browser would open the link */
    private static function fetch(string $url): array
    {
        $curl = curl_init($url);
        curl_setopt_array($curl, [CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 10]);
        $body = curl_exec($curl);
        $status = curl_getinfo($curl, CURLINFO_RESPONSE_CODE);
        curl_close($curl);
        self::assertIsString($body);
        return [$status, $body];
    }
}

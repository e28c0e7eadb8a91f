<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\ApiException;
use ApprovalResume\Client;
use ApprovalResume\Decider;
use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Enum\RuleScope;
use ApprovalResume\Enum\RuleVerdict;
use ApprovalResume\Remember;
use ApprovalResume\Tests\Support\ScriptedTransport;
use ApprovalResume\Verdict;
use PHPUnit\Framework\TestCase;

/**
 * Remembered decisions (docs/design.md §18) as the client sends and reads them, against scripted answers of the
 * service's shape: the requests each operation makes, and the rules read back strictly. RulesServiceTest drives the
 * same operations against the binary.
 */
final class RulesTest extends TestCase
{
    private const RUN = '0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01';
    private const RULE = '5d3c2b1a-0000-4000-8000-00000000000a';
    private const DIGEST = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';

    public function test_a_run_rule_is_posted_with_its_author_tool_verdict_arguments_and_reason_and_read_back(): void
    {
        $transport = new ScriptedTransport([ScriptedTransport::json(201, self::rule())]);
        $client = new Client('http://service.invalid', 'ar_key', $transport);

        $rule = $client->createRunRule(
            self::RUN,
            'update_page_metadata',
            RuleVerdict::Deny,
            createdBy: 7,
            arguments: ['page' => 12],
            reason: DenialReason::Skip,
        );

        [$request] = $transport->requests;
        self::assertSame('POST', $request['method']);
        self::assertSame('http://service.invalid/v1/runs/' . self::RUN . '/rules', $request['url']);
        self::assertSame(
            '{"created_by":7,"tool":"update_page_metadata","verdict":"deny","arguments":{"page":12},"reason":"skip"}',
            $request['body'],
        );
        self::assertSame(self::RULE, $rule->id);
        self::assertSame(RuleScope::Run, $rule->scope);
        self::assertSame(self::RUN, $rule->runId);
        self::assertSame(7, $rule->ownerUid);
        self::assertSame('update_page_metadata', $rule->tool);
        self::assertSame('{"page":12}', $rule->arguments);
        self::assertSame(RuleVerdict::Deny, $rule->verdict);
        self::assertSame(DenialReason::Skip, $rule->reason);
        self::assertSame(7, $rule->createdBy);
        self::assertEquals(new \DateTimeImmutable('2026-12-07T01:00:00Z'), $rule->createdAt);
        self::assertNull($rule->expiresAt);
        self::assertNull($rule->revokedAt);
        self::assertNull($rule->revokedBy);
        self::assertTrue($rule->live);
    }

    public function test_a_decision_token_s_run_rule_names_no_author_and_its_arguments_may_be_json_text(): void
    {
        $transport = new ScriptedTransport([ScriptedTransport::json(201, self::rule())]);
        $client = new Client('http://service.invalid', 'eyJ.token', $transport);

        $client->createRunRule(self::RUN, 'read_page', RuleVerdict::Approve, arguments: '{"page": 12, "tags": []}');

        self::assertSame(
            '{"tool":"read_page","verdict":"approve","arguments":{"page":12,"tags":[]}}',
            $transport->requests[0]['body'],
            'no created_by: the token\'s user; the text\'s object and list kept apart',
        );
    }

    public function test_an_owner_rule_carries_its_owner_author_and_expiry_and_empty_arguments_are_an_object(): void
    {
        $owner = self::rule(['scope' => 'owner', 'run_id' => null, 'expires_at' => '2026-12-14T01:00:00Z']);
        $transport = new ScriptedTransport([ScriptedTransport::json(201, $owner)]);
        $client = new Client('http://service.invalid', 'ar_key', $transport);

        $rule = $client->createOwnerRule(
            7,
            1,
            'read_page',
            RuleVerdict::Approve,
            new \DateTimeImmutable('2026-12-14T01:00:00Z'),
            arguments: [],
        );

        [$request] = $transport->requests;
        self::assertSame(['POST', 'http://service.invalid/v1/rules'], [$request['method'], $request['url']]);
        self::assertSame(
            '{"owner_uid":7,"created_by":1,"expires_at":"2026-12-14T01:00:00.000+00:00","tool":"read_page",'
                . '"verdict":"approve","arguments":{}}',
            $request['body'],
        );
        self::assertSame(RuleScope::Owner, $rule->scope);
        self::assertNull($rule->runId);
        self::assertEquals(new \DateTimeImmutable('2026-12-14T01:00:00Z'), $rule->expiresAt);
    }

    public function test_arguments_that_are_no_json_object_are_refused_before_anything_is_sent(): void
    {
        $transport = new ScriptedTransport([]);
        $client = new Client('http://service.invalid', 'ar_key', $transport);
        foreach ([[12, 13], '[12]', '"page"'] as $arguments) {
            try {
                $client->createRunRule(self::RUN, 'read_page', RuleVerdict::Approve, 7, $arguments);
                self::fail('arguments ' . json_encode($arguments) . ' were taken');
            } catch (\InvalidArgumentException $refusal) {
                self::assertStringContainsString('JSON object', $refusal->getMessage());
            }
        }
        self::assertSame([], $transport->requests);
    }

    public function test_the_rules_of_a_run_and_of_an_owner_are_listed(): void
    {
        $revoked = self::rule([
            'id' => '5d3c2b1a-0000-4000-8000-00000000000b',
            'revoked_at' => '2026-12-07T01:05:00Z',
            'revoked_by' => 1,
            'live' => false,
        ]);
        $transport = new ScriptedTransport([
            ScriptedTransport::json(200, ['rules' => [self::rule(), $revoked]]),
            ScriptedTransport::json(200, ['rules' => []]),
        ]);
        $client = new Client('http://service.invalid', 'ar_key', $transport);

        $rules = $client->runRules(self::RUN);
        $none = $client->ownerRules(7);

        self::assertSame([self::RULE, '5d3c2b1a-0000-4000-8000-00000000000b'], array_map(fn ($r) => $r->id, $rules));
        self::assertSame([true, false], array_map(static fn ($rule) => $rule->live, $rules));
        self::assertSame(1, $rules[1]->revokedBy);
        self::assertSame([], $none);
        self::assertSame(['GET', 'http://service.invalid/v1/runs/' . self::RUN . '/rules', null], [
            $transport->requests[0]['method'], $transport->requests[0]['url'], $transport->requests[0]['body'],
        ]);
        self::assertSame(['GET', 'http://service.invalid/v1/rules?owner_uid=7', null], [
            $transport->requests[1]['method'], $transport->requests[1]['url'], $transport->requests[1]['body'],
        ]);
    }

    public function test_a_revocation_names_its_revoker_and_answers_the_rule_as_it_now_is(): void
    {
        $revoked = self::rule(['revoked_at' => '2026-12-07T01:05:00Z', 'revoked_by' => 7, 'live' => false]);
        $transport = new ScriptedTransport([
            ScriptedTransport::json(200, $revoked),
            ScriptedTransport::json(200, $revoked),
        ]);
        $client = new Client('http://service.invalid', 'ar_key', $transport);

        $rule = $client->revokeRule(self::RULE, revokedBy: 7);
        $client->revokeRule(self::RULE);

        self::assertSame('DELETE', $transport->requests[0]['method']);
        $url = 'http://service.invalid/v1/rules/' . self::RULE;
        self::assertSame($url . '?revoked_by=7', $transport->requests[0]['url']);
        self::assertSame($url, $transport->requests[1]['url'], 'a token\'s revocation names no revoker');
        self::assertFalse($rule->live);
        self::assertSame(7, $rule->revokedBy);
        self::assertEquals(new \DateTimeImmutable('2026-12-07T01:05:00Z'), $rule->revokedAt);
    }

    public function test_a_remembered_decision_says_so_for_the_whole_turn_and_per_call(): void
    {
        $transport = new ScriptedTransport([
            ScriptedTransport::json(409, ['code' => 'already_decided', 'detail' => 'scripted']),
            ScriptedTransport::json(409, ['code' => 'already_decided', 'detail' => 'scripted']),
            ScriptedTransport::json(409, ['code' => 'already_decided', 'detail' => 'scripted']),
        ]);
        $client = new Client('http://service.invalid', 'ar_key', $transport);
        $until = new \DateTimeImmutable('2026-12-14T01:00:00Z');
        $decisions = [
            fn () => $client->approveTurn(self::RUN, self::DIGEST, Decider::user(7), remember: Remember::run()),
            fn () => $client->denyTurn(self::RUN, self::DIGEST, Decider::user(7), remember: Remember::owner($until)),
            fn () => $client->decideCalls(self::RUN, self::DIGEST, Decider::user(7), [
                Verdict::approve('call_1', Remember::run()),
                Verdict::deny('call_2', DenialReason::Skip, Remember::owner($until)),
                Verdict::approve('call_3'),
            ]),
        ];
        foreach ($decisions as $decide) {
            try {
                $decide();
                self::fail('the scripted answer is a refusal');
            } catch (ApiException $refusal) {
                self::assertSame('already_decided', $refusal->problemCode);
            }
        }

        $bodies = array_map(static fn ($request) => json_decode((string) $request['body'], true), $transport->requests);
        self::assertSame('run', $bodies[0]['remember']);
        self::assertArrayNotHasKey('remember_until', $bodies[0]);
        self::assertSame(['owner', '2026-12-14T01:00:00.000+00:00'], [
            $bodies[1]['remember'], $bodies[1]['remember_until'],
        ]);
        self::assertSame([
            ['call_id' => 'call_1', 'approved' => true, 'remember' => 'run'],
            ['call_id' => 'call_2', 'approved' => false, 'reason' => 'skip', 'remember' => 'owner'],
            ['call_id' => 'call_3', 'approved' => true],
        ], $bodies[2]['calls']);
        self::assertArrayNotHasKey('remember', $bodies[2], 'per call, not for the turn');
        self::assertSame(
            '2026-12-14T01:00:00.000+00:00',
            $bodies[2]['remember_until'],
            'the one end of the decision\'s owner-scope rules, beside its calls, as the service takes it',
        );
    }

    public function test_a_rule_answer_without_one_of_its_members_is_refused_naming_the_member(): void
    {
        $answer = self::rule();
        unset($answer['live']);
        $client = new Client('http://service.invalid', 'ar_key', new ScriptedTransport([
            ScriptedTransport::json(201, $answer),
        ]));
        $this->expectExceptionObject(new \UnexpectedValueException('answer member "live" is not a boolean'));
        $client->createRunRule(self::RUN, 'read_page', RuleVerdict::Approve, 7);
    }

    /**
     * A rule as the service answers it (src/http/remembered_rules.rs, `RuleView`), with `$changes` over it.
     *
     * @param array<string, mixed> $changes
     * @return array<string, mixed>
     */
    private static function rule(array $changes = []): array
    {
        return array_merge([
            'id' => self::RULE,
            'scope' => 'run',
            'run_id' => self::RUN,
            'owner_uid' => 7,
            'tool' => 'update_page_metadata',
            'arguments' => '{"page":12}',
            'verdict' => 'deny',
            'reason' => 'skip',
            'created_by' => 7,
            'created_at' => '2026-12-07T01:00:00Z',
            'expires_at' => null,
            'revoked_at' => null,
            'revoked_by' => null,
            'live' => true,
        ], $changes);
    }
}

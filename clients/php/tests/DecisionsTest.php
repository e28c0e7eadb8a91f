<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\ApiException;
use ApprovalResume\Decider;
use ApprovalResume\Enum\DecidedBy;
use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Enum\Effect;
use ApprovalResume\Enum\Executor;
use ApprovalResume\Enum\ModelInputFormat;
use ApprovalResume\Enum\Outcome;
use ApprovalResume\Enum\RunStatus;
use ApprovalResume\Model\DeclaredTool;
use ApprovalResume\Tests\Support\Runs;
use ApprovalResume\Tests\Support\Service;
use ApprovalResume\Verdict;
use PHPUnit\Framework\TestCase;

/** Decisions of the whole turn and per call, model input, cancel and complete, against the real binary. */
final class DecisionsTest extends TestCase
{
    /** docs/design.md §3: another user's denial of a write, reason variant. */
    private const DENIED_BY_OTHER_VARIANT = 'Error: approval_denied (decided_by: other_user, reason: variant). '
        . 'The approval for tool "update_page_metadata" was declined by another backend user, not the person you are '
        . 'talking to. Nothing was executed. Tell the user that another backend user declined this version, and '
        . 'propose a different version of this change.';

    public function test_an_approver_denies_one_call_and_approves_the_other_with_edited_arguments(): void
    {
        $service = Service::shared();
        [$owner, $approver] = [Runs::newUid(), Runs::newUid()];
        $service->worker()->putUser($owner, 'ada');
        $service->worker()->putUser($approver, 'grace', canApproveOthers: true);
        $run = Runs::register($service->worker(), $owner);

        $answer = $service->tasks()->decideCalls($run->id, $run->turn->digest, Decider::user($approver), [
            Verdict::approveEdited('call_1', ['page' => 13]),
            Verdict::deny('call_2', DenialReason::Variant),
        ]);

        self::assertSame($run->id, $answer->runId);
        self::assertSame(RunStatus::Resumed, $answer->status);
        self::assertNull($answer->decision->approved, 'mixed verdicts');
        self::assertSame(DecidedBy::OtherUser, $answer->decision->decidedBy);
        self::assertSame($approver, $answer->decision->deciderUid);
        self::assertSame(['call_1', 'call_2'], array_map(static fn ($v) => $v->callId, $answer->decision->calls));
        self::assertTrue($answer->decision->calls[0]->approved);
        self::assertTrue($answer->decision->calls[0]->edited);
        self::assertFalse($answer->decision->calls[1]->approved);
        self::assertSame(DenialReason::Variant, $answer->decision->calls[1]->reason);

        $denied = $answer->result('call_2');
        self::assertNotNull($denied);
        self::assertSame(Outcome::Denied, $denied->outcome);
        self::assertTrue($denied->isError);
        self::assertSame(self::DENIED_BY_OTHER_VARIANT, $denied->content);
        // No executor is configured, so the approved call is not run (docs/design.md §2, not_permitted).
        self::assertSame(Outcome::NotPermitted, $answer->result('call_1')?->outcome);

        $messages = $answer->modelInput->body['messages'];
        $last = end($messages);
        self::assertSame(['tool', 'call_2'], [$last['role'], $last['tool_call_id']]);
        self::assertSame(self::DENIED_BY_OTHER_VARIANT, $last['content']);

        // The same verdicts again answer the same decision; another one is refused with its problem code.
        $again = $service->tasks()->decideCalls($run->id, $run->turn->digest, Decider::user($approver), [
            Verdict::approveEdited('call_1', ['page' => 13]),
            Verdict::deny('call_2', DenialReason::Variant),
        ]);
        self::assertEquals($answer->decision, $again->decision);
        $this->assertRefused(
            409,
            'already_decided',
            fn () => $service->tasks()->denyTurn($run->id, $run->turn->digest, Decider::user($approver)),
        );
    }

    public function test_the_owner_denies_the_whole_turn_and_the_model_input_comes_back_in_another_format(): void
    {
        $service = Service::shared();
        $owner = Runs::newUid();
        $service->worker()->putUser($owner, 'ada');
        $run = Runs::register($service->worker(), $owner);

        $this->assertRefused(409, 'not_resumed', fn () => $service->worker()->modelInput($run->id));
        $stale = str_repeat('0', 64);
        $tasks = $service->tasks();
        $this->assertRefused(409, 'stale_turn', fn () => $tasks->denyTurn($run->id, $stale, Decider::user($owner)));

        $answer = $service->tasks()->denyTurn($run->id, $run->turn->digest, Decider::user($owner), DenialReason::Skip);
        self::assertFalse($answer->decision->approved);
        self::assertSame(DecidedBy::RunOwner, $answer->decision->decidedBy);
        self::assertSame(DenialReason::Skip, $answer->decision->reason);
        $outcomes = array_map(static fn ($result) => $result->outcome, $answer->results);
        self::assertSame([Outcome::Denied, Outcome::Denied], $outcomes);
        $denial = $answer->result('call_2')?->content ?? '';
        self::assertStringStartsWith('Error: approval_denied (decided_by: run_owner, reason: skip).', $denial);

        $anthropic = $service->worker()->modelInput($run->id, ModelInputFormat::Anthropic);
        self::assertSame(ModelInputFormat::Anthropic, $anthropic->format);
        $messages = $anthropic->body['messages'];
        $blocks = end($messages)['content'];
        self::assertSame('tool_result', $blocks[1]['type']);
        self::assertSame($answer->result('call_2')?->content, $blocks[1]['content']);

        $view = $service->worker()->getRun($run->id);
        self::assertSame(RunStatus::Resumed, $view->status);
        self::assertEquals($answer->decision, $view->decision);

        self::assertSame(RunStatus::Completed, $service->worker()->completeRun($run->id)->status);
        $this->assertRefused(409, 'run_finished', fn () => $service->worker()->cancelRun($run->id));
    }

    public function test_a_waiting_run_is_cancelled_and_a_write_outside_approvable_tools_is_not_released(): void
    {
        $service = Service::shared();
        [$owner, $approver] = [Runs::newUid(), Runs::newUid()];
        $service->worker()->putUser($owner, 'ada');
        $service->worker()->putUser($approver, 'grace', canApproveOthers: true, approvableTools: [Runs::READ_TOOL]);
        $run = Runs::register($service->worker(), $owner);

        [$tasks, $digest] = [$service->tasks(), $run->turn->digest];
        $approval = fn () => $tasks->approveTurn($run->id, $digest, Decider::user($approver));
        $this->assertRefused(403, 'tool_not_approvable', $approval);
        $this->assertRefused(403, 'missing_scope', fn () => $tasks->denyTurn($run->id, $digest, Decider::nobody()));
        $this->assertRefused(403, 'missing_scope', fn () => $service->tasks()->cancelRun($run->id));

        $cancelled = $service->worker()->cancelRun($run->id);
        self::assertSame(RunStatus::Cancelled, $cancelled->status);
        self::assertNull($cancelled->decision);
        $this->assertRefused(404, 'not_found', fn () => $service->worker()->getRun(Runs::newId()));
    }

    public function test_a_resumed_run_waits_again_on_its_next_turn_until_its_expiry_and_an_approval_answers_it(): void
    {
        $service = Service::shared();
        $owner = Runs::newUid();
        $service->worker()->putUser($owner, 'ada');
        $expiresAt = new \DateTimeImmutable('+1 hour');
        $run = $service->worker()->registerRun(Runs::newId(), $owner, [
            ['role' => 'user', 'content' => 'Publish page 12.'],
            ['role' => 'assistant', 'content' => null, 'tool_calls' => [
                ['id' => 'call_a', 'type' => 'function', 'function' => ['name' => 'publish_page', 'arguments' => '{}']],
            ]],
        ], ['publish_page' => Effect::Write], expiresAt: $expiresAt);
        self::assertSame($expiresAt->getTimestamp(), $run->expiresAt?->getTimestamp());
        $service->tasks()->denyTurn($run->id, $run->turn->digest, Decider::user($owner), DenialReason::Variant);

        $next = $service->worker()->appendTurn($run->id, [
            ['role' => 'assistant', 'content' => null, 'tool_calls' => [
                ['id' => 'call_b', 'type' => 'function', 'function' => ['name' => 'read_page', 'arguments' => '{}']],
            ]],
        ], approvalTtlSecs: 600);
        self::assertSame(RunStatus::WaitingForApproval, $next->status);
        self::assertSame(1, $next->turn->index);
        self::assertNotSame($run->turn->digest, $next->turn->digest);
        self::assertSame(['call_b'], array_map(static fn ($call) => $call->id, $next->turn->pendingCalls));
        self::assertNotNull($next->expiresAt);

        $format = ModelInputFormat::OpenAiResponses;
        $answer = $service->tasks()->approveTurn($next->id, $next->turn->digest, Decider::user($owner), $format);
        self::assertTrue($answer->decision->approved);
        self::assertSame(DecidedBy::RunOwner, $answer->decision->decidedBy);
        // No executor is configured: an approved call ends not_permitted, never run.
        self::assertSame(Outcome::NotPermitted, $answer->result('call_b')?->outcome);
        self::assertSame(ModelInputFormat::OpenAiResponses, $answer->modelInput->format);
        self::assertArrayHasKey('input', $answer->modelInput->body);
    }

    public function test_an_approval_releases_a_worker_s_call_and_the_answer_lists_it_without_a_model_input(): void
    {
        $service = Service::shared();
        [$owner, $approver] = [Runs::newUid(), Runs::newUid()];
        $service->worker()->putUser($owner, 'ada');
        $service->worker()->putUser($approver, 'grace', canApproveOthers: true);
        $run = $service->worker()->registerRun(Runs::newId(), $owner, [
            ['role' => 'user', 'content' => 'Publish page 12.'],
            ['role' => 'assistant', 'content' => null, 'tool_calls' => [
                ['id' => 'call_w', 'type' => 'function', 'function' => [
                    'name' => 'publish_page',
                    'arguments' => '{"page": 12}',
                ]],
            ]],
        ], ['publish_page' => new DeclaredTool(Effect::Write, Executor::Worker, editable: false)]);
        $pending = $run->turn->pendingCalls[0];
        self::assertSame([Executor::Worker, false], [$pending->executor, $pending->editable]);
        $this->assertRefused(
            422,
            'not_editable',
            fn () => $service->tasks()->decideCalls($run->id, $run->turn->digest, Decider::user($approver), [
                Verdict::approveEdited('call_w', ['page' => 13]),
            ]),
        );

        $answer = $service->tasks()->approveTurn($run->id, $run->turn->digest, Decider::user($approver));

        self::assertSame(RunStatus::Released, $answer->status);
        self::assertSame([], $answer->results, 'the worker has not posted its result yet');
        self::assertNull($answer->modelInput, 'the model input exists only once every result is in');
        self::assertCount(1, $answer->releasedCalls);
        $released = $answer->releasedCalls[0];
        self::assertSame(['call_w', 'publish_page', '{"page": 12}', false], [
            $released->callId,
            $released->tool,
            $released->arguments,
            $released->edited,
        ]);
        self::assertNull($released->resultContent);
        $view = $service->worker()->getRun($run->id);
        self::assertSame(RunStatus::Released, $view->status);
        self::assertEquals($answer->releasedCalls, $view->releasedCalls, 'the run view lists them too');
    }

    public function test_a_run_registered_in_anthropic_s_format_comes_back_in_it_with_its_thinking_block(): void
    {
        $service = Service::shared();
        $owner = Runs::newUid();
        $service->worker()->putUser($owner, 'ada');
        $assistant = ['role' => 'assistant', 'content' => [
            ['type' => 'thinking', 'thinking' => 'Page 12 first.', 'signature' => 'c2lnbmF0dXJl'],
            ['type' => 'tool_use', 'id' => 'toolu_1', 'name' => 'publish_page', 'input' => ['page' => 12]],
        ]];
        $messages = [['role' => 'user', 'content' => 'Publish page 12.'], $assistant];
        $run = $service->worker()->registerRun(
            Runs::newId(),
            $owner,
            $messages,
            ['publish_page' => Effect::Write],
            format: ModelInputFormat::Anthropic,
            system: 'Be brief.',
        );
        self::assertSame(ModelInputFormat::Anthropic, $run->format);
        self::assertSame(['toolu_1'], array_map(static fn ($call) => $call->id, $run->turn->pendingCalls));

        $answer = $service->tasks()->denyTurn($run->id, $run->turn->digest, Decider::user($owner));
        self::assertSame(ModelInputFormat::Anthropic, $answer->format);
        // The run's own format when none is asked for: the registered members and messages as sent, then the result.
        $input = $service->worker()->modelInput($run->id, ModelInputFormat::Anthropic);
        self::assertSame('Be brief.', $input->body['system']);
        self::assertSame($messages, array_slice($input->body['messages'], 0, 2));
        self::assertSame('tool_result', $input->body['messages'][2]['content'][0]['type']);
    }

    /** @param callable(): mixed $request */
    private function assertRefused(int $status, string $code, callable $request): ApiException
    {
        try {
            $request();
        } catch (ApiException $error) {
            self::assertSame([$status, $code], [$error->status, $error->problemCode], $error->getMessage());
            self::assertSame($status, $error->getCode());
            self::assertNotNull($error->requestId);
            self::assertNull($error->retryAfterSecs, 'only a 503 carries Retry-After');
            return $error;
        }
        self::fail("expected {$status} {$code}, got a success");
    }
}

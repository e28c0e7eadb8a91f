<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\ApiException;
use ApprovalResume\Enum\Effect;
use ApprovalResume\Enum\Executor;
use ApprovalResume\Enum\RunStatus;
use ApprovalResume\Model\DeclaredTool;
use ApprovalResume\Tests\Support\Runs;
use ApprovalResume\Tests\Support\Service;
use PHPUnit\Framework\TestCase;

/** Users upserted and the approvals inbox, against the real binary. */
final class UsersAndInboxTest extends TestCase
{
    public function test_an_upserted_user_comes_back_as_stored_and_a_second_put_replaces_it(): void
    {
        $worker = Service::shared()->worker();
        $uid = Runs::newUid();

        $created = $worker->putUser($uid, 'grace', canApproveOthers: true, approvableTools: [Runs::READ_TOOL]);
        self::assertSame($uid, $created->uid);
        self::assertSame('grace', $created->username);
        self::assertFalse($created->isAdmin);
        self::assertTrue($created->canApproveOthers);
        self::assertFalse($created->disabled);
        self::assertSame([Runs::READ_TOOL], $created->approvableTools);

        $replaced = $worker->putUser($uid, 'grace hopper', disabled: true);
        self::assertSame('grace hopper', $replaced->username);
        self::assertFalse($replaced->canApproveOthers);
        self::assertTrue($replaced->disabled);
        self::assertNull($replaced->approvableTools, 'absent approvable_tools: no limit');
        self::assertEquals($created->createdAt, $replaced->createdAt);
    }

    public function test_a_user_refused_by_the_service_throws_its_problem_code(): void
    {
        try {
            Service::shared()->worker()->putUser(Runs::newUid(), 'ada', approvableTools: ['not a tool name']);
            self::fail('an invalid tool name was accepted');
        } catch (ApiException $error) {
            self::assertSame(422, $error->status);
            self::assertSame('invalid_approvable_tools', $error->problemCode);
            self::assertNotSame('', $error->detail);
            self::assertMatchesRegularExpression('/^[0-9a-f-]{36}$/', (string) $error->requestId);
        }
    }

    public function test_an_approver_lists_the_runs_they_may_decide_page_by_page_newest_first(): void
    {
        $service = Service::shared();
        $worker = $service->worker();
        $tasks = $service->tasks();
        $owner = Runs::newUid();
        $approver = Runs::newUid();
        $outsider = Runs::newUid();
        $worker->putUser($owner, 'ada');
        // May approve others' runs, but releases writes of the read tool only: the write call is not approvable.
        $worker->putUser($approver, 'grace', canApproveOthers: true, approvableTools: [Runs::READ_TOOL]);
        $worker->putUser($outsider, 'linus');
        $registered = [];
        for ($i = 0; $i < 3; $i++) {
            $run = Runs::register($worker, $owner);
            self::assertSame(RunStatus::WaitingForApproval, $run->status);
            $registered[] = $run->id;
        }

        $first = $tasks->inbox($approver, ownerUid: $owner, limit: 2);
        self::assertCount(2, $first->items);
        self::assertNotNull($first->nextCursor);
        $second = $tasks->inbox($approver, ownerUid: $owner, limit: 2, cursor: $first->nextCursor);
        self::assertCount(1, $second->items);
        self::assertNull($second->nextCursor);

        $listed = array_map(static fn ($item) => $item->runId, [...$first->items, ...$second->items]);
        self::assertSame(array_reverse($registered), $listed, 'newest first, each once');
        $all = iterator_to_array($tasks->inboxAll($approver, ownerUid: $owner, pageSize: 1), false);
        $all = array_map(static fn ($item) => $item->runId, $all);
        self::assertSame($listed, $all, 'inboxAll follows next_cursor to the end');

        $item = $first->items[0];
        self::assertSame($owner, $item->ownerUid);
        self::assertSame(['call_1', 'call_2'], array_map(static fn ($call) => $call->id, $item->pendingCalls));
        self::assertSame(Effect::Read, $item->pendingCalls[0]->effect);
        self::assertTrue($item->pendingCalls[0]->approvable);
        self::assertSame(Effect::Write, $item->pendingCalls[1]->effect);
        self::assertFalse($item->pendingCalls[1]->approvable, 'a write outside approvable_tools');
        self::assertFalse($item->approvable());
        self::assertNull($item->pendingCalls[1]->arguments, 'metadata level: no arguments in the inbox');
        self::assertSame($worker->getRun($item->runId)->turn->digest, $item->turnDigest);

        self::assertSame([], $tasks->inbox($outsider, ownerUid: $owner)->items, 'another\'s runs are not theirs');
    }

    public function test_the_inbox_says_per_call_who_runs_it_and_whether_an_approval_may_edit_it(): void
    {
        $service = Service::shared();
        $owner = Runs::newUid();
        $service->worker()->putUser($owner, 'ada');
        $run = $service->worker()->registerRun(Runs::newId(), $owner, [
            ['role' => 'user', 'content' => 'Read page 12, then publish it.'],
            ['role' => 'assistant', 'content' => null, 'tool_calls' => [
                ['id' => 'call_r', 'type' => 'function', 'function' => [
                    'name' => Runs::READ_TOOL,
                    'arguments' => '{"page": 12}',
                ]],
                ['id' => 'call_w', 'type' => 'function', 'function' => [
                    'name' => 'publish_page',
                    'arguments' => '{"page": 12}',
                ]],
            ]],
        ], [
            Runs::READ_TOOL => Effect::Read,
            'publish_page' => new DeclaredTool(Effect::Write, Executor::Worker, editable: false),
        ]);

        $items = $service->tasks()->inbox($owner, ownerUid: $owner)->items;

        self::assertSame([$run->id], array_map(static fn ($item) => $item->runId, $items));
        $calls = $items[0]->pendingCalls;
        self::assertSame(['call_r', 'call_w'], array_map(static fn ($call) => $call->id, $calls));
        self::assertSame([Executor::Service, true], [$calls[0]->executor, $calls[0]->editable], 'the defaults');
        self::assertSame([Executor::Worker, false], [$calls[1]->executor, $calls[1]->editable], 'as declared');
    }
}

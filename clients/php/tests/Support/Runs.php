<?php

declare(strict_types=1);

namespace ApprovalResume\Tests\Support;

use ApprovalResume\Client;
use ApprovalResume\Enum\Effect;
use ApprovalResume\Model\Run;

/** Runs and users for the tests: fresh ids, so tests never share one. */
final class Runs
{
    public const READ_TOOL = 'read_page';
    public const WRITE_TOOL = 'update_page_metadata';

    private static int $nextUid = 100;

    /** A random (version 4) UUID, as the README asks loops to draw run ids. */
    public static function newId(): string
    {
        $bytes = random_bytes(16);
        $bytes[6] = chr((ord($bytes[6]) & 0x0f) | 0x40);
        $bytes[8] = chr((ord($bytes[8]) & 0x3f) | 0x80);
        return vsprintf('%s%s-%s-%s-%s-%s%s%s', str_split(bin2hex($bytes), 4));
    }

    /** A uid no other test uses (one PHPUnit process per database). */
    public static function newUid(): int
    {
        return self::$nextUid++;
    }

    /**
     * Registers a run of `$ownerUid` suspended on a turn that reads page 12 and writes its description, mailing
     * `$notify` (docs/design.md §20) when given.
     *
     * @param ?list<int> $notify
     */
    public static function register(Client $worker, int $ownerUid, ?string $id = null, ?array $notify = null): Run
    {
        return $worker->registerRun(
            $id ?? self::newId(),
            $ownerUid,
            [
                ['role' => 'user', 'content' => 'Write a meta description for page 12.'],
                ['role' => 'assistant', 'content' => null, 'tool_calls' => [
                    ['id' => 'call_1', 'type' => 'function', 'function' => [
                        'name' => self::READ_TOOL,
                        'arguments' => '{"page": 12}',
                    ]],
                    ['id' => 'call_2', 'type' => 'function', 'function' => [
                        'name' => self::WRITE_TOOL,
                        'arguments' => '{"page": 12, "description": "Fresh bread daily."}',
                    ]],
                ]],
            ],
            [self::READ_TOOL => Effect::Read, self::WRITE_TOOL => Effect::Write],
            notify: $notify,
        );
    }
}

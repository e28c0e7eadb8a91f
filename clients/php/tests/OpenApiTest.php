<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\Client;
use ApprovalResume\Decider;
use ApprovalResume\Enum\DenialReason;
use ApprovalResume\Enum\Effect;
use ApprovalResume\Enum\EventType;
use ApprovalResume\Enum\ModelInputFormat;
use ApprovalResume\Enum\NotifySkipReason;
use ApprovalResume\Enum\PrivacyLevel;
use ApprovalResume\Enum\RuleScope;
use ApprovalResume\Enum\RuleVerdict;
use ApprovalResume\Enum\SubscriptionState;
use ApprovalResume\Remember;
use ApprovalResume\Tests\Support\RecordingTransport;
use ApprovalResume\TransportException;
use ApprovalResume\Verdict;
use PHPUnit\Framework\AssertionFailedError;
use PHPUnit\Framework\TestCase;

/**
 * The client held to openapi.yaml (docs/design.md §16): every request it sends is a documented operation, with
 * documented query parameters and a body of the documented members (every required one present; no other where
 * the schema allows none), of the documented types, and every enum holds exactly the spec's tokens. Answers are
 * held to it by the tests against the real binary, which parse them strictly. Reads the spec with ext-yaml
 * (Debian's php-yaml), a test-only dependency.
 */
final class OpenApiTest extends TestCase
{
    /** @var array<mixed> */
    private static array $spec;

    public static function setUpBeforeClass(): void
    {
        if (!function_exists('yaml_parse_file')) {
            throw new \RuntimeException('the openapi.yaml check needs ext-yaml: apt-get install php-yaml');
        }
        self::$spec = yaml_parse_file(dirname(__DIR__, 3) . '/openapi.yaml');
    }

    /** @return iterable<string, array{class-string<\BackedEnum>, list<string>}> */
    public static function enums(): iterable
    {
        $names = ['DecidedBy', 'DenialReason', 'Outcome', 'Effect', 'RunStatus', 'PrivacyLevel', 'ModelInputFormat',
            'Executor'];
        foreach ([...$names, 'EventType'] as $name) {
            yield $name => ["ApprovalResume\\Enum\\{$name}", ['components', 'schemas', $name, 'enum']];
        }
        $state = ['components', 'schemas', 'WebhookSubscription', 'properties', 'state', 'enum'];
        yield 'SubscriptionState' => [SubscriptionState::class, $state];
        $reason = ['components', 'schemas', 'NotifyOutcome', 'properties', 'skipped', 'items', 'properties', 'reason',
            'enum'];
        yield 'NotifySkipReason' => [NotifySkipReason::class, $reason];
        // Remembered decisions (docs/design.md §18): documented by the branch that builds their routes.
        foreach (['RuleScope', 'RuleVerdict'] as $name) {
            yield $name => ["ApprovalResume\\Enum\\{$name}", ['components', 'schemas', $name, 'enum']];
        }
    }

    /**
     * @dataProvider enums
     * @param class-string<\BackedEnum> $enum
     * @param list<string> $path where the spec lists the enum's tokens
     */
    public function test_each_enum_holds_exactly_the_tokens_of_its_schema(string $enum, array $path): void
    {
        $tokens = self::$spec;
        foreach ($path as $key) {
            if (!isset($tokens[$key]) && in_array($enum, [RuleScope::class, RuleVerdict::class], true)) {
                self::markTestSkipped(implode('.', $path) . ' is not in openapi.yaml until the rules routes are');
            }
            $tokens = $tokens[$key];
        }
        self::assertSame($tokens, array_map(static fn (\BackedEnum $case) => $case->value, $enum::cases()));
    }

    public function test_every_request_the_client_sends_is_a_documented_operation_with_documented_members(): void
    {
        $transport = new RecordingTransport();
        $client = new Client('http://service.invalid', 'ar_key', $transport);
        $run = '0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01';
        $digest = str_repeat('a', 64);
        $messages = [['role' => 'assistant', 'content' => null, 'tool_calls' => []]];
        $input = [['type' => 'function_call', 'call_id' => 'call_1', 'name' => 'x', 'arguments' => '{}']];
        $contents = [['role' => 'model', 'parts' => [['functionCall' => ['name' => 'x', 'args' => ['page' => 12]]]]]];
        $instruction = ['parts' => [['text' => 'Be brief.']]];
        $calls = [
            fn () => $client->putUser(7, 'ada', true, true, false, ['publish_page']),
            fn () => $client->registerRun($run, 7, $messages, ['x' => Effect::Write], PrivacyLevel::Full, true, 60),
            fn () => $client->registerRun($run, 7, $messages, expiresAt: new \DateTimeImmutable('+1 hour')),
            fn () => $client->registerRun($run, 7, $messages, format: ModelInputFormat::Anthropic, system: 'Be brief.'),
            fn () => $client->registerRun($run, 7, $input, format: ModelInputFormat::OpenAiResponses, system: 'Hi.'),
            fn () => $client->registerRun($run, 7, $contents, format: ModelInputFormat::Gemini, system: $instruction),
            fn () => $client->getRun($run),
            fn () => $client->inbox(9, 7, 'publish_page', 10, '1_' . str_repeat('0', 32)),
            fn () => $client->approveTurn($run, $digest, Decider::user(9), ModelInputFormat::Anthropic),
            fn () => $client->denyTurn($run, $digest, Decider::nobody(), DenialReason::Skip),
            fn () => $client->denyTurn($run, $digest, Decider::tokenHolder()),
            fn () => $client->decideCalls($run, $digest, Decider::user(9), [
                Verdict::approve('call_1'),
                Verdict::approveEdited('call_2', ['page' => 12]),
                Verdict::deny('call_3', DenialReason::Variant),
            ]),
            fn () => $client->modelInput($run, ModelInputFormat::OpenAiResponses),
            fn () => $client->appendTurn($run, $messages, 30),
            fn () => $client->appendTurn($run, $input, format: ModelInputFormat::OpenAiResponses),
            fn () => $client->appendTurn($run, $contents, format: ModelInputFormat::Gemini),
            fn () => $client->cancelRun($run),
            fn () => $client->completeRun($run),
            fn () => $client->createWebhook('https://t.example.com/', [EventType::RunWaiting, EventType::RunResumed]),
            fn () => $client->rotateWebhookSecret('6f1c0e2a-0000-4000-8000-000000000000'),
            fn () => $client->rotateWebhookSecret('6f1c0e2a-0000-4000-8000-000000000000', 600),
            fn () => $client->removeWebhook('6f1c0e2a-0000-4000-8000-000000000000'),
            // Approval links, addresses and notify (docs/design.md §20).
            fn () => $client->putUser(7, 'ada', email: 'ada@example.com'),
            fn () => $client->registerRun($run, 7, $messages, notify: [7, 9]),
            fn () => $client->appendTurn($run, $messages, notify: [9]),
            fn () => $client->createLink($run, 9),
            fn () => $client->revokeLink($run, '6f1c0e2a-0000-4000-8000-000000000000'),
        ];
        foreach ($calls as $call) {
            try {
                $call();
                self::fail('the recording transport answers nothing');
            } catch (TransportException) {
            }
        }
        self::assertCount(count($calls), $transport->requests);
        foreach ($transport->requests as $request) {
            $this->assertDocumented($request);
        }
    }

    public function test_every_rules_request_the_client_sends_is_a_documented_operation_with_documented_members(): void
    {
        if (!isset(self::$spec['paths']['/v1/rules'])) {
            self::markTestSkipped('openapi.yaml has no /v1/rules until the rules routes (docs/design.md §18) merge');
        }
        $transport = new RecordingTransport();
        $client = new Client('http://service.invalid', 'ar_key', $transport);
        $run = '0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01';
        $digest = str_repeat('a', 64);
        $until = new \DateTimeImmutable('+1 day');
        $calls = [
            fn () => $client->createRunRule($run, 'publish', RuleVerdict::Deny, 7, ['page' => 12], DenialReason::Skip),
            fn () => $client->createRunRule($run, 'read_page', RuleVerdict::Approve),
            fn () => $client->createOwnerRule(7, 7, 'read_page', RuleVerdict::Approve, $until, '{"page": 12}'),
            fn () => $client->runRules($run),
            fn () => $client->ownerRules(7),
            fn () => $client->revokeRule('5d3c2b1a-0000-4000-8000-00000000000a', 7),
            fn () => $client->approveTurn($run, $digest, Decider::user(7), remember: Remember::run()),
            fn () => $client->denyTurn($run, $digest, Decider::user(7), remember: Remember::owner($until)),
            fn () => $client->decideCalls($run, $digest, Decider::user(7), [
                Verdict::approve('call_1', Remember::run()),
                Verdict::deny('call_2', DenialReason::Skip, Remember::owner($until)),
            ]),
        ];
        foreach ($calls as $call) {
            try {
                $call();
                self::fail('the recording transport answers nothing');
            } catch (TransportException) {
            }
        }
        self::assertCount(count($calls), $transport->requests);
        foreach ($transport->requests as $request) {
            $this->assertDocumented($request);
        }
    }

    /** @param array{method: string, url: string, headers: list<string>, body: ?string} $request */
    private function assertDocumented(array $request): void
    {
        $url = parse_url($request['url']);
        $what = $request['method'] . ' ' . $url['path'];
        $operation = $this->operation(strtolower($request['method']), $url['path']);
        self::assertNotNull($operation, "{$what} is no operation of openapi.yaml");
        [$pathItem, $op] = $operation;

        parse_str($url['query'] ?? '', $query);
        $documented = [];
        foreach ([...($pathItem['parameters'] ?? []), ...($op['parameters'] ?? [])] as $parameter) {
            $parameter = $this->resolve($parameter);
            if ($parameter['in'] === 'query') {
                $documented[$parameter['name']] = $parameter;
            }
        }
        foreach ($query as $name => $value) {
            self::assertArrayHasKey($name, $documented, "{$what}: query parameter {$name}");
            $schema = $this->resolve($documented[$name]['schema']);
            if (isset($schema['enum'])) {
                self::assertContains($value, $schema['enum'], "{$what}: {$name}");
            }
        }

        $schema = $op['requestBody']['content']['application/json']['schema'] ?? null;
        if ($schema === null) {
            self::assertNull($request['body'], "{$what} takes no body");
            return;
        }
        self::assertContains('Content-Type: application/json', $request['headers']);
        $this->assertFits(json_decode((string) $request['body'], true, 512, JSON_THROW_ON_ERROR), $schema, $what);
    }

    /**
     * The members of an object against its schema: each one documented, each required one present, enums and
     * nested objects (and lists of them) likewise.
     *
     * @param array<mixed> $schema
     */
    private function assertFits(mixed $value, array $schema, string $where): void
    {
        $schema = $this->resolve($schema);
        if (isset($schema['enum'])) {
            self::assertContains($value, $schema['enum'], $where);
        }
        foreach (['oneOf', 'anyOf'] as $keyword) {
            if (isset($schema[$keyword])) {
                // Fits when one option takes it: each is tried in turn, and a failed try is no failure yet.
                foreach ($schema[$keyword] as $option) {
                    try {
                        $this->assertFits($value, $option, $where);
                        return;
                    } catch (AssertionFailedError) {
                    }
                }
                self::fail("{$where}: none of the {$keyword} options takes the value");
            }
        }
        $type = $schema['type'] ?? null;
        if ($type !== null) {
            $types = (array) $type;
            self::assertTrue(self::hasType($value, $types), "{$where}: not of type " . implode('|', $types));
        }
        if (isset($schema['properties']) && is_array($value) && !array_is_list($value)) {
            foreach ($schema['required'] ?? [] as $required) {
                self::assertArrayHasKey($required, $value, "{$where}: required member {$required}");
            }
            foreach ($value as $member => $memberValue) {
                if (($schema['additionalProperties'] ?? true) === false) {
                    self::assertArrayHasKey($member, $schema['properties'], "{$where}: member {$member}");
                }
                if (isset($schema['properties'][$member])) {
                    $this->assertFits($memberValue, $schema['properties'][$member], "{$where}.{$member}");
                }
            }
        }
        if (isset($schema['items']) && is_array($value) && array_is_list($value)) {
            foreach ($value as $index => $item) {
                $this->assertFits($item, $schema['items'], "{$where}[{$index}]");
            }
        }
    }

    /** @param list<string> $types JSON Schema's type names */
    private static function hasType(mixed $value, array $types): bool
    {
        foreach ($types as $type) {
            $fits = match ($type) {
                'null' => $value === null,
                'string' => is_string($value),
                'integer' => is_int($value),
                'number' => is_int($value) || is_float($value),
                'boolean' => is_bool($value),
                'array' => is_array($value) && array_is_list($value),
                'object' => is_array($value) && ($value === [] || !array_is_list($value)),
                default => false,
            };
            if ($fits) {
                return true;
            }
        }
        return false;
    }

    /** @return ?array{array<mixed>, array<mixed>} the path item and the operation the request is */
    private function operation(string $method, string $path): ?array
    {
        foreach (self::$spec['paths'] as $template => $pathItem) {
            $pattern = '#^' . preg_replace('#\\\\\{[^/]+\\\\\}#', '[^/]+', preg_quote($template, '#')) . '$#';
            if (preg_match($pattern, $path) === 1 && isset($pathItem[$method])) {
                return [$pathItem, $pathItem[$method]];
            }
        }
        return null;
    }

    /**
     * @param array<mixed> $node
     * @return array<mixed>
     */
    private function resolve(array $node): array
    {
        while (isset($node['$ref'])) {
            $target = self::$spec;
            foreach (explode('/', substr($node['$ref'], 2)) as $part) {
                $target = $target[$part];
            }
            $node = $target;
        }
        return $node;
    }
}

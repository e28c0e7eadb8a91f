<?php

declare(strict_types=1);

namespace ApprovalResume\Tests\Support;

use ApprovalResume\Client;
use ApprovalResume\Token\SigningKey;

/**
 * The real binary against the real Postgres, once per PHPUnit process: a fresh database (createdb), `migrate`,
 * three API clients made by `clients add` as the README's callers hold them, a token key registered with
 * `clients token-key add`, and `serve` on a free loopback port with WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true, so its
 * webhooks may reach a receiver on loopback, and PUBLIC_URL its own address, so that it makes approval links.
 * Stopped, and the database dropped, when PHPUnit's process ends.
 *
 * APPROVAL_RESUME_BIN names the binary (default: the repository's target/debug/approval-resume);
 * POSTGRES_ADMIN_URL the server (default postgres://postgres@127.0.0.1:5432/postgres).
 */
final class Service
{
    public const TOKEN_ISSUER = 'chat';
    public const TOKEN_KID = 'php-tests-1';

    private static ?self $shared = null;

    /** @var resource|null */
    private $process = null;
    private bool $databaseCreated = false;
    public readonly string $baseUrl;
    /** `users:write`, `runs:write`, `runs:read`: the agent worker of the README. */
    public readonly string $workerKey;
    /** `approvals:read`, `runs:read`, `decisions:write`, `webhooks:write`: the AI Tasks module. */
    public readonly string $tasksKey;
    public readonly SigningKey $tokenKey;
    public readonly string $log;

    private function __construct(
        private readonly string $binary,
        private readonly string $adminUrl,
        private readonly string $database,
    ) {
        // Beside the build, overwritten by each run; tests/php/run.sh prints its end when a test fails.
        $directory = dirname(__DIR__, 4) . '/target/php-tests';
        if (!is_dir($directory) && !mkdir($directory, 0o755, true) && !is_dir($directory)) {
            throw new \RuntimeException("cannot create {$directory}");
        }
        $this->log = $directory . '/service.log';
        file_put_contents($this->log, '');
    }

    public static function shared(): self
    {
        if (self::$shared === null) {
            $binary = getenv('APPROVAL_RESUME_BIN') ?: dirname(__DIR__, 4) . '/target/debug/approval-resume';
            if (!is_executable($binary)) {
                throw new \RuntimeException("no binary at {$binary}: build it, or set APPROVAL_RESUME_BIN");
            }
            $adminUrl = getenv('POSTGRES_ADMIN_URL') ?: 'postgres://postgres@127.0.0.1:5432/postgres';
            $service = new self($binary, $adminUrl, 'php_client_' . bin2hex(random_bytes(6)));
            register_shutdown_function([$service, 'stop']);
            $service->start();
            self::$shared = $service;
        }
        return self::$shared;
    }

    public function worker(): Client
    {
        return new Client($this->baseUrl, $this->workerKey);
    }

    public function tasks(): Client
    {
        return new Client($this->baseUrl, $this->tasksKey);
    }

    public function stop(): void
    {
        if ($this->process !== null) {
            Process::stop($this->process);
            $this->process = null;
        }
        if ($this->databaseCreated) {
            Process::run(['dropdb', '--if-exists', '--force', '--maintenance-db=' . $this->adminUrl, $this->database]);
            $this->databaseCreated = false;
        }
    }

    private function start(): void
    {
        Process::run(['createdb', '--maintenance-db=' . $this->adminUrl, $this->database]);
        $this->databaseCreated = true;
        $env = ['DATABASE_URL' => $this->databaseUrl(), 'LOG_FORMAT' => 'json'];
        Process::run([$this->binary, 'migrate'], $env);
        $this->workerKey = $this->addClient('worker', ['users:write', 'runs:write', 'runs:read'], $env);
        $this->tasksKey = $this->addClient(
            'tasks',
            ['approvals:read', 'runs:read', 'decisions:write', 'webhooks:write'],
            $env,
        );
        // The chat backend's client: its tokens act for the person chatting; its key is not used here. Only a client
        // holding decisions:write may have token keys (docs/design.md §13).
        $this->addClient(self::TOKEN_ISSUER, ['runs:read', 'decisions:write'], $env);
        $this->tokenKey = SigningKey::generate();
        $publicKeyFile = tempnam(sys_get_temp_dir(), 'token-key-');
        file_put_contents($publicKeyFile, $this->tokenKey->publicKeyBase64());
        try {
            Process::run(
                [
                    $this->binary, 'clients', 'token-key', 'add', self::TOKEN_ISSUER,
                    '--kid', self::TOKEN_KID, '--public-key', $publicKeyFile,
                ],
                $env,
            );
        } finally {
            unlink($publicKeyFile);
        }
        $port = Process::freePort();
        $this->baseUrl = "http://127.0.0.1:{$port}";
        $this->process = Process::start([$this->binary, 'serve'], $env + [
            'LISTEN_ADDR' => "127.0.0.1:{$port}",
            'WEBHOOK_ALLOW_PRIVATE_ADDRESSES' => 'true',
            // A failed delivery is retried soon, so a slow first receiver start costs a second, not a minute.
            'WEBHOOK_BACKOFF_BASE_MS' => '200',
            'WEBHOOK_BACKOFF_MAX_SECS' => '2',
            // Its own address, so that it makes approval links (docs/design.md §20); no SMTP_URL: no mail is sent.
            'PUBLIC_URL' => $this->baseUrl,
        ], $this->log);
        $this->waitUntilReady();
    }

    /** @param list<string> $scopes */
    private function addClient(string $name, array $scopes, array $env): string
    {
        $command = [$this->binary, 'clients', 'add', $name];
        foreach ($scopes as $scope) {
            array_push($command, '--scope', $scope);
        }
        $key = trim(Process::run($command, $env));
        if (!str_starts_with($key, 'ar_')) {
            throw new \RuntimeException("clients add {$name} printed no key");
        }
        return $key;
    }

    private function waitUntilReady(): void
    {
        $deadline = microtime(true) + 30;
        while (microtime(true) < $deadline) {
            if (!proc_get_status($this->process)['running']) {
                break;
            }
            $answer = @file_get_contents($this->baseUrl . '/readyz');
            if ($answer !== false && str_contains($answer, '"ready"')) {
                return;
            }
            usleep(100_000);
        }
        $tail = implode("\n", array_slice(file($this->log, FILE_IGNORE_NEW_LINES) ?: [], -20));
        throw new \RuntimeException("approval-resume serve did not become ready; the end of its log:\n{$tail}");
    }

    private function databaseUrl(): string
    {
        $parts = parse_url($this->adminUrl);
        $auth = isset($parts['user']) ? $parts['user'] . (isset($parts['pass']) ? ':' . $parts['pass'] : '') . '@' : '';
        $port = isset($parts['port']) ? ':' . $parts['port'] : '';
        $host = $parts['host'] ?? '127.0.0.1';
        return sprintf('%s://%s%s%s/%s', $parts['scheme'] ?? 'postgres', $auth, $host, $port, $this->database);
    }
}

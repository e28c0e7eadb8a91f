<?php

declare(strict_types=1);

namespace ApprovalResume\Tests\Support;

/** Runs programs for the harness, without a shell (argument lists, never command lines). */
final class Process
{
    /**
     * Runs a command to its end; a non-zero exit throws, with its standard error (the service's subcommands print
     * no keys there: `clients add` prints the key on standard output only).
     *
     * @param list<string> $command
     * @param array<string, string> $env
     * @param ?string $cwd the directory it runs in; null: this process's
     */
    public static function run(array $command, array $env = [], ?string $cwd = null): string
    {
        $streams = [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']];
        $process = proc_open($command, $streams, $pipes, $cwd, self::env($env));
        if (!is_resource($process)) {
            throw new \RuntimeException('cannot start ' . $command[0]);
        }
        $stdout = stream_get_contents($pipes[1]);
        $stderr = stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        $status = proc_close($process);
        if ($status !== 0) {
            $name = implode(' ', array_slice($command, 0, 3));
            throw new \RuntimeException(sprintf("%s exited %d:\n%s", $name, $status, $stderr));
        }
        return (string) $stdout;
    }

    /**
     * Starts a long-running program, its output into `$log`.
     *
     * @param list<string> $command
     * @param array<string, string> $env
     * @return resource
     */
    public static function start(array $command, array $env, string $log)
    {
        $streams = [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'a'], 2 => ['file', $log, 'a']];
        $process = proc_open($command, $streams, $pipes, null, self::env($env));
        if (!is_resource($process)) {
            throw new \RuntimeException('cannot start ' . $command[0]);
        }
        return $process;
    }

    /**
     * Stops a program it started: SIGTERM, then SIGKILL after `$graceSecs`.
     *
     * @param resource $process
     */
    public static function stop($process, float $graceSecs = 10.0): void
    {
        if (!is_resource($process)) {
            return;
        }
        if (proc_get_status($process)['running']) {
            proc_terminate($process, 15);
            $deadline = microtime(true) + $graceSecs;
            while (proc_get_status($process)['running'] && microtime(true) < $deadline) {
                usleep(50_000);
            }
            if (proc_get_status($process)['running']) {
                proc_terminate($process, 9);
            }
        }
        proc_close($process);
    }

    /** A loopback port nobody listens on now (the kernel's pick for port 0). */
    public static function freePort(): int
    {
        $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
        if ($server === false) {
            throw new \RuntimeException("cannot bind a loopback port: {$error}");
        }
        $name = (string) stream_socket_get_name($server, false);
        fclose($server);
        return (int) substr($name, strrpos($name, ':') + 1);
    }

    /** Waits until something accepts connections on the port. */
    public static function waitForPort(int $port, float $timeoutSecs, callable $alive): void
    {
        $deadline = microtime(true) + $timeoutSecs;
        while (microtime(true) < $deadline) {
            $socket = @fsockopen('127.0.0.1', $port, $errno, $error, 0.2);
            if ($socket !== false) {
                fclose($socket);
                return;
            }
            if (!$alive()) {
                throw new \RuntimeException("the program meant to listen on port {$port} exited");
            }
            usleep(50_000);
        }
        throw new \RuntimeException("nothing listens on port {$port} after {$timeoutSecs} s");
    }

    /**
     * The environment of a child: this process's, with `$env` over it.
     *
     * @param array<string, string> $env
     * @return array<string, string>
     */
    private static function env(array $env): array
    {
        return array_merge(getenv(), $env);
    }
}

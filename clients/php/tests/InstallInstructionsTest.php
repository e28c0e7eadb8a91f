<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\Tests\Support\InstallLines;
use ApprovalResume\Tests\Support\Process;
use PHPUnit\Framework\TestCase;

/**
 * Install instructions name only what installs (docs/design.md §16): across the repository's docs, examples and
 * this package, no line installs an `approval-resume` package by a name no registry carries; and this package's
 * Composer lines install it, as written, with the network switched off.
 */
final class InstallInstructionsTest extends TestCase
{
    /** What readers read: the top-level docs, the examples, every client's README, this package whole. */
    private const SCANNED = [
        'README.md', 'TESTING.md', 'BENCHMARKS.md', 'docs', 'examples',
        'clients/python/README.md', 'clients/typescript/README.md', 'clients/php',
    ];
    private const SKIPPED_DIRECTORIES = ['node_modules', 'vendor', '.venv', 'dist', '__pycache__', 'target'];
    private const TEXT = ['md', 'php', 'py', 'ts', 'mts', 'js', 'mjs', 'json', 'toml', 'sh', 'txt', 'yaml', 'yml'];

    /** @return iterable<string, array{string}> */
    public static function unpublishedNames(): iterable
    {
        foreach (
            [
                'pip install approval-resume',
                'pip install "approval-resume[openai-agents]"',
                "pip3 install --upgrade 'approval_resume[pydantic-ai]'",
                'uv add approval-resume',
                'npm install approval-resume',
                'npm i approval-resume@0.1.0',
                'pnpm add -D approval-resume',
                'composer require approval-resume/client',
                'composer require "approval-resume/client:@dev"',
            ] as $line
        ) {
            yield $line => [$line];
        }
    }

    /** @return iterable<string, array{string}> */
    public static function installsFromTheRepository(): iterable
    {
        $composer = "```sh\ncomposer config repositories.approval-resume path ../approval-resume/clients/php\n"
            . "composer require \"approval-resume/client:@dev\"\n```";
        foreach (
            [
                'pip install ./clients/python',
                'pip install "./clients/python[openai-agents]"',
                'pip install "approval-resume[openai-agents] @ git+https://git.example.com/approval-resume.git'
                    . '#subdirectory=clients/python"',
                'npm install ../approval-resume/clients/typescript',
                'npm install ./approval-resume-0.1.0.tgz',
                $composer,
                '(`"repositories": [{"type": "path", "url": "…/clients/php"}]`, `composer require '
                    . 'approval-resume/client:@dev`)',
                'composer require firebase/php-jwt',
                'pip install standardwebhooks',
            ] as $text
        ) {
            yield $text => [$text];
        }
    }

    /** @dataProvider unpublishedNames */
    public function test_an_install_by_a_name_no_registry_carries_is_found(string $line): void
    {
        $offences = InstallLines::offences("Install it:\n\n{$line}\n\nThen run it.");
        self::assertCount(1, $offences);
        self::assertStringStartsWith($offences[0], $line, 'the offence is the line, quoted as written');
    }

    /** @dataProvider installsFromTheRepository */
    public function test_an_install_from_the_repository_or_of_a_published_package_passes(string $text): void
    {
        self::assertSame([], InstallLines::offences($text));
    }

    public function test_no_doc_example_or_file_of_this_package_installs_by_an_unpublished_name(): void
    {
        $offences = [];
        $files = 0;
        foreach (self::SCANNED as $path) {
            foreach (self::files(self::root() . '/' . $path) as $file) {
                if (realpath($file) === realpath(__FILE__)) {
                    continue; // its samples are meant to offend
                }
                $files++;
                foreach (InstallLines::offences((string) file_get_contents($file)) as $line) {
                    $offences[] = substr($file, strlen(self::root()) + 1) . ': ' . $line;
                }
            }
        }
        self::assertGreaterThan(20, $files, 'the scan found the docs');
        self::assertSame([], $offences);
    }

    public function test_the_readme_s_composer_lines_install_the_package_from_its_folder_with_no_network(): void
    {
        if (trim(Process::run(['sh', '-c', 'command -v composer || true'])) === '') {
            throw new \RuntimeException('this test needs Composer: apt-get install composer (tests/php/run.sh does)');
        }
        $readme = (string) file_get_contents(dirname(__DIR__) . '/README.md');
        self::assertSame(1, preg_match('/^## Install\n.*?^```sh\n(.*?)^```/ms', $readme, $block));
        $lines = array_values(array_filter(explode("\n", $block[1]), static fn ($line) => $line !== ''));
        self::assertCount(2, $lines);
        $project = sys_get_temp_dir() . '/composer-project-' . bin2hex(random_bytes(6));
        mkdir($project . '/home', 0o755, true);
        file_put_contents($project . '/composer.json', "{}\n");
        $env = [
            'COMPOSER_HOME' => $project . '/home',
            'COMPOSER_CACHE_DIR' => $project . '/home/cache',
            'COMPOSER_ALLOW_SUPERUSER' => '1',
            'COMPOSER_NO_INTERACTION' => '1',
            // Any registry lookup fails: what installs, installs from the folder.
            'COMPOSER_DISABLE_NETWORK' => '1',
        ];
        try {
            foreach ($lines as $line) {
                self::assertStringStartsWith('composer ', $line);
                $line = str_replace('/path/to/approval-resume', self::root(), $line);
                Process::run(['sh', '-c', $line], $env, $project);
            }
            self::assertSame(realpath(dirname(__DIR__)), realpath($project . '/vendor/approval-resume/client'));
            $loaded = Process::run(
                [PHP_BINARY, '-r', 'require "vendor/autoload.php"; echo ApprovalResume\Client::class;'],
                [],
                $project,
            );
            self::assertSame('ApprovalResume\Client', $loaded);
        } finally {
            // rm -r removes the vendor symlink, never what it points to.
            Process::run(['rm', '-rf', $project]);
        }
    }

    /** @return \Generator<string> the text files under `$path` (or `$path` itself), outside build output */
    private static function files(string $path): \Generator
    {
        if (is_file($path)) {
            yield $path;
            return;
        }
        $directories = new \RecursiveCallbackFilterIterator(
            new \RecursiveDirectoryIterator($path, \FilesystemIterator::SKIP_DOTS),
            static fn (\SplFileInfo $file): bool => !$file->isDir()
                || !in_array($file->getFilename(), self::SKIPPED_DIRECTORIES, true),
        );
        foreach (new \RecursiveIteratorIterator($directories) as $file) {
            if (in_array($file->getExtension(), self::TEXT, true)) {
                yield $file->getPathname();
            }
        }
    }

    private static function root(): string
    {
        return dirname(__DIR__, 3);
    }
}

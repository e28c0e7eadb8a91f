<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\Enum\RunStatus;
use ApprovalResume\Tests\Support\Process;
use ApprovalResume\Tests\Support\Runs;
use ApprovalResume\Tests\Support\Service;
use PHPUnit\Framework\TestCase;

/**
 * What the docs show of the client is what the client is: the README's example runs as written against the real
 * binary, and every member the docs' PHP snippets touch (`->problemCode`, `Verdict::deny(…)`) is a public member
 * of the package, so a renamed or protected one (`$e->code`) fails here rather than in a reader's hands.
 */
final class ReadmeTest extends TestCase
{
    /** The uid the README's example acts as; the tests' own uids start at 100 (Runs::newUid). */
    private const README_UID = 9;
    private const README_URL = 'http://127.0.0.1:8080';

    public function test_the_readme_s_example_denies_the_run_waiting_for_its_user_and_prints_the_model_s_text(): void
    {
        $service = Service::shared();
        $service->worker()->putUser(self::README_UID, 'ada');
        $run = Runs::register($service->worker(), self::README_UID);
        [$example] = self::phpBlocks(self::read('clients/php/README.md'));
        self::assertSame(1, substr_count($example, self::README_URL), 'the example names the service once');
        $script = tempnam(sys_get_temp_dir(), 'readme-example-');
        // Only the service's address is swapped; the rest runs as a reader would paste it, from the repository's root.
        file_put_contents($script, "<?php\n" . str_replace(self::README_URL, $service->baseUrl, $example));
        try {
            $output = Process::run([PHP_BINARY, $script], ['APPROVAL_RESUME_KEY' => $service->tasksKey], self::root());
        } finally {
            unlink($script);
        }

        self::assertStringStartsWith('Error: approval_denied (decided_by: run_owner', $output);
        self::assertSame(1, substr_count($output, "\n"), 'one run waited, one line printed');
        self::assertSame(RunStatus::Resumed, $service->worker()->getRun($run->id)->status);
    }

    /** @return iterable<string, array{string}> */
    public static function documents(): iterable
    {
        foreach (['clients/php/README.md', 'docs/integration.md', 'README.md'] as $path) {
            yield $path => [$path];
        }
    }

    /** @dataProvider documents */
    public function test_every_member_a_php_snippet_of_the_docs_touches_is_public_in_the_package(string $path): void
    {
        $public = self::publicMembers();
        foreach (self::phpBlocks(self::read($path)) as $block) {
            if (!str_contains($block, 'ApprovalResume\\')) {
                continue; // another library's snippet (firebase/php-jwt), not this package's
            }
            preg_match_all('/(?:->|::)([A-Za-z_][A-Za-z0-9_]*)/', $block, $matches);
            foreach (array_unique($matches[1]) as $member) {
                self::assertContains($member, $public, "{$path}: `{$member}` is no public member of the package");
            }
        }
        $this->addToAssertionCount(1);
    }

    /** @return list<string> the names of every public method, property, constant and enum case under src/ */
    private static function publicMembers(): array
    {
        $names = ['class'];
        $files = new \RecursiveIteratorIterator(new \RecursiveDirectoryIterator(dirname(__DIR__) . '/src'));
        foreach ($files as $file) {
            if ($file->getExtension() !== 'php') {
                continue;
            }
            $relative = substr($file->getPathname(), strlen(dirname(__DIR__) . '/src/'), -4);
            $class = new \ReflectionClass('ApprovalResume\\' . str_replace('/', '\\', $relative));
            foreach ($class->getMethods(\ReflectionMethod::IS_PUBLIC) as $method) {
                $names[] = $method->getName();
            }
            foreach ($class->getProperties(\ReflectionProperty::IS_PUBLIC) as $property) {
                $names[] = $property->getName();
            }
            foreach ($class->getReflectionConstants(\ReflectionClassConstant::IS_PUBLIC) as $constant) {
                $names[] = $constant->getName();
            }
        }
        return array_values(array_unique($names));
    }

    /** @return list<string> the bodies of the document's ```php blocks, in order */
    private static function phpBlocks(string $markdown): array
    {
        preg_match_all('/^[ \t]*```php\n(.*?)^[ \t]*```/ms', $markdown, $matches);
        return $matches[1];
    }

    private static function read(string $path): string
    {
        $text = file_get_contents(self::root() . '/' . $path);
        if ($text === false) {
            throw new \RuntimeException("cannot read {$path}");
        }
        return $text;
    }

    private static function root(): string
    {
        return dirname(__DIR__, 3);
    }
}

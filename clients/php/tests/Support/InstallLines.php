<?php

declare(strict_types=1);

namespace ApprovalResume\Tests\Support;

/**
 * Finds install instructions that name one of the project's packages as if a registry carried it (docs/design.md
 * §16, "Install instructions name only what installs"): no `approval-resume` name is published, so such a line
 * fails, or installs whatever someone registered under the name. What passes is an install from the repository:
 * pip a path or `"approval-resume[…] @ git+…"`, npm a path or a packed `.tgz`, Composer a `path` repository
 * (declared in the same paragraph, with `@dev`, since the folder's version is a branch).
 */
final class InstallLines
{
    /** The project's names in each ecosystem's spelling (PyPI reads `-`, `_` and `.` alike). */
    private const PIP = '/\b(?:pip3?|pipx|uv\s+pip)\s+install\s+(?:-{1,2}[\w-]+\s+)*["\']?approval[-_.]resume\b'
        // Possessive: the extras and the quote are taken whole, then: does a direct reference (` @ `) follow?
        . '(?:\[[^\]]*\])?+["\']?+(?!\s*@)/i';
    private const PIP_ADD = '/\b(?:poetry|uv|pdm)\s+add\s+(?:-{1,2}[\w-]+\s+)*["\']?approval[-_.]resume\b'
        . '(?:\[[^\]]*\])?+["\']?+(?!\s*@)/i';
    /** `approval-resume` alone or with a version; `approval-resume-0.1.0.tgz` (npm pack's file) is not the name. */
    private const NPM = '/\b(?:npm\s+(?:install|i|add)|yarn\s+add|pnpm\s+(?:add|install|i)|bun\s+add)\s+'
        . '(?:-{1,2}[\w-]+\s+)*["\']?approval-resume(?![\w.\/-])/i';
    private const COMPOSER = '/\bcomposer\s+require\s+(?:-{1,2}[\w-]+\s+)*["\']?(approval-resume\/[^\s"\'`]*)/i';
    private const PATH_REPOSITORY = '/"type"\s*:\s*"path"|\brepositories\.[\w-]+\s+path\s/';

    /**
     * The offending instructions in `$text`, each as it is written.
     *
     * @return list<string>
     */
    public static function offences(string $text): array
    {
        $found = [];
        foreach (preg_split('/\n[ \t]*\n/', $text) ?: [] as $paragraph) {
            foreach ([self::PIP, self::PIP_ADD, self::NPM] as $pattern) {
                preg_match_all($pattern, $paragraph, $matches);
                array_push($found, ...$matches[0]);
            }
            preg_match_all(self::COMPOSER, $paragraph, $matches, PREG_SET_ORDER);
            $fromPath = preg_match(self::PATH_REPOSITORY, $paragraph) === 1;
            foreach ($matches as [$instruction, $package]) {
                if (!$fromPath || !str_contains($package, '@dev')) {
                    $found[] = $instruction;
                }
            }
        }
        return $found;
    }
}

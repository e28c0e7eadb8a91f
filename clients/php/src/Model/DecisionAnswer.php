<?php

declare(strict_types=1);

namespace ApprovalResume\Model;

use ApprovalResume\Enum\ModelInputFormat;
use ApprovalResume\Enum\RunStatus;
use ApprovalResume\Internal\Read;

/**
 * The answer to a decision: what was recorded, one result per pending call, and the resumed model input (null to a
 * decision token where the run's privacy level hides it: `metadata`, `none`). `$format` is the run's own. A decision
 * that released calls to the worker (docs/design.md §15) lists them in `$releasedCalls`; while any waits for its
 * result the status is `released`, `$results` holds the calls that have one, and the model input is null.
 */
final readonly class DecisionAnswer
{
    /**
     * @param list<ToolResult> $results in the turn's order
     * @param list<ReleasedCall> $releasedCalls in the turn's order
     */
    public function __construct(
        public string $runId,
        public RunStatus $status,
        public Decision $decision,
        public array $results,
        public ?ModelInput $modelInput,
        public ModelInputFormat $format,
        public array $releasedCalls = [],
    ) {
    }

    /** @param array<mixed> $data */
    public static function fromArray(array $data): self
    {
        $modelInput = Read::optionalObject($data, 'model_input');
        return new self(
            Read::string($data, 'run_id'),
            Read::enum($data, 'status', RunStatus::class),
            Decision::fromArray(Read::object($data, 'decision')),
            array_map(ToolResult::fromArray(...), Read::listOfObjects($data, 'results')),
            $modelInput === null ? null : ModelInput::fromArray($modelInput),
            Read::enum($data, 'format', ModelInputFormat::class),
            isset($data['released_calls'])
                ? array_map(ReleasedCall::fromArray(...), Read::listOfObjects($data, 'released_calls'))
                : [],
        );
    }

    /** The result of one call, by its id. */
    public function result(string $callId): ?ToolResult
    {
        foreach ($this->results as $result) {
            if ($result->callId === $callId) {
                return $result;
            }
        }
        return null;
    }
}

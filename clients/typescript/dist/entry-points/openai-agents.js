/**
 * `approval-resume/openai-agents`, as package.json's `exports` serves it: the adapter's module
 * (`src/openai-agents`), loaded through {@link loadEntry} so that a linked install, or an application
 * without `@openai/agents`, says what to do. Its types are the module's own. Every value the module exports is named
 * here; test/entry-points.test.ts holds the two lists equal.
 * @module
 */
import { loadEntry } from "./load.js";
const loaded = await loadEntry("approval-resume/openai-agents", () => import("../openai-agents/index.js"));
export const { DEFAULT_MAX_DECIDED_TURNS, OpenAIAgentsWorker, currentIdempotencyKey, idempotencyKey } = loaded;
//# sourceMappingURL=openai-agents.js.map
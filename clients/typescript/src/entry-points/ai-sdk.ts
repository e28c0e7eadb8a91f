/**
 * `approval-resume/ai-sdk`, as package.json's `exports` serves it: the adapter's module (`src/ai-sdk`),
 * loaded through {@link loadEntry} so that a linked install, or an application without `ai`, says what to do. Its
 * types are the module's own. Every value the module exports is named here; test/entry-points.test.ts holds the two
 * lists equal.
 * @module
 */
import { loadEntry } from "./load.js";

const loaded = await loadEntry("approval-resume/ai-sdk", () => import("../ai-sdk/index.js"));

export const { AiSdkWorker, DEFAULT_MAX_DECIDED_TURNS, currentIdempotencyKey, idempotencyKey } = loaded;

/**
 * The tenant's events (`GET /v1/events?after&wait`, docs/design.md §10) as an async iterator that long-polls and keeps
 * its place in a {@link CursorStore}, so a reader that stops and starts again (a restart of its process included)
 * neither misses nor repeats an event.
 *
 * The service hands out one cursor per page, not per event, so the stored place is the page's cursor plus the ids
 * of the events of that page already handled ({@link FeedPosition}); a restart in the middle of a page reads the
 * page again and skips those. The place is saved after each event is handled, which is when the loop asks for the
 * next one:
 *
 * ```ts
 * for await (const event of client.feed({ store, signal })) {
 *     await handle(event); // saved as handled once the loop comes back for the next event
 * }
 * ```
 *
 * Stop with the `signal`: an abort while `handle` runs lets the loop finish that event, saves it, and ends the
 * iteration; an abort while waiting for events ends it at once. Leaving the loop by `break`, `return` or an
 * exception does not mark the event in hand handled (an iterator cannot tell a `break` after handling from an
 * exception thrown while handling), so it comes again on the next start: at least once, never lost.
 * @module
 */
import { ApiError } from "./errors.js";
/** A position kept in memory: for one process, or for tests. */
export class MemoryCursorStore {
    #position;
    constructor(position = null) {
        this.#position = position === null ? null : copy(position);
    }
    async load() {
        return this.#position === null ? null : copy(this.#position);
    }
    async save(position) {
        this.#position = copy(position);
    }
}
function copy(position) {
    return { after: position.after, handled: [...position.handled] };
}
/** Seconds to wait after a 503 or 429 that names no Retry-After. */
const DEFAULT_RETRY_SECS = 1;
/** The feed as an async iterable; see the module's documentation. Each iteration resumes from the store. */
export class Feed {
    #read;
    #store;
    #wait;
    #limit;
    #signal;
    constructor(read, options = {}) {
        this.#read = read;
        this.#store = options.store ?? new MemoryCursorStore();
        this.#wait = options.wait ?? 20;
        this.#limit = options.limit;
        this.#signal = options.signal;
    }
    async *[Symbol.asyncIterator]() {
        const signal = this.#signal;
        let position = (await this.#store.load()) ?? { after: null, handled: [] };
        while (!signal?.aborted) {
            const page = await this.#readPage(position.after);
            if (page === null) {
                return;
            }
            const handled = new Set(position.handled);
            const fresh = page.events.filter((event) => !handled.has(event.id));
            for (const [index, event] of fresh.entries()) {
                yield event;
                // The loop came back for the next event: this one is handled. After the page's last, the page's
                // cursor alone says so.
                position =
                    index === fresh.length - 1
                        ? { after: page.next_cursor, handled: [] }
                        : { after: position.after, handled: [...position.handled, event.id] };
                await this.#store.save(position);
                if (signal?.aborted) {
                    return;
                }
            }
            if (position.after !== page.next_cursor || position.handled.length > 0) {
                // An empty page, or one whose events were all handled before a restart: move past it.
                position = { after: page.next_cursor, handled: [] };
                await this.#store.save(position);
            }
        }
    }
    /**
     * One page after `after`; `null` when the signal ended the wait. A 503, or a 429 `too_many_waiting_readers`
     * (docs/design.md §17: the client or the instance has as many readers waiting as it may), is asked again after
     * Retry-After.
     */
    async #readPage(after) {
        const signal = this.#signal;
        const query = { wait: this.#wait };
        if (after !== null) {
            query.after = after;
        }
        if (this.#limit !== undefined) {
            query.limit = this.#limit;
        }
        for (;;) {
            try {
                return await this.#read(query, signal);
            }
            catch (error) {
                if (signal?.aborted) {
                    return null;
                }
                if (!(error instanceof ApiError) || (error.status !== 503 && error.status !== 429)) {
                    throw error;
                }
                if (!(await sleep((error.retryAfter ?? DEFAULT_RETRY_SECS) * 1000, signal))) {
                    return null;
                }
            }
        }
    }
}
/** Waits `ms`; false when the signal aborted the wait. */
function sleep(ms, signal) {
    return new Promise((resolve) => {
        if (signal?.aborted) {
            resolve(false);
            return;
        }
        const onAbort = () => {
            clearTimeout(timer);
            resolve(false);
        };
        const timer = setTimeout(() => {
            signal?.removeEventListener("abort", onAbort);
            resolve(true);
        }, ms);
        signal?.addEventListener("abort", onAbort, { once: true });
    });
}
//# sourceMappingURL=feed.js.map
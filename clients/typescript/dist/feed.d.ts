import type { Event, EventsPage, EventsQuery } from "./schemas.js";
/** Where a reader stands: the cursor to read after, and the events after it it has already handled. */
export interface FeedPosition {
    /** The `next_cursor` to pass as `after`; `null` before the first page (from the oldest event kept). */
    after: string | null;
    /** Ids of events after `after` already handled (at most one page's worth). */
    handled: string[];
}
/** Keeps a reader's {@link FeedPosition} between starts. `save` must be durable once it resolves. */
export interface CursorStore {
    /** The saved position; `null` when none was saved yet. */
    load(): Promise<FeedPosition | null>;
    save(position: FeedPosition): Promise<void>;
}
/** A position kept in memory: for one process, or for tests. */
export declare class MemoryCursorStore implements CursorStore {
    #private;
    constructor(position?: FeedPosition | null);
    load(): Promise<FeedPosition | null>;
    save(position: FeedPosition): Promise<void>;
}
export interface FeedOptions {
    /** Where the position is kept; a fresh {@link MemoryCursorStore} when absent. */
    store?: CursorStore;
    /** Seconds a read waits for an event when there is none (the service cuts it to FEED_MAX_WAIT_SECS). Default 20. */
    wait?: number;
    /** Most events per read (1 to 1000; the service's default 100 when absent). */
    limit?: number;
    /** Stops the iteration (see the module's documentation). */
    signal?: AbortSignal;
}
/** Reads one page; the client's `events` method. */
export type ReadPage = (query: EventsQuery, signal: AbortSignal | undefined) => Promise<EventsPage>;
/** The feed as an async iterable; see the module's documentation. Each iteration resumes from the store. */
export declare class Feed implements AsyncIterable<Event> {
    #private;
    constructor(read: ReadPage, options?: FeedOptions);
    [Symbol.asyncIterator](): AsyncGenerator<Event, void, undefined>;
}
//# sourceMappingURL=feed.d.ts.map
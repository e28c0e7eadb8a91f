import type { CursorStore, FeedPosition } from "./feed.js";
export declare class FileCursorStore implements CursorStore {
    readonly path: string;
    /** @param path the file; its directory must exist. Missing, the reader starts from the oldest event kept. */
    constructor(path: string);
    load(): Promise<FeedPosition | null>;
    save(position: FeedPosition): Promise<void>;
}
//# sourceMappingURL=file-cursor-store.d.ts.map
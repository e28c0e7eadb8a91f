/**
 * A {@link CursorStore} in a file, for readers that must resume after a restart (Node.js only, hence its own entry
 * point: `approval-resume/file-cursor-store`). Each save writes a temporary file beside it, flushes it to disk,
 * renames it over the old one and flushes the directory, so the file always holds one whole position, the last
 * saved, even when the process or the machine stops mid-write.
 * @module
 */
import { randomBytes } from "node:crypto";
import { open, readFile, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
export class FileCursorStore {
    path;
    /** @param path the file; its directory must exist. Missing, the reader starts from the oldest event kept. */
    constructor(path) {
        this.path = path;
    }
    async load() {
        let text;
        try {
            text = await readFile(this.path, "utf8");
        }
        catch (error) {
            if (error.code === "ENOENT") {
                return null;
            }
            throw error;
        }
        // A file that is not a position is an error, never a fresh start: that would read every event again.
        let value;
        try {
            value = JSON.parse(text);
        }
        catch {
            throw new Error(`${this.path} holds no feed position (not JSON)`);
        }
        if (!isPosition(value)) {
            throw new Error(`${this.path} holds no feed position`);
        }
        return { after: value.after, handled: [...value.handled] };
    }
    async save(position) {
        const directory = dirname(this.path);
        const temporary = join(directory, `.${basename(this.path)}.${randomBytes(6).toString("hex")}.tmp`);
        try {
            const file = await open(temporary, "wx", 0o600);
            try {
                await file.writeFile(JSON.stringify({ after: position.after, handled: position.handled }), "utf8");
                await file.sync();
            }
            finally {
                await file.close();
            }
            await rename(temporary, this.path);
        }
        catch (error) {
            await rm(temporary, { force: true });
            throw error;
        }
        // The rename is durable only once the directory's entry is on disk too.
        const entry = await open(directory, "r");
        try {
            await entry.sync();
        }
        finally {
            await entry.close();
        }
    }
}
function isPosition(value) {
    if (typeof value !== "object" || value === null) {
        return false;
    }
    const { after, handled } = value;
    return ((after === null || typeof after === "string") &&
        Array.isArray(handled) &&
        handled.every((id) => typeof id === "string"));
}
//# sourceMappingURL=file-cursor-store.js.map
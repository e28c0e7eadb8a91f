/**
 * How each entry point of the package loads its module: by a dynamic `import`, so that a dependency Node.js cannot
 * find is an error that says why and what to do, not a bare `ERR_MODULE_NOT_FOUND` (a static import fails before
 * any of the package's code runs, with nothing to catch).
 *
 * The usual cause: the package folder installed the plain way, `npm install <checkout>/clients/typescript`. npm then
 * links the folder into the application instead of copying it, and installs nothing for it; Node.js resolves a
 * linked package's imports from the folder's real place, never from the application, so `openapi-fetch` and the
 * adapters' peers (`ai`, `@openai/agents`) are not found. The other: a copy installed as it should be, without the
 * framework an adapter needs.
 * @module
 */
import { dirname, sep } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The package's folder (this file is its `dist/entry-points/load.js`), as Node.js loaded it: for a link, the
 * folder's real place, not the application's `node_modules` entry.
 */
const PACKAGE_FOLDER = dirname(dirname(dirname(fileURLToPath(import.meta.url))));

/** `load()`, or, when it cannot find a package, the error {@link explained} makes of it. */
export async function loadEntry<T>(entry: string, load: () => Promise<T>): Promise<T> {
    try {
        return await load();
    } catch (error) {
        throw explained(entry, error, PACKAGE_FOLDER);
    }
}

/**
 * A package `entry` could not load, said with the way out: outside any `node_modules` folder, the package was
 * linked (install a copy); inside one, the application lacks the package (install it there). Every other error is
 * given back as it is. The new error keeps `code` `ERR_MODULE_NOT_FOUND`, and Node.js's error as its `cause`.
 */
export function explained(entry: string, error: unknown, folder: string): unknown {
    if (!(error instanceof Error) || (error as NodeJS.ErrnoException).code !== "ERR_MODULE_NOT_FOUND") {
        return error;
    }
    const missing = /Cannot find package '([^']+)'/.exec(error.message)?.[1];
    if (missing === undefined) {
        return error;
    }
    const linked = !folder.split(sep).includes("node_modules");
    const message = linked
        ? `${entry} cannot load ${missing}: approval-resume at ${folder} is not inside a node_modules folder, so it ` +
          "was linked into your application (a plain `npm install <folder>` links it), and Node.js resolves a " +
          "linked package's imports from its own folder, never from your application. Install a copy instead: " +
          `\`npm install --install-links ${folder}\`, or \`npm pack\` in that folder and \`npm install\` the .tgz.`
        : `${entry} cannot load ${missing}: install it in your application (\`npm install ${missing}\`).`;
    return Object.assign(new Error(message, { cause: error }), { code: "ERR_MODULE_NOT_FOUND" });
}

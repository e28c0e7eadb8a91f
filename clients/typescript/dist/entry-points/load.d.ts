/** `load()`, or, when it cannot find a package, the error {@link explained} makes of it. */
export declare function loadEntry<T>(entry: string, load: () => Promise<T>): Promise<T>;
/**
 * A package `entry` could not load, said with the way out: outside any `node_modules` folder, the package was
 * linked (install a copy); inside one, the application lacks the package (install it there). Every other error is
 * given back as it is. The new error keeps `code` `ERR_MODULE_NOT_FOUND`, and Node.js's error as its `cause`.
 */
export declare function explained(entry: string, error: unknown, folder: string): unknown;
//# sourceMappingURL=load.d.ts.map
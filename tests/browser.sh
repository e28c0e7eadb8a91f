#!/usr/bin/env bash
# The browser test of the approval card (TESTING.md): the service (debug binary) on a database of its own, a
# client `chat` with a registered Ed25519 token key and one allowed origin (the example host), and
# examples/chat-frontend/browser-test.mjs driving Debian's headless Chromium with playwright-core (no browser is
# ever downloaded). Screenshots before and after the clicks are left in target/browser/.
#
# Needs PostgreSQL on 127.0.0.1:5432 (user postgres, no password), psql, curl, Node 18+ with npm, and Debian's
# `chromium` (installed with apt-get when missing and running as root).
set -euo pipefail

cd "$(dirname "$0")/.."

admin_url="${BROWSER_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
database="approval_resume_browser_$$"
export DATABASE_URL="${admin_url%/*}/${database}"
artifacts="$PWD/target/browser"
binary=target/debug/approval-resume
example=examples/chat-frontend
service_pid=""

cleanup() {
    local status=$?
    if [[ -n "$service_pid" ]] && kill -0 "$service_pid" 2>/dev/null; then
        kill "$service_pid"
        wait "$service_pid" 2>/dev/null || true
    fi
    psql -q "$admin_url" -c "drop database if exists ${database} with (force)" >/dev/null 2>&1 || true
    exit "$status"
}
trap cleanup EXIT

if [[ ! -x /usr/bin/chromium ]]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
service_port=$(free_port)
host_port=$(free_port)
other_port=$(free_port)

(cd "$example" && npm ci --no-audit --no-fund --silent)
cargo build --locked --bin approval-resume
mkdir -p "$artifacts"
rm -f "$artifacts"/*.png

work=$(mktemp -d)
node -e '
const { generateKeyPairSync } = require("node:crypto");
const fs = require("node:fs");
const { privateKey, publicKey } = generateKeyPairSync("ed25519");
fs.writeFileSync(process.argv[1], privateKey.export({ type: "pkcs8", format: "pem" }));
fs.writeFileSync(process.argv[2], publicKey.export({ type: "spki", format: "pem" }));
' "$work/key.pem" "$work/public.pem"

admin_key=$("$binary" clients add browser-admin --scope runs:write --scope runs:read --scope users:write 2>/dev/null)
"$binary" clients add chat --scope runs:read --scope decisions:write --allow-origin "http://127.0.0.1:${host_port}" >/dev/null 2>&1
"$binary" clients token-key add chat --kid k1 --public-key "$work/public.pem"

LISTEN_ADDR="127.0.0.1:${service_port}" LOG_FORMAT=json "$binary" serve >"$artifacts/service.log" 2>&1 &
service_pid=$!
for _ in $(seq 1 50); do
    curl -fsS "http://127.0.0.1:${service_port}/readyz" >/dev/null 2>&1 && break
    sleep 0.2
done

SERVICE_URL="http://127.0.0.1:${service_port}" ADMIN_KEY="$admin_key" SIGNING_KEY="$work/key.pem" KID=k1 \
    CLIENT=chat HOST_PORT="$host_port" OTHER_PORT="$other_port" ARTIFACTS="$artifacts" \
    node "$example/browser-test.mjs"
rm -rf "$work"
ls "$artifacts"/*.png

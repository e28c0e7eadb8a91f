#!/usr/bin/env bash
# The approval links end to end (DESIGN.md §20, TESTING.md): the service (debug binary) on a database of its own
# sends its mail through a real SMTP server that insists on STARTTLS (aiosmtpd from PyPI, on a certificate of a
# throwaway authority this script makes with openssl, given to the service as SMTP_CA_FILE), and
# tests/links/links-test.mjs reads the mails, opens their links in Debian's headless Chromium (playwright-core,
# no browser downloaded), checks the pages with axe-core, clicks, and stops and restarts the SMTP server to see that
# decisions do not wait for mail and that a mail held back is sent once the server is back. Screenshots and the
# service's log and the mails received (one JSON file each) are left in target/links/.
#
# Needs PostgreSQL on 127.0.0.1:5432 (user postgres, no password), psql, curl, openssl, Python 3.11+ with venv,
# npm (Node.js 24 comes from npm: tests/typescript-client/node.sh) and Debian's `chromium` (installed with apt-get
# when missing and running as root).
set -euo pipefail

cd "$(dirname "$0")/../.."
started=$SECONDS

admin_url="${LINKS_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
database="approval_resume_links_$$"
export DATABASE_URL="${admin_url%/*}/${database}"
artifacts="$PWD/target/links"
binary=target/debug/approval-resume
venv=target/links-venv
work=$(mktemp -d)
service_pid=""

cleanup() {
    local status=$?
    if [[ -n "$service_pid" ]] && kill -0 "$service_pid" 2>/dev/null; then
        kill "$service_pid"
        wait "$service_pid" 2>/dev/null || true
    fi
    # The driver stops the SMTP server it started; this is for a driver that died first.
    if [[ -f "$work/smtp.pid" ]]; then
        kill "$(cat "$work/smtp.pid")" 2>/dev/null || true
    fi
    psql -q "$admin_url" -c "drop database if exists ${database} with (force)" >/dev/null 2>&1 || true
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT

if [[ ! -x /usr/bin/chromium ]]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version

source tests/typescript-client/node.sh
use_current_node
(cd tests/links && npm ci --no-audit --no-fund --silent)
source tests/python-venv.sh
python_venv "$venv" tests/links/requirements.txt
cargo build --locked --bin approval-resume
mkdir -p "$artifacts"
rm -rf "$artifacts"/*.png "$artifacts/mail"
installed=$SECONDS

# A throwaway certificate authority and the SMTP server's certificate for localhost and 127.0.0.1, signed by it.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=approval-resume links test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$work/smtp.key" -out "$work/smtp.csr" 2>/dev/null
printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" "subjectAltName=DNS:localhost,IP:127.0.0.1" >"$work/smtp.ext"
openssl x509 -req -in "$work/smtp.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
    -extfile "$work/smtp.ext" -out "$work/smtp.pem" 2>/dev/null

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
service_port=$(free_port)
smtp_port=$(free_port)
public_url="http://127.0.0.1:${service_port}"

admin_key=$("$binary" clients add links-admin --scope runs:write --scope runs:read --scope users:write \
    --scope decisions:write --scope metrics:read 2>/dev/null)

# PRIVACY_LEVEL=full: the page shows the arguments (the canary is there to be seen), the mail never does.
LISTEN_ADDR="127.0.0.1:${service_port}" LOG_FORMAT=json PRIVACY_LEVEL=full PUBLIC_URL="$public_url" \
    SMTP_URL="smtp://localhost:${smtp_port}?tls=required" SMTP_CA_FILE="$work/ca.pem" \
    MAIL_FROM="Approvals <approvals@links.test>" \
    "$binary" serve >"$artifacts/service.log" 2>&1 &
service_pid=$!
for _ in $(seq 1 50); do
    curl -fsS "${public_url}/readyz" >/dev/null 2>&1 && break
    sleep 0.2
done
curl -fsS "${public_url}/readyz" >/dev/null

SERVICE_URL="$public_url" ADMIN_KEY="$admin_key" ARTIFACTS="$artifacts" \
    SMTP_PYTHON="$PWD/$venv/bin/python" SMTP_PORT="$smtp_port" SMTP_CERT="$work/smtp.pem" SMTP_KEY="$work/smtp.key" \
    SMTP_PIDFILE="$work/smtp.pid" MAILDIR="$artifacts/mail" MAIL_FROM_ADDRESS="approvals@links.test" \
    node tests/links/links-test.mjs
echo "links suite: $((installed - started)) s of installs and build, $((SECONDS - installed)) s of tests"

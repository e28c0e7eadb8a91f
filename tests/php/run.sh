#!/usr/bin/env bash
# Proves the PHP client (clients/php) against the real binary: PHPUnit 9.6 from Debian drives `approval-resume`
# (migrate, clients add, token-key add, serve on a free loopback port, its own fresh database) through the client:
# users, the inbox, decisions, decision tokens minted with ext-sodium, webhooks the service signed; and holds the
# client's requests and enums to openapi.yaml, and holds the docs' install lines to design §16 (Composer installs the
# package from its folder with the network off); first, phpcs holds the PHP to PSR-12. CI runs it after the Rust
# tests, which build the binary; locally: `cargo build --bin approval-resume && bash tests/php/run.sh`.
# Needs Postgres as for the API tests, and Debian's php-cli, php-curl, php-yaml, phpunit, php-codesniffer and composer
# (installed with apt when missing, as CI runs as root on a fresh machine). APPROVAL_RESUME_BIN overrides the
# binary.
set -euo pipefail

cd "$(dirname "$0")/../.."

has_extensions() {
    local missing
    missing="$(php -r 'echo implode(" ", array_filter(array_slice($argv, 1), fn ($e) => !extension_loaded($e)));' "$@")"
    if [ -n "$missing" ]; then
        echo "PHP lacks the extension(s): $missing" >&2
        return 1
    fi
}
have_php() {
    command -v php >/dev/null 2>&1 && command -v phpunit >/dev/null 2>&1 && command -v phpcs >/dev/null 2>&1 &&
        command -v composer >/dev/null 2>&1 && has_extensions curl json sodium yaml 2>/dev/null
}
if ! have_php; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        php-cli php-curl php-yaml phpunit php-codesniffer composer
fi
has_extensions curl json sodium yaml
php --version | head -1
phpunit --version

# PSR-12 (the ruleset says what it leaves out, and why); a warning fails the run too.
phpcs --standard=clients/php/phpcs.xml.dist

export APPROVAL_RESUME_BIN="${APPROVAL_RESUME_BIN:-$PWD/target/debug/approval-resume}"
if [ ! -x "$APPROVAL_RESUME_BIN" ]; then
    echo "no binary at $APPROVAL_RESUME_BIN: cargo build --bin approval-resume first" >&2
    exit 1
fi

if ! phpunit -c clients/php/phpunit.xml.dist; then
    echo "PHP client tests failed; the end of the service's log (target/php-tests/service.log):" >&2
    tail -n 40 target/php-tests/service.log >&2 || true
    exit 1
fi

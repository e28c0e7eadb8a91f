#!/usr/bin/env bash
# The adapters against the framework releases their peer ranges declare (docs/design.md §16): for each of `ai`
# (approval-resume/ai-sdk) and `@openai/agents` (approval-resume/openai-agents), the oldest and the newest release
# of the range in clients/typescript/package.json, resolved from the registry when this runs, so a new release that
# breaks an adapter fails here (the fix: the adapter, or a declared upper bound). run.sh tests the locked releases.
#
# Each version gets an application of its own under target/typescript-client/matrix/, installed as a user installs
# it: the package packed (`npm pack`, the checked-in dist/) beside that framework release, with no lock file. The
# adapter's compiled tests (run.sh's build-test/, built here if absent) run there against the binary, importing the
# package and the framework from that application.
#
# First, the package folder installed the plain way (a link) into a fresh application, and a copy into one without the
# frameworks: each entry point that cannot load says what to install, and how.
#
# Locally: `bash tests/typescript-client/run.sh && bash tests/typescript-client/matrix.sh`. The same needs as run.sh.
set -euo pipefail

cd "$(dirname "$0")/../.."
root=$PWD
package=clients/typescript
work=target/typescript-client/matrix

step() {
    printf '\n==> %s\n' "$*"
}

# shellcheck source=tests/typescript-client/node.sh
source tests/typescript-client/node.sh
use_current_node

export APPROVAL_RESUME_BIN="${APPROVAL_RESUME_BIN:-$PWD/target/debug/approval-resume}"
if [ ! -x "$APPROVAL_RESUME_BIN" ]; then
    echo "no binary at $APPROVAL_RESUME_BIN: cargo build --bin approval-resume first" >&2
    exit 1
fi

started=$(date +%s)
step "The package packed, and its compiled tests"
if [ ! -d "$package/node_modules" ]; then
    (cd "$package" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
if [ ! -f "$package/build-test/ai-sdk.test.js" ]; then
    (cd "$package" && node_modules/.bin/tsc -p tsconfig.test.json --noCheck)
fi
rm -rf "$work"
mkdir -p "$work"
tarball=$(cd "$package" && npm pack --ignore-scripts --silent --pack-destination "$root/$work")
echo "$work/$tarball"

# The peer range of a framework, as package.json declares it.
range() {
    node -e 'console.log(require(process.argv[1]).peerDependencies[process.argv[2]])' "$root/$package/package.json" "$1"
}
# The release the lock file pins.
locked() {
    node -e 'console.log(require(process.argv[1]).packages["node_modules/" + process.argv[2]].version)' \
        "$root/$package/package-lock.json" "$1"
}
# The oldest and the newest release in a range, from the registry now.
ends() {
    npm view "$1@$2" version --json |
        node -e '
            // npm lists them in the registry'"'"'s order, not by version: sorted here, by release numbers (a ^ range
            // holds no prereleases).
            const order = (a, b) => { const [x, y] = [a, b].map((v) => v.split(".").map(Number));
                return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; };
            const v = [].concat(JSON.parse(require("fs").readFileSync(0, "utf8"))).sort(order);
            console.log(v[0], v[v.length - 1]);'
}

failed=()

# The package folder installed the plain way (`npm install <folder>`, no --install-links) into a fresh application,
# from a folder as a fresh checkout has it (dist/ checked in, no node_modules; the repository's own has one, which a
# link would load from): npm links it and exits 0, and each entry point then refuses to load, naming
# --install-links. And a copy in an application without the frameworks: each adapter names the package to install.
step "A plain folder install (a link), and a copy without the frameworks"
fresh="$work/fresh-checkout"
mkdir -p "$fresh"
cp -r "$package/package.json" "$package/dist" "$fresh/"
# Each entry point, imported in the application in the current directory: "ok" or the error's code and message.
imported() {
    node --input-type=module -e '
        for (const entry of ["approval-resume", "approval-resume/ai-sdk", "approval-resume/openai-agents"]) {
            const said = await import(entry).then(() => "ok", (error) => `${error.code}: ${error.message}`);
            console.log(`${entry} => ${said}`);
        }'
}
linked_app="$work/linked-app"
mkdir -p "$linked_app"
echo '{ "name": "linked-app", "private": true, "type": "module" }' >"$linked_app/package.json"
(cd "$linked_app" && npm install "$root/$fresh" "ai@$(locked ai)" "zod@$(locked zod)" --no-audit --no-fund \
    --loglevel=error)
said=$(cd "$linked_app" && imported)
echo "$said"
[ -L "$linked_app/node_modules/approval-resume" ] || failed+=("a plain folder install: npm made no link")
for entry in approval-resume approval-resume/ai-sdk approval-resume/openai-agents; do
    grep -qF "$entry => ERR_MODULE_NOT_FOUND: $entry cannot load " <<<"$said" &&
        grep -F "$entry => " <<<"$said" | grep -qF "npm install --install-links $root/$fresh" ||
        failed+=("a plain folder install: $entry does not name --install-links")
done
bare_app="$work/bare-app"
mkdir -p "$bare_app"
echo '{ "name": "bare-app", "private": true, "type": "module" }' >"$bare_app/package.json"
(cd "$bare_app" && npm install "$root/$work/$tarball" --no-audit --no-fund --loglevel=error)
said=$(cd "$bare_app" && imported)
echo "$said"
grep -qxF "approval-resume => ok" <<<"$said" || failed+=("a copy without the frameworks: approval-resume")
for pair in "approval-resume/ai-sdk ai" "approval-resume/openai-agents @openai/agents"; do
    read -r entry peer <<<"$pair"
    grep -qxF "$entry => ERR_MODULE_NOT_FOUND: $entry cannot load $peer: install it in your application (\`npm install $peer\`)." <<<"$said" ||
        failed+=("a copy without the frameworks: $entry does not name $peer")
done

run_one() {
    local framework=$1 version=$2 test=$3
    local app="$work/${framework//\//-}-$version"
    step "$framework $version ($test), beside the packed approval-resume"
    mkdir -p "$app/build-test"
    # zod at the locked release: both frameworks take it as a peer, and the tests' tools use it.
    cat >"$app/package.json" <<JSON
{
  "name": "matrix-app",
  "private": true,
  "type": "module",
  "dependencies": {
    "approval-resume": "file:../$tarball",
    "$framework": "$version",
    "zod": "$(locked zod)"
  }
}
JSON
    (cd "$app" && npm install --no-audit --no-fund --loglevel=error)
    cp -r "$package/build-test/support" "$app/build-test/"
    cp "$package/build-test/$test" "$app/build-test/"
    if (cd "$app" && APPROVAL_RESUME_TS_LOG_DIR="$root/$app/logs" \
        node --test --test-concurrency=1 --test-timeout=60000 --test-reporter=spec "build-test/$test"); then
        echo "$framework $version: passed"
    else
        failed+=("$framework $version")
    fi
}

for framework in ai @openai/agents; do
    case $framework in
        ai) test=ai-sdk.test.js ;;
        @openai/agents) test=openai-agents.test.js ;;
    esac
    declared=$(range "$framework")
    read -r oldest newest < <(ends "$framework" "$declared")
    echo "$framework: declared $declared, locked $(locked "$framework"), oldest $oldest, newest $newest"
    run_one "$framework" "$oldest" "$test"
    if [ "$newest" != "$oldest" ]; then
        run_one "$framework" "$newest" "$test"
    fi
done

step "Took $(($(date +%s) - started)) s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}" >&2
    exit 1
fi
echo "every declared end of every range passed"

#!/usr/bin/env bash
# Runs Apache CouchDB's own HTTP test suite (../shared/couchdb-suite, CouchDB 3.5.0's Elixir integration tests) against
# a fresh `settee serve`, and fails when a test listed in Tests/couchdb-suite-expected.txt does not pass.
#
# The node is set up as CouchDB's `make elixir` sets up its test node: an admin `admin:secret`, the node name
# node1@127.0.0.1 (dev/run's), and the suite's own config file (test/config/test-config.ini) as the node's local.ini.
#
# Usage: scripts/couchdb-suite.sh [test …]     (tests as the suite's run.sh takes them; default: the whole selection)
# Environment: SETTEE_BIN (default: the debug build, built if missing), COUCHDB_SUITE (default: ../shared/couchdb-suite),
#              COUCHDB_SUITE_OUT (where the logs go; default: a new temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
suite="${COUCHDB_SUITE:-}"
if [[ -z "$suite" ]]; then
    for candidate in "$(cd .. && pwd)/shared/couchdb-suite" /work/shared/couchdb-suite; do
        [[ -x "$candidate/run.sh" ]] && { suite="$candidate"; break; }
    done
fi
if [[ -z "$suite" || ! -x "$suite/run.sh" ]]; then
    if [[ -n "${COUCHDB_SUITE:-}" ]]; then
        echo "couchdb-suite.sh: CouchDB's suite is not at $COUCHDB_SUITE" >&2
        exit 2
    fi
    # A machine without the suite beside the checkout: say so loudly rather than fail the whole run.
    echo "couchdb-suite.sh: SKIPPED: CouchDB's suite is not on this machine (looked in ../shared/couchdb-suite and /work/shared/couchdb-suite; set COUCHDB_SUITE)" >&2
    exit 0
fi
"$suite/install.sh"
bin="${SETTEE_BIN:-}"
if [[ -z "$bin" ]]; then
    swift build --product settee
    swift build --product settee-js   # the JavaScript query server, found beside settee
    bin="$(swift build --show-bin-path)/settee"
fi
data="$(mktemp -d "${TMPDIR:-/tmp}/settee-couchdb-suite-data.XXXXXX")"
cp "$suite/suite/test/elixir/test/config/test-config.ini" "$data/local.ini"
port="${COUCHDB_SUITE_PORT:-15996}"
log="$data.server.log"
"$bin" serve --data "$data" --host 127.0.0.1 --port "$port" --admin admin:secret --node-name node1@127.0.0.1 \
    --log-level warning >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/_up" >/dev/null 2>&1 && break
    sleep 0.1
done
export COUCHDB_SUITE_OUT="${COUCHDB_SUITE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/couchdb-suite-out.XXXXXX")}"
export COUCHDB_SUITE_QUIET="${COUCHDB_SUITE_QUIET:-1}"
"$suite/run.sh" "http://127.0.0.1:$port" "$@" || true   # exits 1 while some tests fail; the gate is below
if [[ $# -gt 0 ]]; then
    "$suite/compare.py" "$COUCHDB_SUITE_OUT" --brief
else
    "$suite/compare.py" "$COUCHDB_SUITE_OUT" --expect Tests/couchdb-suite-expected.txt --brief
fi

#!/usr/bin/env bash
# Runs the whole test suite (unit, store, crash-safety, layering and live HTTP tests, and settee-js's protocol tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
# The JavaScript query server, driven over its pipes (every protocol command, the time and memory limits, the sandbox).
scripts/test-settee-js.sh --no-bench --bin "$(swift build --show-bin-path)/settee-js"
swift test --skip-build "$@"

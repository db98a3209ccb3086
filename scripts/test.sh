#!/usr/bin/env bash
# Runs the whole test suite (unit, store, crash-safety, layering and live HTTP tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
swift test --skip-build "$@"

#!/usr/bin/env bash
# Starts a Settee node on an embedded SQLite data directory (./settee-data by default).
# Usage: scripts/run.sh [settee serve options…]   e.g. scripts/run.sh --port 5984 --admin admin:secret
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --server
swift build -c release --product settee
# The JavaScript query server the node runs design functions with (found beside `settee`).
swift build -c release --product settee-js
exec .build/release/settee serve --data "${SETTEE_DATA:-./settee-data}" "$@"

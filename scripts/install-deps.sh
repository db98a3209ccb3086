#!/usr/bin/env bash
# Installs what Settee needs beyond the Swift toolchain: the system SQLite, zlib and SpiderMonkey libraries and headers
# (ICU, for view-key collation, is the one the toolchain's Foundation bundles),
# iproute2 for the network-partition test (as root), openssl for the TLS tests, Chromium and chromedriver for the browser
# tests (Tests/SetteeBrowserTests), and Python's `requests` for the CouchDB conformance check. Safe to run repeatedly.
set -euo pipefail
need_apt=()
[ -f /usr/include/sqlite3.h ] || need_apt+=(libsqlite3-dev)
# zlib: gzip request bodies (Content-Encoding: gzip) and attachments stored compressed.
[ -f /usr/include/zlib.h ] || need_apt+=(zlib1g-dev)
# SpiderMonkey 102: `settee-js`, the JavaScript query server (design-document views, validate_doc_update, filters,
# show/list/update functions), embeds it as CouchDB's couchjs does.
[ -f /usr/include/mozjs-102/jsapi.h ] || need_apt+=(libmozjs-102-dev)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
# openssl: the TLS tests make a throwaway CA and server certificates with it.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# iproute2: the partition test puts a node in its own network namespace (when running as root).
[ "$(id -u)" -eq 0 ] && ! command -v ip >/dev/null 2>&1 && need_apt+=(iproute2)
# chromium + chromium-driver: the browser tests drive headless Chromium over WebDriver (they skip without them).
# `--server` (scripts/run.sh) skips them: running a node needs no browser.
if [ "${1:-}" != "--server" ]; then
    [ -x /usr/bin/chromium ] || need_apt+=(chromium)
    [ -x /usr/bin/chromedriver ] || need_apt+=(chromium-driver)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1; then
        SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
    else
        echo "Please install: ${need_apt[*]}" >&2
        exit 1
    fi
fi
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import requests' 2>/dev/null; then
    python3 -m pip install -q requests || true
fi
command -v swift >/dev/null 2>&1 || { echo "Swift 6 toolchain not found on PATH (https://swift.org/install)" >&2; exit 1; }

#!/usr/bin/env bash
# Pins Settee's public Swift API: dumps the public interface of every module the `Settee` and `SetteeListener`
# products export and compares it with the baseline in api/ (swift-api-digester, the tool behind
# `swift package diagnose-api-breaking-changes`). Any removed or changed public declaration fails the check;
# additions pass.
#
#   scripts/api-check.sh            compare the debug build with api/*.json (builds first if needed)
#   scripts/api-check.sh --update   write the current API to api/ (commit it with the change that meant it)
#
# Why not `swift package diagnose-api-breaking-changes <tag>` itself: it rebuilds the baseline revision in a
# worktree and the whole package again with its own flags (~5 minutes here, twice the cost in CI), while the
# baseline it would compute is exactly what api/ holds.
#
# Then the surface: every public type must be listed in docs/api.md, as Couchbase Lite's API or as one of Settee's
# extensions (scripts/api-surface.py). This reuses the debug build `scripts/test.sh` made, with
# the compiler flags SwiftPM used for it (read from .build/debug.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."

update=0
[[ "${1:-}" == "--update" ]] && update=1

modules=(SetteeCore SetteeStore SetteeSQLPP SetteeVector SetteeIndex SetteeQuery SetteeReplication Settee SetteeListener)
# The debug build (a no-op after scripts/test.sh); its output only when it fails.
build_log="$(swift build --product SetteeListener 2>&1)" || { echo "$build_log" >&2; exit 1; }
digester="$(dirname "$(readlink -f "$(command -v swift)")")/swift-api-digester"
[[ -x "$digester" ]] || { echo "api-check: swift-api-digester not found beside swift" >&2; exit 1; }

# The search paths and Clang module maps SwiftPM compiled SetteeListener with (it imports every exported module).
mapfile -t flags < <(python3 - <<'EOF'
import json, re
plan = open('.build/debug.yaml').read()
block = plan.split('"C.SetteeListener-')[1]
args = json.loads(re.search(r'\n    args: (\[.*?\])\n', block).group(1))
out, i = [], 0
while i < len(args):
    a = args[i]
    if a in ('-I', '-Xcc', '-target') and i + 1 < len(args):
        out += [a, args[i + 1]]; i += 2; continue
    i += 1
print('\n'.join(out))
EOF
)

mkdir -p api
work="$(mktemp -d "${TMPDIR:-/tmp}/settee-api.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The digester also dumps `package` declarations (marked isInternal): they are not API, so both sides drop them.
public_only() {
    python3 - "$1" <<'EOF'
import json, sys
path = sys.argv[1]
def prune(node):
    node['children'] = [prune(c) for c in node.get('children', []) if not c.get('isInternal')]
    if not node['children']: del node['children']
    return node
root = json.load(open(path))
prune(root['ABIRoot'])
json.dump(root, open(path, 'w'), indent=1, sort_keys=True)
EOF
}
status=0
for m in "${modules[@]}"; do
    out="$work/$m.json"
    [[ $update -eq 1 ]] && out="api/$m.json"
    "$digester" -dump-sdk -module "$m" -o "$out" -avoid-location -avoid-tool-args -abort-on-module-fail \
        -module-cache-path "$work/cache" "${flags[@]}"
    public_only "$out"
    if [[ $update -eq 1 ]]; then
        echo "api-check: wrote api/$m.json"
        continue
    fi
    if [[ ! -f "api/$m.json" ]]; then
        echo "api-check: no baseline api/$m.json (run scripts/api-check.sh --update)" >&2
        status=1
        continue
    fi
    if "$digester" -diagnose-sdk -input-paths "api/$m.json" -input-paths "$out" -o "$work/$m.txt" 2>"$work/$m.err" \
        && ! grep -qvE '^(/\*.*\*/)?$' "$work/$m.txt"; then
        echo "api-check: $m: no breaking change"
    else
        echo "api-check: $m: the public API changed in a breaking way:" >&2
        grep -vE '^(/\*.*\*/)?$' "$work/$m.txt" >&2 || true
        cat "$work/$m.err" >&2
        status=1
    fi
done
# Every public type is Couchbase Lite's API or one of Settee's extensions, as docs/api.md lists them.
surface="$work"
[[ $update -eq 1 ]] && surface=api
python3 scripts/api-surface.py "$surface" docs/api.md || status=1
if [[ $status -ne 0 ]]; then
    echo "api-check: FAILED. If the change is meant (a new major version, or API not yet released), run" >&2
    echo "  scripts/api-check.sh --update  and commit api/ with it, saying why in the commit message." >&2
fi
exit $status

#!/usr/bin/env python3
"""The public surface against docs/api.md: every public type (and type alias) the library's modules declare must
be named there, either as Couchbase Lite's API or as one of Settee's extensions, and every name there must be
public. Reads the digester dumps scripts/api-check.sh makes (one JSON per module).

    scripts/api-surface.py DIR_WITH_DUMPS [docs/api.md]
"""
import glob, json, os, re, sys

dumps = sys.argv[1]
doc = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), '..', 'docs', 'api.md')

public = {}
for path in sorted(glob.glob(os.path.join(dumps, '*.json'))):
    module = os.path.basename(path)[:-5]
    root = json.load(open(path))['ABIRoot']
    for node in root.get('children', []):
        if node.get('isInternal') or node.get('isExternal') or node.get('moduleName', module) != module:
            continue  # package declarations, and extensions of other modules' types
        if node.get('kind') in ('TypeDecl', 'TypeAlias'):
            public.setdefault(node['name'], module)

# docs/api.md: the names in backticks in the list items of its two sections (an item may run over several lines;
# what is in parentheses is commentary, not a name).
sections = {}
current = None
items = []
for line in open(doc, encoding='utf-8'):
    heading = re.match(r'^## (.*)', line)
    if heading:
        title = heading.group(1).lower()
        current = 'cbl' if "couchbase lite" in title else 'settee' if 'extension' in title else None
        continue
    if current is None:
        continue
    if re.match(r'^[-*] ', line):
        items.append([current, line])
    elif line.startswith('  ') and items and items[-1][0] == current and line.strip():
        items[-1][1] += line
    elif not line.strip():
        continue
for kind, text in items:
    text = re.sub(r'\([^()]*\)', '', text.replace('\n', ' '))
    for name in re.findall(r'`([A-Za-z_][A-Za-z0-9_]*)`', text):
        sections.setdefault(name, kind)

undocumented = sorted(n for n in public if n not in sections)
stale = sorted(n for n in sections if n not in public)
counts = {kind: sum(1 for n in public if sections.get(n) == kind) for kind in ('cbl', 'settee')}
print(f"api-surface: {len(public)} public types: {counts['cbl']} of Couchbase Lite's API, "
      f"{counts['settee']} Settee extensions (docs/api.md)")
status = 0
if undocumented:
    status = 1
    print("api-surface: public but not in docs/api.md (make them `package`, or document them there):", file=sys.stderr)
    for n in undocumented:
        print(f"  {public[n]}.{n}", file=sys.stderr)
if stale:
    status = 1
    print("api-surface: in docs/api.md but not public:", file=sys.stderr)
    for n in stale:
        print(f"  {n}", file=sys.stderr)
sys.exit(status)

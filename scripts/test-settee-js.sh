#!/usr/bin/env bash
# Builds settee-js (the SpiderMonkey query server, Sources/settee-js) with one compiler command into a temporary
# directory and drives it over pipes with CouchDB query-server protocol exchanges: every command (reset, add_lib,
# add_fun, map_doc, reduce, rereduce, ddoc new/shows/lists/updates/filters/views/validate_doc_update/rewrites),
# CommonJS require, error answers, the time and memory limits, and the sandbox. Then measures start-up time, idle
# memory and map throughput.
#
#   scripts/test-settee-js.sh [--no-bench] [--bench-only] [--bin PATH]
#
#   --bin PATH   test an existing binary instead of building one
#   CXX=…        the compiler (default: clang++, else g++)
#
# Needs libmozjs-102-dev (pkg-config mozjs-102) and python3. Exits non-zero when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."

bench=1
tests=1
bin=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --no-bench) bench=0 ;;
        --bench-only) tests=0 ;;
        --bin) bin="$2"; shift ;;
        *) echo "usage: $0 [--no-bench] [--bench-only] [--bin PATH]" >&2; exit 2 ;;
    esac
    shift
done

if [[ -z "$bin" ]]; then
    cxx="${CXX:-}"
    if [[ -z "$cxx" ]]; then
        for c in clang++ g++; do
            if command -v "$c" >/dev/null; then cxx="$c"; break; fi
        done
    fi
    [[ -n "$cxx" ]] || { echo "no C++ compiler (set CXX)" >&2; exit 1; }
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    bin="$work/settee-js"
    echo "building settee-js with $cxx"
    start=$(date +%s)
    # shellcheck disable=SC2046
    "$cxx" -std=c++17 -O2 -Wall Sources/settee-js/main.cpp $(pkg-config --cflags --libs mozjs-102) -lpthread -o "$bin"
    echo "built in $(( $(date +%s) - start )) s"
fi

SETTEE_JS="$bin" TESTS="$tests" BENCH="$bench" exec python3 - <<'PY'
import json, os, select, statistics, subprocess, sys, threading, time

BIN = os.environ["SETTEE_JS"]
failures = []
checks = 0


class QS:
    """One settee-js process, driven line by line with a deadline on every read."""

    def __init__(self, *args):
        self.p = subprocess.Popen([BIN, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.buf = b""
        self.logs = []

    def send(self, cmd):
        line = cmd if isinstance(cmd, (bytes, str)) else json.dumps(cmd, separators=(",", ":"))
        if isinstance(line, str):
            line = line.encode()
        self.p.stdin.write(line + b"\n")

    def line(self, timeout=15):
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no answer within %ss" % timeout)
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise EOFError("the process exited (status %s)" % self.p.wait())
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def recv(self, timeout=15):
        """The next answer; ["log", …] lines before it go to self.logs."""
        while True:
            v = self.line(timeout)
            if isinstance(v, list) and len(v) == 2 and v[0] == "log":
                self.logs.append(v[1])
                continue
            return v

    def call(self, cmd, timeout=15):
        self.logs = []
        self.send(cmd)
        return self.recv(timeout)

    def rss_kb(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            return int(f.read().split("VmRSS:")[1].split()[0])

    def close(self):
        try:
            self.p.stdin.close()
        except Exception:
            pass
        try:
            return self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return None


def check(name, cond, detail=""):
    global checks
    checks += 1
    if not cond:
        failures.append(name)
        print("FAIL %s %s" % (name, detail))


def eq(name, got, want):
    check(name, got == want, "\n  got:  %r\n  want: %r" % (got, want))


def is_error(v, name=None):
    return isinstance(v, list) and len(v) == 3 and v[0] == "error" and (name is None or v[1] == name)


def views(funs, lib=None, config=None, args=()):
    q = QS(*args)
    assert q.call(["reset", config or {}]) is True
    if lib is not None:
        assert q.call(["add_lib", lib]) is True
    for f in funs:
        r = q.call(["add_fun", f])
        if r is not True:
            raise AssertionError("add_fun %r answered %r" % (f, r))
    return q


def ddoc(doc, args=()):
    q = QS(*args)
    eq("ddoc new", q.call(["ddoc", "new", doc["_id"], doc]), True)
    return q


REQ = {"method": "GET", "path": ["db", "_design", "t", "_show", "x"], "query": {}, "headers": {"Accept": "*/*"},
       "info": {"db_name": "db"}, "userCtx": {"name": None, "roles": []}, "secObj": {}}


def req(**kw):
    r = dict(REQ)
    r.update(kw)
    return r


# MARK: - Views

def test_views():
    q = views(["function(doc) { emit(doc._id, null); }",
               "function(doc) { if (doc.tags instanceof Array) emit(doc.tags.length, doc.tags); }",
               "function(doc) { emit([doc._id, doc.undef], doc.undef); emit(doc.undef, 1); }"])
    eq("map_doc one array per function", q.call(["map_doc", {"_id": "a", "tags": ["x", "y"]}]),
       [[["a", None]], [[2, ["x", "y"]]], [[["a", None], None], [None, 1]]])
    eq("map_doc no emits", q.call(["map_doc", {"_id": "b"}]), [[["b", None]], [], [[["b", None], None], [None, 1]]])
    eq("map_doc unicode", q.call(["map_doc", {"_id": "\u00e9\u4e2d\U0001F600"}])[0], [["\u00e9\u4e2d\U0001F600", None]])
    big = "x" * (5 << 20)
    eq("map_doc 5 MB document", q.call(["map_doc", {"_id": "big", "s": big}])[0], [["big", None]])
    q.close()

    # A function that throws: [] for it and a log line before the answer; the other functions are unaffected.
    q = views(["function(doc) { doc.undef(); }", "function(doc) { emit(doc._id, 1); }"])
    eq("throwing map function", q.call(["map_doc", {"_id": "c"}]), [[], [["c", 1]]])
    check("throwing map function logs", len(q.logs) == 1 and "doc._id c" in q.logs[0] and "TypeError" in q.logs[0], q.logs)
    q.close()

    # COUCHDB-925 and view_sandboxing: a map function changing its doc changes neither other functions' docs nor
    # the next document's.
    q = views(["function(doc) { if (doc.values) doc.values = [666]; if (doc.tags) doc.tags.push('qwerty');"
               " if (doc.tokens) doc.tokens['c'] = 3; doc.integer = 2; emit('m', doc.integer); }",
               "function(doc) { emit(doc._id, [doc.values, doc.tags, doc.tokens, doc.integer]); }"])
    eq("mutation stays in its function", q.call(["map_doc", {"_id": "d2", "tags": ["foo", "bar"], "tokens": {"a": 1},
                                                             "values": [1, 2, 3], "integer": 1}]),
       [[["m", 2]], [["d2", [[1, 2, 3], ["foo", "bar"], {"a": 1}, 1]]]])
    q.close()

    # Compilation: the forms design documents use.
    forms = {
        "anonymous": "function(doc) { emit('f', 1); }",
        "named": "function mapper(doc) { emit('f', 1); }",
        "comments": "// a view\n/* more */ function(doc) { emit('f', 1); } // the end",
        "trailing semicolon": "function (doc) {emit('f', 1);};",
        "arrow": "(doc) => { emit('f', 1); }",
        "parenthesized": "(function(doc) { emit('f', 1); })",
        "helper before": "var two = function () { return 1; };\nfunction(doc) { emit('f', two()); }",
        "helper declaration before": "function one() { return 1; }\nfunction(doc) { emit('f', one()); }",
        "nested functions": "function(doc) { [1].forEach(function (x) { emit('f', x); }); }",
        "leading whitespace": "\n\n   function(doc) {\n emit('f', 1);\n }\n\n",
    }
    for label, src in forms.items():
        q = QS()
        q.call(["reset", {}])
        r = q.call(["add_fun", src])
        eq("compiles: " + label, r, True)
        if r is True:
            eq("runs: " + label, q.call(["map_doc", {"_id": "x"}]), [[["f", 1]]])
        q.close()
    q = QS()
    q.call(["reset", {}])
    r = q.call(["add_fun", "function(doc) { emit(doc._id, 1) "])
    check("syntax error is compilation_error", is_error(r, "compilation_error") and "SyntaxError" in r[2], r)
    r = q.call(["add_fun", "1 + 1"])
    check("non-function is compilation_error", is_error(r, "compilation_error") and "does not eval to a function" in r[2], r)
    r = q.call(["add_fun", "throw new Error('at load')"])
    check("throw at load is compilation_error", is_error(r, "compilation_error"), r)
    eq("process usable after compilation errors", q.call(["map_doc", {"_id": "x"}]), [])
    q.close()

    # add_lib and require in map functions.
    q = views(["function(doc) { emit(null, require('views/lib/foo/boom').boom); }",
               "function(doc) { emit(null, require('views/lib/baz').baz); }"],
              lib={"baz": "exports.baz = 'bam';", "foo": {"boom": "exports.boom = 'ok';"}})
    eq("require views/lib", q.call(["map_doc", {"_id": "x"}]), [[[None, "ok"]], [[None, "bam"]]])
    q.close()

    # Values that are errors, async functions, promises.
    q = views(["function(doc) { emit('err', new TypeError('boom')); }",
               "async function(doc) { await null; emit('async', doc._id); }",
               "function(doc) { Promise.resolve(doc._id).then(function (id) { emit('then', id); }); }"])
    eq("error values, async, promises", q.call(["map_doc", {"_id": "p"}]),
       [[["err", {"error": "TypeError", "message": "boom"}]], [["async", "p"]], [["then", "p"]]])
    q.close()

    q = views(["function(doc) { throw 'fatal_error'; }"])
    check("fatal_error is map_runtime_error", is_error(q.call(["map_doc", {"_id": "x"}]), "map_runtime_error"))
    q.close()


def test_reduce():
    q = QS()
    eq("reset with config", q.call(["reset", {"reduce_limit": True, "timeout": 5000}]), True)
    kvs = [[[1, "a"], 10], [[2, "b"], 20], [[3, "c"], 30]]
    eq("reduce sum", q.call(["reduce", ["function(k, v) { return sum(v); }"], kvs]), [True, [60]])
    eq("reduce several", q.call(["reduce", ["function(k, v) { return sum(v); }",
                                            "function(keys, values, rereduce) { return [keys, rereduce, values.length]; }"], kvs]),
       [True, [60, [[[1, "a"], [2, "b"], [3, "c"]], False, 3]]])
    eq("reduce instanceof", q.call(["reduce", ["function(k, v) { return (k instanceof Array) && (v instanceof Array); }"], kvs]),
       [True, [True]])
    eq("rereduce", q.call(["rereduce", ["function(k, v, re) { return [k, re, sum(v)]; }"], [60, 40]]), [True, [[None, True, 100]]])
    r = q.call(["reduce", ["function(k, v) { null.x; }", "function(k, v) { return 1; }"], kvs])
    eq("reduce error gives null and logs", r, [True, [None, 1]])
    check("reduce error logged", len(q.logs) == 1 and "TypeError" in q.logs[0], q.logs)
    big = "function (keys, values) { var chars = []; for (var i=0; i < 1000; i++) {chars.push('wazzap');};return chars; };"
    r = q.call(["reduce", [big], [[[1, "a"], 1]]])
    check("reduce_overflow_error", is_error(r, "reduce_overflow_error"), r)
    eq("reduce_limit off", q.call(["reset", {"reduce_limit": False}]), True)
    r = q.call(["reduce", [big], [[[1, "a"], 1]]])
    check("no overflow error without reduce_limit", r[0] is True and len(r[1][0]) == 1000, str(r)[:100])
    q.call(["reset", {"reduce_limit": "log"}])
    r = q.call(["reduce", [big], [[[1, "a"], 1]]])
    check("reduce_limit log", r[0] is True and any("reduce_overflow_error" in l for l in q.logs), q.logs)
    r = q.call(["reduce", ["function(k, v) { return sum(v) "], kvs])
    check("reduce compilation_error", is_error(r, "compilation_error"), r)
    q.close()


# MARK: - Design documents

DDOC = {
    "_id": "_design/t",
    "language": "javascript",
    "whatever": {
        "stringzone": "exports.string = 'plankton';",
        "commonjs": {
            "whynot": "exports.test = require('../stringzone');\nexports.foo = require('whatever/stringzone');",
            "upper": "exports.testing = require('./whynot').test.string.toUpperCase()+\nmodule.id+require('./whynot').foo.string",
            "circular_one": "require('./circular_two'); exports.name = 'One';",
            "circular_two": "require('./circular_one'); exports.name = 'Two';",
        },
        "idtest1": {"a": {"b": {"d": "module.exports = require('../c/e').id;"}, "c": {"e": "exports.id = module.id;"}}},
        "idtest2": {"a": {"b": {"d": "module.exports = require('../../a/c/e').id;"}, "c": {"e": "exports.id = module.id;"}}},
        "idtest3": {"a": {"b": "module.exports = require('./c/d').id;",
                          "c": {"d": "module.exports = require('./e');", "e": "exports.id = module.id;"}}},
        "idtest4": {"a": {"b": "module.exports = require('../a/./c/d').id;",
                          "c": {"d": "module.exports = require('./e');", "e": "exports.id = module.id;"}}},
        "idtest5": {"a": "module.exports = require('whatever/idtest5/b').id;", "b": "exports.id = module.id;"},
        "broken": "exports.x = ;",
    },
    "shows": {
        "hello": "function(doc, req) { if (doc) { return 'Hello World'; } else { if (req.id) { return 'New World'; } else { return 'Empty World'; } } }",
        "just-name": "function(doc, req) { if (doc) { return { body : 'Just ' + doc.name }; } else { return { body : 'No such doc', code : 404 }; } }",
        "json": "function(doc, req) { return { json : doc } }",
        "render-error": "function(doc, req) { return noSuchVariable; }",
        "fail": "function(doc, req) { return doc._id; }",
        "number": "function(doc, req) { return 5; }",
        "list-api": "function(doc, req) { start({'X-Couch-Test-Header': 'Yeah'}); send('Hey'); }",
        "list-api-provides-and-return": "function(doc, req) { provides('text', function(){ send('4, '); send('5, '); send('6, '); return '7!'; }); send('1, '); send('2, '); return '3, '; }",
        "list-api-mix-with-header": "function(doc, req) { start({'X-Couch-Test-Header': 'Yeah'}); send('Hey '); return { headers: { 'X-Couch-Test-Header-Awesome': 'Oh Yeah!' }, body: 'Dude' }; }",
        "provides": "function(doc, req) { registerType('foo', 'application/foo','application/x-foo'); provides('html', function() { return 'Ha ha, you said \"' + doc.word + '\".'; }); provides('foo', function() { return 'foofoo'; }); }",
        "requirey": "function() { var lib = require('whatever/commonjs/upper'); return lib.testing; }",
        "circular": "function() { var lib = require('whatever/commonjs/upper'); return JSON.stringify(this); }",
        "circular_require": "function() { return require('whatever/commonjs/circular_one').name; }",
        "idtest1": "function() { return require('whatever/idtest1/a/b/d'); }",
        "idtest2": "function() { return require('whatever/idtest2/a/b/d'); }",
        "idtest3": "function() { return require('whatever/idtest3/a/b'); }",
        "idtest4": "function() { return require('whatever/idtest4/a/b'); }",
        "idtest5": "function() { return require('whatever/idtest5/a'); }",
        "badpath": "function() { return require('whatever/nothere'); }",
        "badmodule": "function() { return require('whatever/broken'); }",
        "forbidden": "function() { throw({forbidden: 'no way'}); }",
        "errorreason": "function() { throw({error: 'teapot', reason: 'short and stout'}); }",
        "errorarray": "function() { throw(['error', 'custom', 'from an array']); }",
        "getrow": "function() { return 'row: ' + JSON.stringify(getRow()); }",
        "newline": "function() { log('a\\nb'); return 'line1\\nline2\\u2028'; }",
        "hostproto": "function() { try { provides(Object.create(null), function () {}); return 'no error'; } catch (e) {"
                     " var p = Object.getPrototypeOf(e); p.polluted = 1; return [Object.isFrozen(p), e instanceof TypeError, p.polluted].join(' '); } }",
    },
    "lists": {
        "basicBasic": "function(head, req) { send('head'); var row; while(row = getRow()) { send(row.key); }; return 'tail'; }",
        "basicJSON": "function(head, req) { start({'headers':{'Content-Type' : 'application/json'}}); send('{\"head\":'+toJSON(head)+', '); send('\"rows\":['); var row, sep = ''; while (row = getRow()) { send(sep + toJSON(row)); sep = ', '; } return ']}'; }",
        "acceptSwitch": "function(head, req) { provides('html', function() { send('HTML <ul>'); var row, num = 0; while (row = getRow()) { num ++; send('<li>Key: ' + row.key); } return '</ul>'; }); }",
        "stopIter": "function(req) { send('head'); var row, row_number = 0; while(row = getRow()) { if(row_number > 2) break; send(' ' + row_number); row_number += 1; }; return ' tail'; }",
        "tooManyGetRows": "function() { send('head'); var row; while(row = getRow()) { send(row.key); }; getRow(); getRow(); row = getRow(); return 'after row: '+toJSON(row); }",
        "emptyList": "function() { return ' '; }",
        "rowError": "function(head, req) { send('head'); var row = getRow(); send(fooBarBam); return 'tail'; }",
        "setHeaderAfterGotRow": "function(head, req) { getRow(); start({ code: 400, headers: { 'X-My-Header': 'MyHeader' } }); send('bad request'); }",
    },
    "updates": {
        "hello": "function(doc, req) { if (!doc) { if (req.id) { return [{ _id : req.id, reqs : [req.method] }, '<p>New World</p>']; }; return [null, '<p>Empty World</p>']; }; doc.world = 'hello'; return [doc, '<p>hello doc</p>']; }",
        "error": "function(doc, req) { superFail.badCrash; }",
        "resp-code-and-json": "function(doc,req) { resp = {'code': 302, 'json': {'ok': true}}; return [{'_id': req['uuid']}, resp]; }",
        "nothing": "function(doc, req) { return [doc]; }",
    },
    "filters": {
        "bop": "function(doc, req) { return (doc.bop); }",
        "query": "function(doc, req) { return doc.kind === req.query.kind; }",
        "throws": "function(doc, req) { return doc.a.b; }",
    },
    "views": {
        "v": {"map": "function(doc) { if (doc.bop) { emit(doc._id, null); } };"},
    },
    "validate_doc_update": "function(newDoc, oldDoc, userCtx, secObj) { if (newDoc.kind === 'forbid') throw({forbidden: 'Documents must have an author field'});"
                           " if (newDoc.kind === 'unauth') throw({unauthorized: 'You are not the author'});"
                           " if (newDoc.kind === 'type') null.x; if (newDoc.kind === 'string') throw 'a string';"
                           " if (newDoc.kind === 'ctx' && userCtx.name !== 'bob') throw({forbidden: 'only bob ' + secObj.admins.names[0]}); }",
    "rewrites": "function(req) { var prefix = req.path[4]; if (prefix === 'foo') return 'foo.txt';"
                " if (prefix === 'foo2') return {path: 'foo.txt', method: 'GET'};"
                " if (prefix === 'welcome') return {path: '_show/welcome', query: {'name': req.path[5]}};"
                " if (prefix === 'code') return {code: 451, body: JSON.stringify({status: 451}), headers: {'x-foo': 'bar'}};"
                " if (prefix === 'throw') throw new Error('rewrite broke'); return; }",
}


def show(q, name, doc=None, r=None):
    return q.call(["ddoc", "_design/t", ["shows", name], [doc, r or req()]])


def test_shows():
    q = ddoc(DDOC)
    doc = {"_id": "test-doc-id", "word": "plankton", "name": "Rusty"}
    eq("show with doc", show(q, "hello", doc), ["resp", {"body": "Hello World"}])
    eq("show without doc", show(q, "hello"), ["resp", {"body": "Empty World"}])
    eq("show new doc id", show(q, "hello", None, req(id="nope")), ["resp", {"body": "New World"}])
    eq("show object response", show(q, "just-name", doc), ["resp", {"body": "Just Rusty"}])
    eq("show code", show(q, "just-name"), ["resp", {"body": "No such doc", "code": 404}])
    eq("show json", show(q, "json", doc), ["resp", {"json": doc}])
    r = show(q, "render-error", doc)
    check("show render_error", is_error(r, "render_error") and "ReferenceError" in r[2] and "settee:" not in r[2], r)
    eq("show on a missing doc that fails is not_found",
       show(q, "fail", None, req(path=["db", "_design", "t", "_show", "fail", "nonExistingDoc"])),
       ["error", "not_found", "document not found"])
    check("show returning a number", is_error(show(q, "number", doc), "render_error"))
    eq("list() API in a show", show(q, "list-api"), ["resp", {"headers": {"X-Couch-Test-Header": "Yeah"}, "body": "Hey"}])
    eq("chunks, return value, provided chunks, provided return value",
       show(q, "list-api-provides-and-return", None, req(query={"format": "text"})),
       ["resp", {"body": "1, 2, 3, 4, 5, 6, 7!", "headers": {"Content-Type": "text/plain; charset=utf-8"}}])
    eq("list() API mixed with headers", show(q, "list-api-mix-with-header"),
       ["resp", {"headers": {"X-Couch-Test-Header-Awesome": "Oh Yeah!", "X-Couch-Test-Header": "Yeah"}, "body": "Hey Dude"}])
    eq("provides: Accept picks html", show(q, "provides", doc, req(headers={"Accept": "text/html,application/atom+xml; q=0.9"})),
       ["resp", {"body": "Ha ha, you said \"plankton\".", "headers": {"Content-Type": "text/html; charset=utf-8"}}])
    eq("registerType", show(q, "provides", doc, req(headers={"Accept": "application/x-foo"})),
       ["resp", {"body": "foofoo", "headers": {"Content-Type": "application/x-foo"}}])
    eq("provides without Accept takes the first", show(q, "provides", doc, req(headers={})),
       ["resp", {"body": "Ha ha, you said \"plankton\".", "headers": {"Content-Type": "text/html; charset=utf-8"}}])
    r = show(q, "provides", doc, req(headers={"Accept": "text/monkeys"}))
    check("provides: not_acceptable", is_error(r, "not_acceptable") and "text/monkeys" in r[2], r)
    eq("missing show", show(q, "nope"), ["error", "not_found", "missing shows function nope on design doc _design/t"])
    for name, want in [("requirey", "PLANKTONwhatever/commonjs/upperplankton"), ("circular_require", "One"),
                       ("idtest1", "whatever/idtest1/a/c/e"), ("idtest2", "whatever/idtest2/a/c/e"),
                       ("idtest3", "whatever/idtest3/a/c/e"), ("idtest4", "whatever/idtest4/a/c/e"),
                       ("idtest5", "whatever/idtest5/b")]:
        eq("require " + name, show(q, name), ["resp", {"body": want}])
    r = show(q, "circular")
    check("this is the design document", r[0] == "resp" and json.loads(r[1]["body"])["language"] == "javascript", r)
    check("require of a missing path", is_error(show(q, "badpath"), "invalid_require_path"))
    check("require of a broken module", is_error(show(q, "badmodule"), "compilation_error"))
    eq("throw forbidden from a show", show(q, "forbidden"), ["error", "forbidden", "no way"])
    eq("throw {error, reason}", show(q, "errorreason"), ["error", "teapot", "short and stout"])
    eq("throw ['error', …]", show(q, "errorarray"), ["error", "custom", "from an array"])
    eq("getRow outside a list is null", show(q, "getrow"), ["resp", {"body": "row: null"}])
    eq("newlines stay inside one line", show(q, "newline"), ["resp", {"body": "line1\nline2\u2028"}])
    eq("newline in a log", q.logs, ["a\nb"])
    eq("host objects reaching a sandbox are frozen", show(q, "hostproto"), ["resp", {"body": "true false "}])
    eq("still answering", show(q, "hello", doc), ["resp", {"body": "Hello World"}])
    # A new revision of the design document replaces the old one.
    changed = dict(DDOC, shows={"hello": "function() { return 'v2'; }"})
    eq("ddoc new again", q.call(["ddoc", "new", "_design/t", changed]), True)
    eq("new revision used", show(q, "hello"), ["resp", {"body": "v2"}])
    q.close()


def list_exchange(q, name, rows, r=None, head=None, reduce_rows=False):
    """Runs a list: sends the command, then a row per getRow(); returns the messages received."""
    msgs = []
    q.send(["ddoc", "_design/t", ["lists", name], [head or {"total_rows": len(rows), "offset": 0}, r or req()]])
    rows = list(rows)
    while True:
        m = q.recv()
        msgs.append(m)
        if m[0] in ("start", "chunks"):
            if rows:
                q.send(["list_row", rows.pop(0)])
            else:
                q.send(["list_end"])
        else:
            return msgs


def body(msgs):
    return "".join("".join(m[1]) for m in msgs if m[0] in ("start", "chunks", "end"))


def test_lists():
    q = ddoc(DDOC)
    rows = [{"id": str(i), "key": i, "value": str(i)} for i in range(10)]
    msgs = list_exchange(q, "basicBasic", rows)
    eq("list messages", [m[0] for m in msgs], ["start"] + ["chunks"] * 10 + ["end"])
    eq("list start", msgs[0], ["start", ["head"], {"headers": {}}])
    eq("list body", body(msgs), "head0123456789tail")
    msgs = list_exchange(q, "basicJSON", rows[:2])
    eq("list start headers", msgs[0][2], {"headers": {"Content-Type": "application/json"}})
    eq("list JSON", json.loads(body(msgs)), {"head": {"total_rows": 2, "offset": 0}, "rows": rows[:2]})
    msgs = list_exchange(q, "acceptSwitch", rows[:2], req(headers={"Accept": "text/html"}))
    eq("list provides content type", msgs[0][2], {"headers": {"Content-Type": "text/html; charset=utf-8"}})
    eq("list provides body", body(msgs), "HTML <ul><li>Key: 0<li>Key: 1</ul>")
    msgs = list_exchange(q, "stopIter", rows)
    eq("stop iteration", body(msgs), "head 0 1 2 tail")
    msgs = list_exchange(q, "tooManyGetRows", rows)
    eq("too many getRow", body(msgs), "head0123456789after row: null")
    msgs = list_exchange(q, "emptyList", rows)
    eq("empty list", (msgs[-1], body(msgs)), (["end", [" "]], " "))
    msgs = list_exchange(q, "rowError", rows)
    check("list row error", is_error(msgs[-1], "render_error") and "ReferenceError" in msgs[-1][2], msgs[-1])
    msgs = list_exchange(q, "setHeaderAfterGotRow", rows[:1])
    eq("header after getRow", msgs[-1], ["end", ["bad request"], {"code": 400, "headers": {"X-My-Header": "MyHeader"}}])
    eq("usable after lists", show(q, "hello"), ["resp", {"body": "Empty World"}])
    q.close()


def test_updates_filters_validate_rewrites():
    q = ddoc(DDOC)
    up = lambda name, doc, r: q.call(["ddoc", "_design/t", ["updates", name], [doc, r]])
    eq("update creates", up("hello", None, req(method="PUT", id="newid")),
       ["up", {"_id": "newid", "reqs": ["PUT"]}, {"body": "<p>New World</p>"}])
    eq("update edits", up("hello", {"_id": "x", "_rev": "1-a"}, req(method="POST")),
       ["up", {"_id": "x", "_rev": "1-a", "world": "hello"}, {"body": "<p>hello doc</p>"}])
    eq("update GET refused", up("hello", None, req(method="GET")),
       ["error", "method_not_allowed", "Update functions do not allow GET"])
    r = up("error", {"_id": "x"}, req(method="POST"))
    check("update render_error", is_error(r, "render_error") and "superFail" in r[2], r)
    eq("update code and json", up("resp-code-and-json", None, req(method="POST", uuid="u1")),
       ["up", {"_id": "u1"}, {"code": 302, "json": {"ok": True}}])
    check("update without a response", is_error(up("nothing", {"_id": "x"}, req(method="POST")), "render_error"))

    flt = lambda name, docs, r: q.call(["ddoc", "_design/t", ["filters", name], [docs, r]])
    eq("filter", flt("bop", [{"_id": "a", "bop": "foom"}, {"_id": "b"}, {"_id": "c", "bop": 0}], req()),
       [True, [True, False, False]])
    eq("filter with query", flt("query", [{"kind": "x"}, {"kind": "y"}], req(query={"kind": "y"})), [True, [False, True]])
    check("filter that throws", is_error(flt("throws", [{"_id": "a"}], req()), "TypeError"))
    eq("view as filter", q.call(["ddoc", "_design/t", ["views", "v", "map"], [[{"_id": "a", "bop": 1}, {"_id": "b"}]]]),
       [True, [True, False]])

    vdu = lambda doc, user=None: q.call(["ddoc", "_design/t", ["validate_doc_update"],
                                         [doc, None, user or {"name": "ann", "roles": []}, {"admins": {"names": ["root"]}}]])
    eq("validate accepts", vdu({"_id": "ok"}), 1)
    eq("validate forbidden", vdu({"kind": "forbid"}), {"forbidden": "Documents must have an author field"})
    eq("validate unauthorized", vdu({"kind": "unauth"}), {"unauthorized": "You are not the author"})
    eq("validate userCtx and secObj", vdu({"kind": "ctx"}), {"forbidden": "only bob root"})
    eq("validate userCtx accepted", vdu({"kind": "ctx"}, {"name": "bob", "roles": []}), 1)
    check("validate TypeError", is_error(vdu({"kind": "type"}), "TypeError"))
    eq("validate throws a string (CouchDB: unknown_error)", vdu({"kind": "string"}), "a string")
    # Repeated calls to one function skip parsing the command head; a new revision of the design document, another
    # function in between, or arguments that are not JSON must still be handled as the first call is.
    eq("validate again (same function, repeated)", vdu({"kind": "forbid"}), {"forbidden": "Documents must have an author field"})
    q.call(["ddoc", "new", "_design/t", dict(DDOC, validate_doc_update="function(n) { throw({forbidden: 'v2 ' + n.kind}); }")])
    eq("validate after a new revision of the design document", vdu({"kind": "x"}), {"forbidden": "v2 x"})
    q.call(["ddoc", "new", "_design/t", DDOC])
    eq("validate after going back", vdu({"_id": "ok"}), 1)
    q.p.stdin.write(b'["ddoc","_design/t",["validate_doc_update"],[{"_id":"ok"},null,{"name":"ann","roles":[]},{} oops]\n')
    q.p.stdin.flush()
    check("validate with arguments that are not JSON", is_error(q.line(), "query_protocol_error"))
    eq("validate after a malformed command", vdu({"kind": "unauth"}), {"unauthorized": "You are not the author"})

    # validate_batch (Settee's own command): one line, many writes; each answer is the per-write command's answer.
    ann, sec = {"name": "ann", "roles": []}, {"admins": {"names": ["root"]}}
    kinds = [{"_id": "ok"}, {"kind": "forbid"}, {"kind": "unauth"}, {"kind": "ctx"}, {"kind": "type"}, {"kind": "string"}]
    flat = []
    for d in kinds:
        flat += [d, None]
    r = q.call(["validate_batch", "_design/t", [ann, sec, flat]])
    eq("validate_batch answers as the per-write commands",
       r, [True, [vdu(d) for d in kinds]])
    eq("validate_batch of nothing", q.call(["validate_batch", "_design/t", [ann, sec, []]]), [True, []])
    check("validate_batch with an odd list", is_error(q.call(["validate_batch", "_design/t", [ann, sec, [{}]]]),
                                                      "query_protocol_error"))
    q.p.stdin.write(b'["validate_batch","_design/t",[{},{},[{"_id":"a"},null] oops]]\n')
    q.p.stdin.flush()
    check("validate_batch with arguments that are not JSON", is_error(q.line(), "query_protocol_error"))
    eq("usable after a malformed batch", vdu({"kind": "unauth"}), {"unauthorized": "You are not the author"})
    q.close()
    # Each write sees its own userCtx and secObj (a function that changes them cannot reach the next write), and
    # gets the whole time limit.
    q = ddoc({"_id": "_design/b", "validate_doc_update":
              "function(n, o, u, s) { u.roles.push('x'); s.seen = (s.seen || 0) + 1;"
              " if (u.roles.length !== 1 || s.seen !== 1) throw({forbidden: 'shared'});"
              " if (n.wait) { var t = Date.now(); while (Date.now() - t < n.wait) {} } if (n.loop) while (true) {} }"},
             args=("--timeout-ms", "400"))
    batch = lambda docs: q.call(["validate_batch", "_design/b", [{"name": "ann", "roles": []}, {}, docs]], timeout=30)
    eq("validate_batch: no state from one write to the next", batch([{"_id": "a"}, None] * 3), [True, [1, 1, 1]])
    eq("validate_batch: every write gets the whole time limit", batch([{"wait": 250}, None] * 3), [True, [1, 1, 1]])
    check("validate_batch: an endless loop times out", is_error(batch([{"_id": "a"}, None, {"loop": 1}, None]), "timeout"))
    eq("validate_batch: usable after a timeout", batch([{"_id": "a"}, None]), [True, [1]])
    q.close()
    q = ddoc(DDOC)

    rw = lambda path, method="GET": q.call(["ddoc", "_design/t", ["rewrites"],
                                            [{"path": ["db", "_design", "t", "_rewrite"] + path, "method": method}]])
    eq("rewrite string", rw(["foo"]), ["ok", {"path": "foo.txt", "method": "GET"}])
    eq("rewrite object", rw(["foo2"]), ["ok", {"path": "foo.txt", "method": "GET"}])
    eq("rewrite query", rw(["welcome", "user"]), ["ok", {"path": "_show/welcome", "query": {"name": "user"}}])
    eq("rewrite response", rw(["code"]), ["ok", {"code": 451, "body": "{\"status\":451}", "headers": {"x-foo": "bar"}}])
    eq("rewrite no rule", rw(["other"]), ["no_dispatch_rule"])
    check("rewrite error", is_error(rw(["throw"]), "rewrite_error"))
    q.close()

    q = QS()
    r = q.call(["ddoc", "_design/unknown", ["shows", "x"], [None, req()]])
    check("uncached design doc is fatal", is_error(r, "query_protocol_error"), r)
    eq("process exits after a fatal error", q.close(), 1)
    q = QS()
    check("unknown command is fatal", is_error(q.call(["frobnicate"]), "unknown_command"))
    eq("exit status after unknown command", q.close(), 1)
    q = ddoc(DDOC)
    check("unknown ddoc command is fatal", is_error(q.call(["ddoc", "_design/t", ["frob", "x"], []]), "unknown_command"))
    q.close()


# MARK: - Limits and bad input

def test_limits():
    q = views(["function(doc) { if (doc.loop) while (true) {} emit(doc._id, 1); }"], args=("--timeout-ms", "500"))
    t0 = time.time()
    r = q.call(["map_doc", {"_id": "a", "loop": True}])
    took = time.time() - t0
    check("endless loop answers timeout", is_error(r, "timeout"), r)
    check("timeout arrives in time", took < 3, "%.2fs" % took)
    eq("usable after a timeout", q.call(["map_doc", {"_id": "b"}]), [[["b", 1]]])
    q.close()

    q = ddoc(dict(DDOC, shows={"slow": "function(doc, req) { if (req.query.loop) while (true) {} return 'ok ' + require('whatever/stringzone').string; }",
                               "ploop": "function() { function f() { return Promise.resolve().then(f); } f(); return 'never'; }"}),
             args=("--timeout-ms", "500"))
    check("show timeout", is_error(show(q, "slow", None, req(query={"loop": 1})), "timeout"))
    eq("show usable after timeout", show(q, "slow"), ["resp", {"body": "ok plankton"}])
    check("endless promise chain times out", is_error(show(q, "ploop"), "timeout"))
    eq("show usable after promise timeout", show(q, "slow"), ["resp", {"body": "ok plankton"}])
    q.close()

    # The time between list rows is the parent's, not the function's.
    q = ddoc(DDOC, args=("--timeout-ms", "300"))
    q.send(["ddoc", "_design/t", ["lists", "basicBasic"], [{}, req()]])
    eq("list start before pause", q.recv()[0], "start")
    time.sleep(0.6)
    q.send(["list_row", {"key": "k"}])
    eq("list row after a pause longer than the timeout", q.recv(), ["chunks", ["k"]])
    q.send(["list_end"])
    eq("list end", q.recv(), ["end", ["tail"]])
    q.close()

    # Runaway allocations are errors, not crashes; the process goes on.
    for label, src in [("arrays", "function(doc) { var a = []; while (true) a.push(new Array(1e6)); }"),
                       ("objects", "function(doc) { var a = []; while (true) a.push({x: Math.random(), y: 'v' + Math.random()}); }"),
                       ("string doubling", "function(doc) { var s = 'x'; while (true) s = s + s; }"),
                       ("array buffers", "function(doc) { var a = []; while (true) a.push(new ArrayBuffer(64 << 20)); }"),
                       ("recursion", "function(doc) { function f() { return f() + 1; } f(); }")]:
        q = views([src], args=("--timeout-ms", "20000", "--max-heap-mb", "128"))
        t0 = time.time()
        try:
            r = q.call(["map_doc", {"_id": "m"}], timeout=60)
        except (EOFError, TimeoutError) as e:
            r = repr(e)
        check("runaway %s is an error" % label, is_error(r), "%r after %.1fs" % (r, time.time() - t0))
        try:
            q.call(["reset", {}])
            q.call(["add_fun", "function(doc) { emit(doc._id, 1); }"])
            eq("usable after runaway %s" % label, q.call(["map_doc", {"_id": "n"}]), [[["n", 1]]])
        except Exception as e:
            check("usable after runaway %s" % label, False, repr(e))
        q.close()

    q = QS()
    r = q.call("this is not JSON")
    check("invalid JSON line", is_error(r, "query_protocol_error"), r)
    q.call(["reset", {}])
    q.call(["add_fun", "function(doc) { emit(doc._id, doc._id.length); }"])
    q.send(b'["map_doc",{"_id":"bad \xff\xfe \xc3\xa9"}]')
    eq("invalid UTF-8 is replaced", q.recv(), [[["bad \ufffd\ufffd \u00e9", 8]]])
    q.send(b'["map_doc", {"_id" : "spaced"} ]')
    eq("commands with whitespace", q.recv(), [[["spaced", 6]]])
    eq("exit status 0 at end of input", q.close(), 0)


# MARK: - Sandbox

def test_sandbox():
    q = views(["function(doc) { gc(); emit(null, doc); }",
               "function(doc) { map_funs.push(1); emit(null, doc); }",
               "function(doc) { map_results.push(1); emit(null, doc); }",
               "function(doc) { var glob = emit.constructor('return this')(); emit(doc._id, null); }",
               "function(doc) { emit('f', Function('return this')()); }",
               "function(doc) { emit('e', eval('this')); }",
               "function(doc) { emit('names', ['readline', 'print', 'quit', 'evalcx', 'gc', 'seal', 'natives', 'State', 'Views',"
               " 'map_results', 'funs', 'ddocs', 'respond', 'dispatch', 'os', 'process', 'require', 'load', 'read', 'snarf',"
               " 'WebAssembly', 'SharedArrayBuffer', 'Atomics', 'ctypes', 'Debugger', 'FinalizationRegistry']"
               ".filter(function (n) { return typeof globalThis[n] !== 'undefined'; })); }",
               "function(doc) { var c; try { c = arguments.callee.caller; c = c === null ? 'null' : typeof c; } catch (e) { c = e.name; } emit('caller', c); }",
               "function(doc) { emit('proto', Object.getPrototypeOf(emit) === Function.prototype && Object.getPrototypeOf(doc) === Object.prototype); }",
               "function(doc) { seen = (typeof seen === 'undefined' ? 0 : seen) + 1; emit('global state', seen); }",
               ])
    r = q.call(["map_doc", {"_id": "s"}])
    eq("gc unreachable", r[0], [])
    eq("map_funs unreachable", r[1], [])
    eq("map_results unreachable", r[2], [])
    eq("Function via emit.constructor blocked", r[3], [])
    eq("Function blocked", r[4], [])
    eq("eval blocked", r[5], [])
    eq("no host natives or extra globals (only require, for view libraries)", r[6], [["names", ["require"]]])
    eq("the runtime is not the caller", r[7], [["caller", "null"]])
    eq("helpers belong to the sandbox's realm", r[8], [["proto", True]])
    eq("globals persist per function (as in CouchDB)", r[9], [["global state", 1]])
    check("blocked code generation is logged", sum("CSP" in l for l in q.logs) == 3, q.logs)
    eq("second document", q.call(["map_doc", {"_id": "s2"}])[9], [["global state", 2]])
    q.close()

    # Two view groups in one process do not share globals.
    q = views(["function(doc) { shared = 'one'; emit('set', shared); }",
               "function(doc) { emit('read', typeof shared); }"])
    eq("functions have separate globals", q.call(["map_doc", {"_id": "x"}]), [[["set", "one"]], [["read", "undefined"]]])
    q.close()


# MARK: - Measurements

def bench():
    print("\nmeasurements (%s, %d CPUs, load %.2f)" % (os.path.basename(BIN), os.cpu_count(), os.getloadavg()[0]))
    ts = []
    for _ in range(10):
        t0 = time.perf_counter()
        q = QS()
        q.call(["reset", {}])
        ts.append((time.perf_counter() - t0) * 1000)
        q.close()
    print("  start-up to first answer: median %.1f ms, min %.1f ms (10 runs)" % (statistics.median(ts), min(ts)))

    q = QS()
    q.call(["reset", {}])
    time.sleep(0.2)
    idle = q.rss_kb()
    q.call(["add_fun", "function(doc) { emit(doc._id, null); }"])
    n = 100000
    lines = [json.dumps(["map_doc", {"_id": "doc%06d" % i, "_rev": "1-8d3f", "n": i, "name": "name %d" % i, "tags": ["a", "b"]}],
                        separators=(",", ":")).encode() + b"\n" for i in range(n)]
    batch = 1000

    def writer():
        for i in range(0, n, batch):
            q.p.stdin.write(b"".join(lines[i:i + batch]))

    fd = q.p.stdout.fileno()
    t0 = time.perf_counter()
    th = threading.Thread(target=writer)
    th.start()
    got, tail = 0, b""
    while got < n:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        got += chunk.count(b"\n")
        tail = (tail + chunk)[-200:]
    th.join()
    dt = time.perf_counter() - t0
    check("throughput run answered every document", got == n and tail.endswith(b'[[["doc099999",null]]]\n'), tail[-60:])
    print("  map throughput, %d docs pipelined through the pipe in batches of %d: %.0f docs/s (%.2f s)" % (n, batch, n / dt, dt))
    m = 20000
    t0 = time.perf_counter()
    for i in range(m):
        q.p.stdin.write(lines[i])
        q.line()
    dt = time.perf_counter() - t0
    print("  map throughput, one document at a time (write, wait for the answer): %.0f docs/s" % (m / dt))
    busy = q.rss_kb()
    print("  resident memory: idle after reset %.1f MB, after the runs %.1f MB" % (idle / 1024, busy / 1024))
    q.close()

    q = QS()
    q.call(["reset", {}])
    t0 = time.perf_counter()
    k = 200
    for i in range(k):
        q.call(["add_fun", "function(doc) { emit(doc._id, %d); }" % i])
    dt = time.perf_counter() - t0
    print("  add_fun (a sandbox realm each): %.2f ms per function" % (dt * 1000 / k))
    q.close()


if os.environ.get("TESTS") == "1":
    for t in [test_views, test_reduce, test_shows, test_lists, test_updates_filters_validate_rewrites, test_limits,
              test_sandbox]:
        try:
            t()
        except Exception as e:
            import traceback
            traceback.print_exc()
            failures.append(t.__name__ + ": " + repr(e))
    print("%d checks, %d failed" % (checks, len(failures)))
if os.environ.get("BENCH") == "1":
    bench()
if failures:
    print("FAILED: " + ", ".join(failures))
    sys.exit(1)
PY

// The JavaScript half of settee-js, kept here as C++ raw string literals so the executable builds with one compiler
// command and no generator.
//
// kRuntimeSource runs in the host realm. It is a function expression; main.cpp calls it with the natives and gets
// back {dispatch(line), aborted()}. dispatch handles one command line of CouchDB's
// query-server protocol and writes the answer (and any log lines) with natives.print; it returns a non-zero exit
// status when the process must end (CouchDB's "fatal" errors).
//
// kSandboxPrelude is compiled once (to a stencil) and instantiated in every sandbox realm. It is a function expression
// too; the runtime calls it with the
// sandbox's host hooks and the JSON of the sandbox's require root (the design document, or {views: {lib}} for a view
// map function). It defines CouchDB's helpers as globals of the sandbox (emit, log, sum, toJSON, isArray, provides,
// registerType, start, send, getRow, require) and returns a small kit the runtime uses to bring data into the
// sandbox's realm (so design functions see their own realm's Object/Array: `doc.tags instanceof Array` holds).
//
// The behaviour follows CouchDB's share/server/*.js (3.x); the code is our own.

#pragma once

static const char kRuntimeSource[] = R"JS(
(function (natives) {
"use strict";

var print = natives.print;
var readline = natives.readline;
var collectGarbage = natives.gc;
var runJobs = natives.runJobs;
var setTimeoutMs = natives.setTimeout;
var newSandbox = natives.newSandbox;
var evaluate = natives.evaluate;
var syntaxError = natives.syntaxError;
var instantiatePrelude = natives.prelude;

var parse = JSON.parse;
var stringify = JSON.stringify;
var isArray = Array.isArray;
var hasOwn = Object.prototype.hasOwnProperty;
var objectKeys = Object.keys;

// MARK: Small helpers

function own(o, k) {
  return o !== null && (typeof o === "object" || typeof o === "function") && hasOwn.call(o, k);
}

// CouchDB prints errors with toSource(): "(new TypeError(\"x is undefined\", \"file\", 3))".
function errstr(e) {
  try {
    if (e !== null && e !== undefined && typeof e.toSource === "function") return String(e.toSource());
    return String(e);
  } catch (x) {
    try { return String(e); } catch (y) { return "(an error that cannot be printed)"; }
  }
}

function errorMessage(e) {
  try {
    if (e !== null && typeof e === "object" && "message" in e) return String(e.message);
  } catch (x) {}
  return errstr(e);
}

// Error objects serialize as {} with JSON.stringify; log and emit show their name and message instead.
function errorToJSON(e) {
  try {
    if (typeof e === "object" && e !== null && "stack" in e && "name" in e && "message" in e) {
      return {error: e.name, message: e.message};
    }
  } catch (x) {}
  return e;
}

// Always writes exactly one line of JSON.
function respond(value) {
  var line;
  try {
    line = stringify(value);
  } catch (e) {
    line = stringify(["error", "render_error", "the answer cannot be serialized as JSON: " + errstr(e)]);
  }
  if (typeof line !== "string") line = "null";
  print(line);
}

function log(message) {
  if (typeof message !== "string") {
    try {
      message = stringify(errorToJSON(message));
    } catch (e) {
      message = "(a value that cannot be serialized: " + errstr(e) + ")";
    }
  }
  respond(["log", String(message)]);
}

// Whether an exception means the engine ran out of resources (memory, stack); such an error fails the whole command.
function resourceError(e) {
  if (e === "out of memory") return ["error", "out_of_memory", "the JavaScript heap limit was reached"];
  try {
    if (e !== null && typeof e === "object" && e.name === "InternalError") {
      return ["error", "InternalError", String(e.message)];
    }
  } catch (x) {}
  return null;
}

// MARK: Mime types (provides / registerType)

function newMimeRegistry() {
  var registry = {byKey: Object.create(null), keyOf: Object.create(null)};
  // CouchDB's built-in types (they come from Ruby on Rails).
  registerType(registry, ["all", "*/*"]);
  registerType(registry, ["text", "text/plain; charset=utf-8", "txt"]);
  registerType(registry, ["html", "text/html; charset=utf-8"]);
  registerType(registry, ["xhtml", "application/xhtml+xml", "xhtml"]);
  registerType(registry, ["xml", "application/xml", "text/xml", "application/x-xml"]);
  registerType(registry, ["js", "text/javascript", "application/javascript", "application/x-javascript"]);
  registerType(registry, ["css", "text/css"]);
  registerType(registry, ["ics", "text/calendar"]);
  registerType(registry, ["csv", "text/csv"]);
  registerType(registry, ["rss", "application/rss+xml"]);
  registerType(registry, ["atom", "application/atom+xml"]);
  registerType(registry, ["yaml", "application/x-yaml", "text/yaml"]);
  registerType(registry, ["multipart_form", "multipart/form-data"]);
  registerType(registry, ["url_encoded_form", "application/x-www-form-urlencoded"]);
  registerType(registry, ["json", "application/json", "text/x-json"]);
  return registry;
}

// registerType(name, mime, mime, …): the last registration of a name wins.
function registerType(registry, args) {
  var key = String(args[0]);
  var mimes = [];
  for (var i = 1; i < args.length; i++) mimes.push(String(args[i]));
  registry.byKey[key] = mimes;
  for (var j = 0; j < mimes.length; j++) registry.keyOf[mimes[j]] = key;
}

function trim(s) { return s.replace(/^\s+/, "").replace(/\s+$/, ""); }

// "text/html;level=1;q=0.5" → [type, subtype, params]; q defaults to 1 and is clamped as mimeparse does.
function parseMediaRange(range) {
  var parts = String(range).split(";");
  var params = Object.create(null);
  for (var i = 1; i < parts.length; i++) {
    var kv = parts[i].split("=");
    if (kv.length === 2) params[trim(kv[0])] = trim(kv[1]);
  }
  var full = trim(parts[0]);
  if (full === "*") full = "*/*";
  var typeParts = full.split("/");
  var q = params.q === undefined ? NaN : parseFloat(params.q);
  if (params.q === undefined || isNaN(q) || q > 1 || q < 0) params.q = "1";
  return [typeParts[0], typeParts[1], params];
}

function fitnessAndQuality(mime, ranges) {
  var bestFitness = -1, bestQ = 0;
  var target = parseMediaRange(mime);
  for (var i = 0; i < ranges.length; i++) {
    var r = ranges[i];
    var typeOK = r[0] === target[0] || r[0] === "*" || target[0] === "*";
    var subOK = r[1] === target[1] || r[1] === "*" || target[1] === "*";
    if (!typeOK || !subOK) continue;
    var matches = 0;
    for (var p in target[2]) {
      if (p !== "q" && r[2][p] !== undefined && r[2][p] === target[2][p]) matches++;
    }
    var fitness = (r[0] === target[0] ? 100 : 0) + (r[1] === target[1] ? 10 : 0) + matches;
    if (fitness > bestFitness) {
      bestFitness = fitness;
      bestQ = r[2].q;
    }
  }
  return [bestFitness, parseFloat(bestQ)];
}

// The supported mime type that best matches an Accept header ("" when none does), as mimeparse's bestMatch: by
// fitness, then quality, then the later entry.
function bestMatch(supported, header) {
  var ranges = String(header).split(",").map(parseMediaRange);
  var best = null;
  for (var i = 0; i < supported.length; i++) {
    var fq = fitnessAndQuality(supported[i], ranges);
    var cand = [fq[0], fq[1], i, supported[i]];
    if (best === null || cand[0] > best[0] || (cand[0] === best[0] && (cand[1] > best[1] ||
        (cand[1] === best[1] && cand[2] > best[2])))) {
      best = cand;
    }
  }
  return best !== null && best[1] ? best[3] : "";
}

// MARK: Per-command render state (shows, lists, updates)

var render = null;

function resetRender(box) {
  render = {
    box: box,
    providesUsed: false,
    mimeFuns: [],
    contentType: null,
    chunks: [],
    startResp: {},
    newHeader: false,
    listActive: false,
    gotRow: false,
    lastRow: false,
    fatal: null
  };
}

function resetChunks() {
  render.gotRow = false;
  render.lastRow = false;
  render.chunks = [];
  render.startResp = {};
  render.newHeader = false;
}

function runProvides(req, ddoc) {
  var r = render, registry = r.box.mimes;
  var bestKey = null, bestFun = null;
  var query = req !== null && typeof req === "object" ? req.query : undefined;
  var headers = req !== null && typeof req === "object" ? req.headers : undefined;
  var accept = headers !== null && typeof headers === "object" ? headers["Accept"] : undefined;
  if (query !== null && typeof query === "object" && query.format) {
    bestKey = String(query.format);
    var mimes = registry.byKey[bestKey];
    r.contentType = mimes && mimes.length ? mimes[0] : null;
  } else if (accept) {
    var supported = [];
    for (var i = r.mimeFuns.length - 1; i >= 0; i--) {
      var m = registry.byKey[r.mimeFuns[i][0]];
      if (m) supported = supported.concat(m);
    }
    r.contentType = bestMatch(supported, accept);
    bestKey = r.contentType ? registry.keyOf[r.contentType] : undefined;
  } else if (r.mimeFuns.length) {
    bestKey = r.mimeFuns[0][0];
    var first = registry.byKey[bestKey];
    r.contentType = first && first.length ? first[0] : null;
  }
  // The last provides() for a key wins, as in CouchDB.
  if (bestKey !== null && bestKey !== undefined) {
    for (var j = r.mimeFuns.length - 1; j >= 0; j--) {
      if (r.mimeFuns[j][0] === bestKey) { bestFun = r.mimeFuns[j][1]; break; }
    }
  }
  if (typeof bestFun === "function") return bestFun.call(ddoc);
  var types = r.mimeFuns.map(function (mf) {
    var m = registry.byKey[mf[0]];
    return (m && m.join(", ")) || mf[0];
  });
  throw ["error", "not_acceptable",
         "Content-Type " + (accept || bestKey) + " not supported, try one of: " + types.join(", ")];
}

// A mutable copy (in the host realm) of a response object a design function returned.
function copyResponse(resp) {
  var out = {};
  var keys = objectKeys(resp);
  for (var i = 0; i < keys.length; i++) out[keys[i]] = resp[keys[i]];
  if (out.headers !== null && typeof out.headers === "object" && !isArray(out.headers)) {
    var h = {}, hk = objectKeys(out.headers);
    for (var j = 0; j < hk.length; j++) h[hk[j]] = out.headers[hk[j]];
    out.headers = h;
  }
  return out;
}

function applyContentType(resp, contentType) {
  resp = copyResponse(resp !== null && typeof resp === "object" ? resp : {});
  if (resp.headers === null || typeof resp.headers !== "object") resp.headers = {};
  if (contentType) resp.headers["Content-Type"] = resp.headers["Content-Type"] || contentType;
  return resp;
}

function maybeWrapResponse(resp) {
  return typeof resp === "string" ? {body: resp} : resp;
}

function typeOf(value) {
  if (value === null) return "null";
  if (isArray(value)) return "array";
  return typeof value;
}

function sendStart() {
  var r = render;
  var start = applyContentType(r.startResp, r.contentType);
  respond(["start", r.chunks, start]);
  r.chunks = [];
  r.startResp = {};
  r.newHeader = false;
}

function blowChunks(label) {
  var r = render;
  if (r.newHeader) {
    respond([label, r.chunks, r.startResp]);
    r.newHeader = false;
  } else {
    respond([label, r.chunks]);
  }
  r.chunks = [];
}

// getRow() inside a list function: sends what was sent so far, reads the next row. Outside a list it returns null
// (a show or map function cannot read the protocol stream).
function getRow() {
  var r = render;
  if (r === null || !r.listActive || r.lastRow || r.fatal) return null;
  if (!r.gotRow) {
    r.gotRow = true;
    sendStart();
  } else {
    blowChunks("chunks");
  }
  var line = readline();
  if (line === null) {
    r.fatal = ["fatal", "list_error", "the input ended during a list"];
    throw r.fatal;
  }
  var message;
  try {
    message = r.box.kit.parse(line);
  } catch (e) {
    r.fatal = ["fatal", "list_error", "a list row is not JSON: " + errorMessage(e)];
    throw r.fatal;
  }
  var tag = isArray(message) ? message[0] : undefined;
  if (tag === "list_end") {
    r.lastRow = true;
    return null;
  }
  if (tag !== "list_row") {
    r.fatal = ["fatal", "list_error", "not a row '" + tag + "'"];
    throw r.fatal;
  }
  return message[1];
}

function renderError(e, errType) {
  var isErr = false;
  try {
    isErr = e !== null && e !== undefined && ((e.error && e.reason) || e[0] === "error" || e[0] === "fatal");
  } catch (x) {}
  if (isErr) throw e;
  // Settee: throw({forbidden|unauthorized|not_found: reason}) from a render function answers that error.
  if (e !== null && typeof e === "object" && !isArray(e)) {
    var keys = ["forbidden", "unauthorized", "not_found"];
    for (var i = 0; i < keys.length; i++) {
      if (own(e, keys[i])) throw ["error", keys[i], typeof e[keys[i]] === "string" ? e[keys[i]] : errstr(e[keys[i]])];
    }
  }
  var res = resourceError(e);
  if (res) throw res;
  var stack = "";
  try {
    // The design function's frames only, not the runtime's.
    stack = e !== null && e !== undefined && e.stack !== undefined ? String(e.stack) : "undefined";
    stack = stack.split("\n").filter(function (l) { return l.indexOf("@settee:") < 0; }).join("\n");
  } catch (x) {}
  var message = "function raised error: " + errstr(e) + " \nstacktrace: " + stack;
  log(message);
  throw ["error", errType || "render_error", message];
}

function runShow(fun, ddoc, args, box) {
  try {
    var resp = fun.apply(ddoc, args) || {};
    runJobs();
    resp = maybeWrapResponse(resp);
    var type = typeOf(resp);
    if (type === "object") resp = copyResponse(resp);
    var r = render;
    // list() style API: start() and send() in a show.
    if (r.chunks.length > 0 && type === "object") {
      if (resp.headers === null || typeof resp.headers !== "object") resp.headers = {};
      for (var header in r.startResp) resp.headers[header] = r.startResp[header];
      resp.body = r.chunks.join("") + (resp.body || "");
      resetChunks();
    }
    if (r.providesUsed && type === "object") {
      var provided = maybeWrapResponse(runProvides(args[1], ddoc) || {});
      resp.body = (resp.body || "") + r.chunks.join("");
      resp.body += (provided !== null && typeof provided === "object" && provided.body) || "";
      resp = applyContentType(resp, r.contentType);
      resetChunks();
    }
    if (type === "object" || type === "string") {
      respond(["resp", maybeWrapResponse(resp)]);
    } else {
      throw ["error", "render_error", "undefined response from show function"];
    }
  } catch (e) {
    var res = resourceError(e);
    if (res) throw res;
    var req = args[1];
    var path = req !== null && typeof req === "object" ? req.path : undefined;
    if (args[0] === null && path && path.length > 5) {
      throw ["error", "not_found", "document not found"];
    }
    renderError(e);
  }
}

function runUpdate(fun, ddoc, args, box) {
  try {
    var req = args[1];
    if (req !== null && typeof req === "object" && req.method === "GET") {
      throw ["error", "method_not_allowed", "Update functions do not allow GET"];
    }
    var result = fun.apply(ddoc, args);
    runJobs();
    var doc = result[0];
    var resp = result[1];
    var type = typeOf(resp);
    if (type === "object" || type === "string") {
      respond(["up", doc, maybeWrapResponse(resp)]);
    } else {
      throw ["error", "render_error", "undefined response from update function"];
    }
  } catch (e) {
    renderError(e);
  }
}

function runList(fun, ddoc, args, box) {
  var r = render;
  r.listActive = true;
  try {
    var tail = fun.apply(ddoc, args);
    if (r.fatal) throw r.fatal;
    if (r.providesUsed) tail = runProvides(args[1], ddoc);
    if (r.fatal) throw r.fatal;
    if (!r.gotRow) getRow();
    if (typeof tail !== "undefined") r.chunks.push(String(tail));
    blowChunks("end");
  } catch (e) {
    if (r.fatal) throw r.fatal;
    renderError(e);
  } finally {
    r.listActive = false;
  }
}

function runRewrite(fun, ddoc, args, box) {
  var result;
  try {
    result = fun.apply(ddoc, args);
    runJobs();
  } catch (e) {
    renderError(e, "rewrite_error");
  }
  if (!result) {
    respond(["no_dispatch_rule"]);
    return;
  }
  if (typeof result === "string") {
    var req = args[0];
    result = {path: result, method: req !== null && typeof req === "object" ? req.method : undefined};
  }
  respond(["ok", result]);
}

// MARK: Filters and validation

// What emit does when a design function calls it outside a map (a map collects rows in its own realm, see the
// prelude's mapDocument): 0: nothing, 2: a view used as a filter notes that something was emitted.
var emitMode = 0;
var viewEmitted = false;

function runFilter(fun, ddoc, args, box) {
  var docs = args[0], req = args[1], results = [];
  for (var i = 0; i < docs.length; i++) {
    results.push((fun.apply(ddoc, [docs[i], req]) && true) || false);
  }
  runJobs();
  respond([true, results]);
}

function runViewFilter(fun, ddoc, args, box) {
  var docs = args[0], results = [];
  emitMode = 2;
  try {
    for (var i = 0; i < docs.length; i++) {
      viewEmitted = false;
      fun(docs[i]);
      runJobs();
      results.push(viewEmitted);
    }
  } finally {
    emitMode = 0;
  }
  respond([true, results]);
}

function runValidate(fun, ddoc, args, box) {
  try {
    fun.apply(ddoc, args);
    runJobs();
    respond(1);
  } catch (error) {
    var res = resourceError(error);
    if (res) throw res;
    var isError = false;
    try { isError = error !== null && typeof error === "object" && !!error.name && !!error.stack; } catch (x) {}
    if (isError || error === undefined) throw error;
    // {forbidden: …} / {unauthorized: …} (or anything else the function threw) is the answer.
    respond(error);
  }
}

// MARK: Sandboxes

// A sandbox realm with CouchDB's helpers. rootJSON: the JSON text of what require() resolves against, or null.
function createBox(rootJSON) {
  var sb = newSandbox();
  var box = {sb: sb, kit: null, ddoc: null, mimes: null};
  var host = {
    emit: function (key, value) {
      if (emitMode === 2) viewEmitted = true;
    },
    log: function (message) { log(message); },
    provides: function (type, fun) {
      var key = String(type);
      if (render === null) return;
      render.providesUsed = true;
      render.mimeFuns.push([key, fun]);
    },
    registerType: function (args) {
      if (box.mimes === null) box.mimes = newMimeRegistry();
      registerType(box.mimes, args);
    },
    start: function (resp) {
      if (render === null) return;
      render.startResp = resp || {};
      render.newHeader = true;
    },
    send: function (chunk) {
      if (render !== null) render.chunks.push(String(chunk));
    },
    getRow: function () { return getRow(); },
    compileModule: function (source, id) {
      return evaluate(sb, "(function (module, exports, require) { " + source + "\n })", "module " + id);
    }
  };
  var install = instantiatePrelude(sb);
  var kit = install(host, rootJSON);
  box.kit = {parse: kit.parse, splitKVs: kit.splitKVs, mapDocument: kit.mapDocument};
  box.ddoc = kit.root;
  if (box.mimes === null) box.mimes = newMimeRegistry();
  return box;
}

function functionCandidates(source) {
  var out = ["(" + source + "\n)", source];
  // An anonymous function declaration (CouchDB's usual "function(doc) {…}" followed by more statements or a ";")
  // becomes the last expression statement: insert ";0," before a `function` keyword, the last one first.
  var re = /\bfunction\b/g, m, anon = [], named = [];
  while ((m = re.exec(source)) !== null) {
    if (/^function\s*\(/.test(source.slice(m.index, m.index + 40))) anon.push(m.index);
    else named.push(m.index);
  }
  var positions = anon.reverse().concat(named.reverse()).slice(0, 32);
  for (var i = 0; i < positions.length; i++) {
    var p = positions[i];
    out.push(source.slice(0, p) + ";0," + source.slice(p));
  }
  return out;
}

// Compiles a design function's source in a sandbox as couchjs does: the source evaluates to a function. Accepted
// forms: "function (doc) {…}" (anonymous or named, with comments around it, with a trailing ";"), an arrow
// function, or statements whose last expression (or last function declaration) is the function.
function compileFunction(box, source, name) {
  if (!source) throw ["error", "not_found", "missing function"];
  source = String(source);
  var candidates = functionCandidates(source);
  var firstError = null, nonFunction = false;
  for (var i = 0; i < candidates.length; i++) {
    var err = syntaxError(box.sb, candidates[i], name || "design function");
    if (err !== undefined) {
      if (i < 2 && firstError === null && (i === 0 ? /^\s*(\/\/[^\n]*\n\s*|\/\*[\s\S]*?\*\/\s*)*(function|\()/.test(source) : true)) {
        firstError = err;
      }
      continue;
    }
    var value;
    try {
      value = evaluate(box.sb, candidates[i], name || "design function");
    } catch (e) {
      var res = resourceError(e);
      if (res) throw res;
      throw ["error", "compilation_error", errstr(e) + " (" + source + ")"];
    }
    if (typeof value === "function") return value;
    nonFunction = true;
  }
  if (firstError !== null && !nonFunction) {
    throw ["error", "compilation_error", errstr(firstError) + " (" + source + ")"];
  }
  throw ["error", "compilation_error", "Expression does not eval to a function. (" + source + ")"];
}

// MARK: Views: reset, add_lib, add_fun, map_doc, reduce, rereduce

var state = {config: {}, lib: null, funs: [], sources: []};
var reduceCache = new Map();
var lineLength = 0;

function reset(config) {
  state.config = (config !== null && typeof config === "object") ? config : {};
  state.lib = null;
  state.funs = [];
  state.sources = [];
  reduceCache.clear();
  var t = state.config.timeout;
  if (typeof t === "number" && t > 0) setTimeoutMs(t);
  collectGarbage();
  respond(true);
}

function addLib(lib) {
  state.lib = lib === undefined ? null : lib;
  respond(true);
}

function compileMapFunction(source) {
  var box = createBox(stringify({views: {lib: state.lib}}));
  return {box: box, fn: compileFunction(box, source, "map function")};
}

function addFun(source) {
  state.funs.push(compileMapFunction(source));
  state.sources.push(source);
  respond(true);
}

function handleViewError(err, doc) {
  if (err === "fatal_error") throw ["error", "map_runtime_error", "function raised 'fatal_error'"];
  var res = resourceError(err);
  if (res) throw res;
  if (isArray(err) && err[0] === "fatal") throw err;
  var message = "function raised exception " + errstr(err);
  try {
    if (doc !== null && typeof doc === "object") message += " with doc._id " + doc._id;
  } catch (x) {}
  log(message);
}

// docText: the document's JSON; each function gets its own copy, parsed in its own realm.
function mapDoc(docText) {
  var funs = state.funs, out = [];
  for (var i = 0; i < funs.length; i++) {
    var f = funs[i];
    try {
      out.push(f.box.kit.mapDocument(f.fn, docText, runJobs));
    } catch (err) {
      var doc;
      try { doc = f.box.kit.parse(docText); } catch (x) {}
      handleViewError(err, doc);
      out.push("[]");
    }
  }
  print("[" + out.join(",") + "]");
}

function reduceFunction(source) {
  var cached = reduceCache.get(source);
  if (cached !== undefined) {
    reduceCache.delete(source);
    reduceCache.set(source, cached);
    return cached;
  }
  var box = createBox(null);
  var entry = {box: box, fn: compileFunction(box, source, "reduce function")};
  reduceCache.set(source, entry);
  if (reduceCache.size > 128) reduceCache.delete(reduceCache.keys().next().value);
  return entry;
}

function runReduce(sources, line, rereduce, ctx) {
  if (!isArray(sources)) throw ["error", "query_protocol_error", "reduce functions must be an array"];
  var codeSize = 0, entries = [];
  for (var i = 0; i < sources.length; i++) {
    codeSize += String(sources[i]).length;
    entries.push(reduceFunction(sources[i]));
  }
  var reductions = new Array(entries.length);
  for (var j = 0; j < entries.length; j++) {
    try {
      var data = entries[j].box.kit.parse(line)[2];
      if (rereduce) {
        reductions[j] = entries[j].fn(null, data, true);
      } else {
        var kv = entries[j].box.kit.splitKVs(data);
        reductions[j] = entries[j].fn(kv[0], kv[1], false);
      }
      runJobs();
    } catch (err) {
      handleViewError(err);
      reductions[j] = null;
    }
  }
  var reduceLine = stringify(reductions);
  var config = state.config;
  var limit = config.reduce_limit;
  if (limit === "false") limit = false;
  var threshold = typeof config.reduce_limit_threshold === "number" ? config.reduce_limit_threshold : 5000;
  var ratio = typeof config.reduce_limit_ratio === "number" ? config.reduce_limit_ratio : 2.0;
  var inputLength = lineLength - codeSize;
  if (limit && reduceLine.length > threshold && reduceLine.length * ratio > inputLength) {
    var message = ["Reduce output must shrink more rapidly:", "input size:", inputLength,
                   "output size:", reduceLine.length].join(" ");
    if (ctx !== undefined) message += " context: " + (typeof ctx === "string" ? ctx : stringify(ctx));
    if (limit === "log") {
      log("reduce_overflow_error: " + message);
    } else {
      throw ["error", "reduce_overflow_error", message];
    }
  }
  print("[true," + reduceLine + "]");
}

// MARK: Design documents

var ddocs = new Map();

var ddocHandlers = {
  lists: runList,
  shows: runShow,
  filters: runFilter,
  views: runViewFilter,
  updates: runUpdate,
  validate_doc_update: runValidate,
  rewrites: runRewrite
};

function ensureBox(entry) {
  if (entry.box === null) entry.box = createBox(stringify(entry.source));
  return entry.box;
}

// The design function the last ddoc command ran, with the text its commands start with: the next command to the
// same function (a validation or filter batch) is recognised by that prefix and only its arguments are parsed.
var lastDdoc = null;

function ddocCommand(cmd, line) {
  var id = cmd[1];
  if (id === "new") {
    var newId = cmd[2];
    ddocs.set(String(newId), {source: cmd[3], box: null, funs: new Map()});
    lastDdoc = null;
    respond(true);
    return;
  }
  var entry = ddocs.get(String(id));
  if (entry === undefined) throw ["fatal", "query_protocol_error", "uncached design doc: " + id];
  var funPath = cmd[2];
  if (!isArray(funPath) || funPath.length === 0) throw ["fatal", "query_protocol_error", "no function path"];
  var kind = funPath[0];
  var handler = own(ddocHandlers, kind) ? ddocHandlers[kind] : undefined;
  if (handler === undefined) throw ["fatal", "unknown_command", "unknown ddoc command '" + kind + "'"];
  var key = funPath.join("\u0000");
  var fun = entry.funs.get(key);
  var box = ensureBox(entry);
  if (fun === undefined) {
    var point = entry.source, source;
    for (var i = 0; i < funPath.length; i++) {
      var next = point !== null && typeof point === "object" && own(point, funPath[i]) ? point[funPath[i]] : undefined;
      if (i + 1 === funPath.length) {
        source = next;
      } else {
        point = next;
      }
    }
    if (!source) {
      throw ["error", "not_found",
             "missing " + funPath[0] + " function " + funPath[funPath.length - 1] + " on design doc " + id];
    }
    fun = compileFunction(box, source, funPath.join("."));
    entry.funs.set(key, fun);
  }
  // The arguments, parsed in the sandbox's realm: from the line itself when it is laid out as expected.
  var prefix = stringify(["ddoc", id, funPath]);
  prefix = prefix.slice(0, prefix.length - 1) + ",";
  var call = {prefix: prefix, fun: fun, box: box, handler: handler};
  var laidOut = line.length > prefix.length && line.startsWith(prefix) && line.endsWith("]");
  lastDdoc = laidOut ? call : null;
  runDdoc(call, laidOut ? line.slice(prefix.length, line.length - 1) : stringify(cmd[3] === undefined ? [] : cmd[3]),
          cmd[3]);
}

// Runs a resolved design function on its arguments' JSON text (`parsed`: the same arguments already parsed in the
// outer realm, if they were, for a text laid out in a way the sandbox's parse does not accept).
function runDdoc(call, argsText, parsed) {
  var args;
  try {
    args = call.box.kit.parse(argsText);
  } catch (e) {
    args = call.box.kit.parse(stringify(parsed === undefined ? [] : parsed));
  }
  if (!isArray(args)) throw ["error", "query_protocol_error", "the arguments must be an array"];
  applyDdoc(call, args);
}

function applyDdoc(call, args) {
  resetRender(call.box);
  call.handler(call.fun, call.box.ddoc, args, call.box);
}

// MARK: The loop

function handleError(e) {
  if (isArray(e) && e[0] === "fatal") {
    respond(["error", e[1], e[2]]);
    return 1;
  }
  if (isArray(e) && e[0] === "error") {
    respond(["error", e[1], e[2]]);
    return 0;
  }
  var res = resourceError(e);
  if (res) {
    respond(res);
    return 0;
  }
  try {
    if (e !== null && typeof e === "object" && e.error && e.reason) {
      respond(["error", e.error, e.reason]);
      return 0;
    }
    if (e !== null && typeof e === "object" && e.name) {
      respond(["error", String(e.name), errorMessage(e)]);
      return 0;
    }
  } catch (x) {}
  respond(["error", "unnamed_error", errstr(e)]);
  return 0;
}

var MAP_PREFIX = "[\"map_doc\",";

function dispatch(line) {
  render = null;
  emitMode = 0;
  lineLength = line.length;
  try {
    if (line.startsWith(MAP_PREFIX) && line.endsWith("]")) {
      mapDoc(line.slice(MAP_PREFIX.length, line.length - 1));
      return 0;
    }
    if (lastDdoc !== null && line.startsWith(lastDdoc.prefix) && line.endsWith("]")) {
      var args;
      try {
        args = lastDdoc.box.kit.parse(line.slice(lastDdoc.prefix.length, line.length - 1));
      } catch (e) {
        args = undefined;  // not JSON: the slow path answers as for any other malformed command
      }
      if (isArray(args)) {
        applyDdoc(lastDdoc, args);
        return 0;
      }
    }
    var cmd;
    try {
      cmd = parse(line);
    } catch (e) {
      respond(["error", "query_protocol_error", "the command is not JSON: " + errorMessage(e)]);
      return 0;
    }
    if (!isArray(cmd) || cmd.length === 0) {
      throw ["fatal", "query_protocol_error", "a command must be a non-empty array"];
    }
    switch (cmd[0]) {
      case "reset": reset(cmd[1]); break;
      case "add_lib": addLib(cmd[1]); break;
      case "add_fun": addFun(cmd[1]); break;
      case "map_doc": mapDoc(stringify(cmd[1])); break;
      case "reduce": runReduce(cmd[1], line, false, cmd[3]); break;
      case "rereduce": runReduce(cmd[1], line, true, cmd[3]); break;
      case "ddoc": ddocCommand(cmd, line); break;
      default: throw ["fatal", "unknown_command", "unknown command '" + cmd[0] + "'"];
    }
  } catch (e) {
    return handleError(e);
  } finally {
    render = null;
    emitMode = 0;
  }
  return 0;
}

// After a command was cut short (time or memory limit): sandboxes may hold half-built state (module caches), so
// design documents get fresh ones and the map functions are compiled again.
function aborted() {
  render = null;
  emitMode = 0;
  reduceCache.clear();
  lastDdoc = null;
  ddocs.forEach(function (entry) {
    entry.box = null;
    entry.funs = new Map();
  });
  var sources = state.sources;
  state.funs = [];
  for (var i = 0; i < sources.length; i++) {
    try {
      state.funs.push(compileMapFunction(sources[i]));
    } catch (e) {
      state.funs.push({box: createBox(null), fn: function () {}});
    }
  }
}

// MARK: Lockdown

// Freezes the host realm's builtins (and the intrinsics reachable only through instances), so a host object that
// reaches a sandbox (an error the runtime throws, a response object) cannot be used to change how the runtime works.
(function lockdown() {
  var seen = new Set();
  var stack = [];
  function push(v) {
    if ((typeof v === "object" && v !== null) || typeof v === "function") {
      if (!seen.has(v)) { seen.add(v); stack.push(v); }
    }
  }
  var roots = Object.getOwnPropertyNames(globalThis);
  for (var i = 0; i < roots.length; i++) {
    var d = Object.getOwnPropertyDescriptor(globalThis, roots[i]);
    if (d && "value" in d) push(d.value);
  }
  var g = function* () {}, ag = async function* () {}, af = async function () {};
  push(Object.getPrototypeOf(g)); push(Object.getPrototypeOf(ag)); push(Object.getPrototypeOf(af));
  push(Object.getPrototypeOf(g())); push(Object.getPrototypeOf(ag()));
  push(Object.getPrototypeOf([][Symbol.iterator]()));
  push(Object.getPrototypeOf(new Map()[Symbol.iterator]()));
  push(Object.getPrototypeOf(new Set()[Symbol.iterator]()));
  push(Object.getPrototypeOf(""[Symbol.iterator]()));
  push(Object.getPrototypeOf(/x/[Symbol.matchAll]("")));
  push(Object.getPrototypeOf(Int8Array));
  push(Object.getOwnPropertyDescriptor(Function.prototype, "caller"));
  push(Object.getOwnPropertyDescriptor(Function.prototype, "arguments"));
  while (stack.length) {
    var o = stack.pop();
    push(Object.getPrototypeOf(o));
    var keys = Reflect.ownKeys(o);
    for (var k = 0; k < keys.length; k++) {
      var desc = Object.getOwnPropertyDescriptor(o, keys[k]);
      if (!desc) continue;
      if ("value" in desc) push(desc.value);
      if (desc.get) push(desc.get);
      if (desc.set) push(desc.set);
    }
    try { Object.freeze(o); } catch (e) {}
  }
})();

return {dispatch: dispatch, aborted: aborted};
})
)JS";

static const char kSandboxPrelude[] = R"JS(
(function (host, rootJSON) {
  "use strict";
  var G = globalThis;
  var parse = JSON.parse, stringify = JSON.stringify, arrayIsArray = Array.isArray;
  var hostEmit = host.emit, hostLog = host.log, hostProvides = host.provides, hostRegisterType = host.registerType,
      hostStart = host.start, hostSend = host.send, hostGetRow = host.getRow, hostCompileModule = host.compileModule;

  // While mapDocument runs, emit collects rows here, in this realm; otherwise it goes to the host (filters by
  // view). Rows are written as an array element, not with push, which the design function could replace.
  var collected = null;
  function errorToJSON(e) {
    try {
      if (typeof e === "object" && e !== null && "stack" in e && "name" in e && "message" in e) {
        return {error: e.name, message: e.message};
      }
    } catch (x) {}
    return e;
  }
  function emit(key, value) {
    if (collected !== null) collected[collected.length] = [key, errorToJSON(value)];
    else hostEmit(key, value);
  }
  function log(message) { hostLog(message); }
  function sum(values) {
    var rv = 0;
    for (var i in values) rv += values[i];
    return rv;
  }
  function toJSON(value) { return stringify(value); }
  function isArray(value) { return arrayIsArray(value); }
  function provides(type, fun) { hostProvides(type, fun); }
  function registerType() {
    var args = [];
    for (var i = 0; i < arguments.length; i++) args[i] = arguments[i];
    hostRegisterType(args);
  }
  function start(resp) { hostStart(resp); }
  function send(chunk) { hostSend(chunk.toString()); }
  function getRow() { return hostGetRow(); }

  G.emit = emit; G.log = log; G.sum = sum; G.toJSON = toJSON; G.isArray = isArray; G.provides = provides;
  G.registerType = registerType; G.start = start; G.send = send; G.getRow = getRow;

  var root = rootJSON === null || rootJSON === undefined ? null : parse(rootJSON);

  function errstr(e) {
    try {
      if (e !== null && e !== undefined && typeof e.toSource === "function") return String(e.toSource());
      return String(e);
    } catch (x) { return "(an error that cannot be printed)"; }
  }

  // CommonJS modules stored in the design document. A "place" is {current, parent, id}: current is an object of
  // the document (a directory) or a module's source; parent is the place of the object that contains it.
  function resolve(names, place, fromRoot) {
    if (names.length === 0) {
      if (typeof place.current !== "string") {
        throw ["error", "invalid_require_path", "Must require a JavaScript string, not: " + (typeof place.current)];
      }
      return {current: place.current, parent: place.parent, id: place.id, exports: {}};
    }
    var n = names.shift();
    if (n === "..") {
      if (!(place && place.parent && place.parent.parent)) {
        throw ["error", "invalid_require_path", "Object has no parent " + stringify(place ? place.current : null)];
      }
      return resolve(names, {
        id: place.id.slice(0, place.id.lastIndexOf("/")),
        parent: place.parent.parent,
        current: place.parent.current
      }, false);
    }
    if (n === ".") {
      if (!(place && place.parent)) {
        throw ["error", "invalid_require_path", "Object has no parent " + stringify(place ? place.current : null)];
      }
      return resolve(names, {parent: place.parent, current: place.current, id: place.id}, false);
    }
    if (fromRoot) place = {current: root};
    var here = place.current;
    if (here === null || here === undefined || here[n] === undefined) {
      throw ["error", "invalid_require_path", "Object has no property \"" + n + "\". " + stringify(here)];
    }
    return resolve(names, {current: here[n], parent: place, id: place.id ? place.id + "/" + n : n}, false);
  }

  var cache = Object.create(null);

  function requireFrom(name, module) {
    module = module || {};
    var target = resolve(String(name).split("/"), module.parent, true);
    if (!(target.id in cache)) {
      // An empty exports object first, so circular requires end.
      cache[target.id] = {};
      try {
        var fn = hostCompileModule(target.current, target.id);
        fn.call(G, target, target.exports, function (n) { return requireFrom(n, target); });
      } catch (e) {
        throw ["error", "compilation_error", "Module require('" + name + "') raised error " + errstr(e)];
      }
      cache[target.id] = target.exports;
    }
    return cache[target.id];
  }

  if (root !== null) {
    G.require = function require(name) { return requireFrom(name, undefined); };
  }

  // Maps one document (its JSON text) with fn, all in this realm: the rows it emitted, as JSON text.
  function mapDocument(fn, docText, after) {
    collected = [];
    try {
      fn(parse(docText));
      after();
      return stringify(collected);
    } finally {
      collected = null;
    }
  }

  return {
    parse: parse,
    root: root,
    mapDocument: mapDocument,
    splitKVs: function (kvs) {
      var n = kvs.length, keys = new Array(n), values = new Array(n);
      for (var i = 0; i < n; i++) {
        keys[i] = kvs[i][0];
        values[i] = kvs[i][1];
      }
      return [keys, values];
    }
  };
})
)JS";

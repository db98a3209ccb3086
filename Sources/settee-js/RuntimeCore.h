// The runtime, part 1: the opening of its function expression, helpers, mime types and the render state of shows, lists and updates.
// Part of the runtime's text (see RuntimeSource.h): not valid JavaScript alone.

#pragma once

static const char kRuntimeCore[] = R"JS(
(function (natives) {
"use strict";

var print = natives.print;
var readline = natives.readline;
var collectGarbage = natives.gc;
var runJobs = natives.runJobs;
var setTimeoutMs = natives.setTimeout;
var restartClock = natives.restartClock;
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

)JS";

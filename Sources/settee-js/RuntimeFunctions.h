// The runtime, part 2: filters and validation, sandbox realms, views (reset, add_lib, add_fun, map_doc, reduce, rereduce).
// Part of the runtime's text (see RuntimeSource.h): not valid JavaScript alone.

#pragma once

static const char kRuntimeFunctions[] = R"JS(
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
  respond(validationAnswer(fun, ddoc, args));
}

// What a validate_doc_update call answers: 1 when it accepts the write; what it threw ({forbidden: …},
// {unauthorized: …} or anything else) when it refuses it; ["error", name, message] when it failed with an error.
// A time or memory limit is thrown on.
function validationAnswer(fun, ddoc, args) {
  try {
    fun.apply(ddoc, args);
    runJobs();
    return 1;
  } catch (error) {
    var res = resourceError(error);
    if (res) throw res;
    var isError = false;
    try { isError = error !== null && typeof error === "object" && !!error.name && !!error.stack; } catch (x) {}
    if (isError || error === undefined) return errorAnswer(error);
    return error;
  }
}

// Settee's own command (not CouchDB's protocol): a validate_doc_update function over many writes in one line, one
// parse and one answer instead of a command per write:
//   ["validate_batch", ddocId, [userCtx, secObj, [newDoc1, oldDoc1, newDoc2, oldDoc2, …]]] → [true, [answer1, …]]
// Each answer is what ["ddoc", ddocId, ["validate_doc_update"], [newDoc, oldDoc, userCtx, secObj]] answers. Each
// write gets the whole time limit, as a command of its own does, and its own copies of userCtx and secObj.
var VALIDATE_BATCH_PREFIX = "[\"validate_batch\",";

function validateBatch(line) {
  var start = VALIDATE_BATCH_PREFIX.length, end = jsonStringEnd(line, start);
  if (end < 0 || line.charAt(end) !== "," || !line.endsWith("]")) {
    throw ["error", "query_protocol_error", "validate_batch takes a design document id and [userCtx, secObj, docs]"];
  }
  var call = resolveDdoc(parse(line.slice(start, end)), ["validate_doc_update"], runValidate);
  var args;
  try {
    args = call.box.kit.parse(line.slice(end + 1, line.length - 1));
  } catch (e) {
    throw ["error", "query_protocol_error", "the command is not JSON: " + errorMessage(e)];
  }
  if (!isArray(args) || args.length !== 3 || !isArray(args[2]) || args[2].length % 2 !== 0) {
    throw ["error", "query_protocol_error", "validate_batch takes [userCtx, secObj, [newDoc, oldDoc, …]]"];
  }
  var contextText = stringify([args[0], args[1]]), docs = args[2], answers = [];
  for (var i = 0; i < docs.length; i += 2) {
    if (i > 0) restartClock();
    var context = call.box.kit.parse(contextText);
    resetRender(call.box);
    var answer = validationAnswer(call.fun, call.box.ddoc, [docs[i], docs[i + 1], context[0], context[1]]);
    if (answer !== 1) {
      // What respond() does for a single write whose answer is not JSON (a cycle, a BigInt, a throwing toJSON).
      try {
        if (typeof stringify(answer) !== "string") answer = null;
      } catch (e) {
        answer = ["error", "render_error", "the answer cannot be serialized as JSON: " + errstr(e)];
      }
    }
    answers.push(answer);
  }
  respond([true, answers]);
}

// The index just past the JSON string that starts at line[start] (its closing quote's index + 1), or -1.
function jsonStringEnd(line, start) {
  if (line.charAt(start) !== "\"") return -1;
  for (var i = start + 1; i < line.length; i++) {
    var c = line.charCodeAt(i);
    if (c === 92) { i++; continue; }  // a backslash escapes the next character
    if (c === 34) return i + 1;
  }
  return -1;
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

)JS";

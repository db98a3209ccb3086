// The runtime, part 3: Sync Gateway's sync function (Settee's own command, not CouchDB's protocol).
// Part of the runtime's text (see RuntimeSource.h): not valid JavaScript alone.

#pragma once

static const char kRuntimeSync[] = R"JS(
// MARK: Sync functions
//
//   ["sync_batch", source, [userCtx, [doc1, oldDoc1, doc2, oldDoc2, …]]] → [true, [answer1, …]]
//
// Runs a database's sync function (Sync Gateway's `function (doc, oldDoc, meta)`) on each write. userCtx is
// {name, roles, channels, admin}: the writer, the channels it may read, whether it is an admin (every require*()
// passes for an admin, as in Sync Gateway). An answer is [true, {channels[, access][, roles][, expiry]}] when the function
// accepted the write; otherwise [false, what it threw] ({forbidden: …}, {unauthorized: …}, a string, or ["error",
// name, message] for an error it failed with). Each write gets the whole time limit. The function runs in a sandbox of its
// own (one per source text), with the helpers below as its globals and no CouchDB design-function helpers.
var SYNC_BATCH_PREFIX = "[\"sync_batch\",";
var syncFunctions = new Map();

// Evaluated in the sandbox realm: installs the helpers and returns run(fn, doc, oldDoc, userCtx) → the outcome as
// JSON text. What the helpers record lives in this closure: the sync function can call them, not reach their state.
var SYNC_PRELUDE = `(function () {
  "use strict";
  var G = globalThis, stringify = JSON.stringify, isArray = Array.isArray, hasOwn = Object.prototype.hasOwnProperty,
      keysOf = Object.keys, indexOf = Function.prototype.call.bind(Array.prototype.indexOf);
  var out = null, user = null, granted = false, create = Object.create;
  function names(value, into, what) {
    if (value === null || value === undefined) return;
    if (isArray(value)) {
      for (var i = 0; i < value.length; i++) names(value[i], into, what);
      return;
    }
    if (typeof value !== "string") throw {forbidden: what + " names must be strings"};
    if (value.length === 0) return;
    into[into.length] = value;
  }
  function active() {
    if (out === null) throw new Error("sync function helpers work only while the sync function runs");
  }
  function channel() {
    active();
    for (var i = 0; i < arguments.length; i++) names(arguments[i], out.channels, "channel");
  }
  function grant(map, users, values, what) {
    var u = [], v = [];
    names(users, u, "user");
    names(values, v, what);
    if (u.length > 0) granted = true;
    for (var i = 0; i < u.length; i++) {
      var list = hasOwn.call(map, u[i]) ? map[u[i]] : (map[u[i]] = []);
      for (var j = 0; j < v.length; j++) list[list.length] = v[j];
    }
  }
  function access(users, channels) {
    active();
    grant(out.access, users, channels, "channel");
  }
  function role(users, roles) {
    active();
    var r = [];
    names(roles, r, "role");
    for (var i = 0; i < r.length; i++) {
      if (r[i].indexOf("role:") !== 0) throw {forbidden: "role() takes role names written role:name"};
    }
    grant(out.roles, users, r.map(function (x) { return x.slice(5); }), "role");
  }
  function expiry(value) {
    active();
    if (value === null || value === undefined) { out.expiry = null; return; }
    if (typeof value !== "number" && typeof value !== "string") throw {forbidden: "expiry takes a number or a date string"};
    out.expiry = value;
  }
  function listOf(value, what) {
    var list = [];
    names(value, list, what);
    return list;
  }
  function requireAdmin() {
    active();
    if (!user.admin) throw {forbidden: "sg admin required"};
  }
  function requireUser(names) {
    active();
    if (user.admin) return;
    if (indexOf(listOf(names, "user"), user.name) < 0) throw {forbidden: "sg wrong user"};
  }
  function requireRole(roles) {
    active();
    if (user.admin) return;
    var wanted = listOf(roles, "role");
    for (var i = 0; i < wanted.length; i++) {
      var r = wanted[i].slice(0, 5) === "role:" ? wanted[i].slice(5) : wanted[i];
      if (indexOf(user.roles, r) >= 0) return;
    }
    throw {forbidden: "sg missing role"};
  }
  function requireAccess(channels) {
    active();
    if (user.admin || indexOf(user.channels, "*") >= 0) return;
    var wanted = listOf(channels, "channel");
    for (var i = 0; i < wanted.length; i++) {
      if (indexOf(user.channels, wanted[i]) >= 0) return;
    }
    throw {forbidden: "sg missing channel access"};
  }
  G.channel = channel; G.access = access; G.role = role; G.expiry = expiry; G.requireAdmin = requireAdmin;
  G.requireUser = requireUser; G.requireRole = requireRole; G.requireAccess = requireAccess;
  return function run(fn, doc, oldDoc, userCtx, after) {
    // (The grant maps have no prototype: a user named __proto__ is a key like any other.)
    out = {channels: [], access: create(null), roles: create(null), expiry: null};
    user = userCtx;
    granted = false;
    var text;
    try {
      var result = fn(doc, oldDoc, {xattrs: {}});
      after();
      if (result !== null && (typeof result === "object" || typeof result === "function") && typeof result.then === "function") {
        throw new Error("the sync function returned a promise: it must decide synchronously");
      }
      // Only what it granted: most functions grant nothing, and the outcome is stored with every revision. The
      // channels alone are written name by name (strings: no toJSON of the function's can reach them).
      if (!granted && out.expiry === null) {
        var names = out.channels;
        text = '{"channels":[';
        for (var i = 0; i < names.length; i++) text += (i > 0 ? "," : "") + stringify(names[i]);
        text += "]}";
      } else {
        var kept = {channels: out.channels};
        if (keysOf(out.access).length > 0) kept.access = out.access;
        if (keysOf(out.roles).length > 0) kept.roles = out.roles;
        if (out.expiry !== null) kept.expiry = out.expiry;
        text = stringify(kept);
      }
    } finally {
      out = null;
      user = null;
      // Promise jobs the function left behind (a refused write's, or queued by its code while the outcome was
      // written) run now, while the helpers throw: they can't reach the next write's outcome.
      try { after(); } catch (e) {}
    }
    return text;
  };
})`;

function syncFunction(source) {
  var cached = syncFunctions.get(source);
  if (cached !== undefined) return cached;
  var box = createBox(null);
  var run = evaluate(box.sb, SYNC_PRELUDE, "sync prelude")();
  var entry = {box: box, run: run, fn: compileFunction(box, source, "sync function")};
  syncFunctions.set(source, entry);
  if (syncFunctions.size > 64) syncFunctions.delete(syncFunctions.keys().next().value);
  return entry;
}

function syncBatch(line) {
  var start = SYNC_BATCH_PREFIX.length, end = jsonStringEnd(line, start);
  if (end < 0 || line.charAt(end) !== "," || !line.endsWith("]")) {
    throw ["error", "query_protocol_error", "sync_batch takes a function's source and [userCtx, docs]"];
  }
  var entry = syncFunction(parse(line.slice(start, end)));
  var args;
  try {
    args = entry.box.kit.parse(line.slice(end + 1, line.length - 1));
  } catch (e) {
    throw ["error", "query_protocol_error", "the command is not JSON: " + errorMessage(e)];
  }
  if (!isArray(args) || args.length !== 2 || !isArray(args[1]) || args[1].length % 2 !== 0) {
    throw ["error", "query_protocol_error", "sync_batch takes [userCtx, [doc, oldDoc, …]]"];
  }
  // (The user context is read only by the helpers, from the prelude's closure: the function never holds it, so
  // one copy serves the whole line.)
  var context = args[0], docs = args[1], answers = [];
  for (var i = 0; i < docs.length; i += 2) {
    if (i > 0) restartClock();
    var answer;
    try {
      answer = "[true," + entry.run(entry.fn, docs[i], docs[i + 1], context, runJobs) + "]";
    } catch (error) {
      var res = resourceError(error);
      if (res) throw res;
      var isError = false;
      try { isError = error !== null && typeof error === "object" && !!error.name && !!error.stack; } catch (x) {}
      var refusal = (isError || error === undefined) ? errorAnswer(error) : error;
      try {
        answer = stringify(refusal);
        if (typeof answer !== "string") answer = "null";
      } catch (e) {
        answer = stringify(["error", "render_error", "the answer cannot be serialized as JSON: " + errstr(e)]);
      }
      answer = "[false," + answer + "]";
      // (Writing the refusal may have run the function's code, toJSON: what it queued runs now, out of any write.)
      try { runJobs(); } catch (e) {}
    }
    answers.push(answer);
  }
  print("[true,[" + answers.join(",") + "]]");
}

)JS";
